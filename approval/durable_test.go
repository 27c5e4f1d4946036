package approval_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// replica returns a durable Manager on cfg.Store, closed when t ends: two
// of them on one MemStore stand for two processes sharing a database.
func replica(t *testing.T, cfg approval.ManagerConfig) *approval.Manager {
	t.Helper()
	m := newManager(t, cfg)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// decisions collects what OnDecided is given.
type decisions chan memory.Approval

func newDecisions() decisions { return make(decisions, 64) }

func (d decisions) fn(a memory.Approval) { d <- a }

// next returns the next approval given to OnDecided, failing t when none
// comes within a few seconds.
func (d decisions) next(t *testing.T) memory.Approval {
	t.Helper()
	select {
	case a := <-d:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("OnDecided was not called")
		return memory.Approval{}
	}
}

// none fails t if OnDecided was called and not taken by next.
func (d decisions) none(t *testing.T, who string) {
	t.Helper()
	select {
	case a := <-d:
		t.Errorf("%s: OnDecided called for %s (%+v), want no call", who, a.ID, a.Decision)
	default:
	}
}

// waitAsync calls tk.Wait(ctx) in a goroutine; the outcome comes on the
// channel.
func waitAsync(ctx context.Context, tk agent.Ticket) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		d, err := tk.Wait(ctx)
		done <- outcome{d, err}
	}()
	return done
}

// within returns the outcome from done, failing t when it does not come
// within a few seconds.
func within(t *testing.T, done <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return")
		return outcome{}
	}
}

func stored(t *testing.T, st memory.ApprovalStore, id string) memory.Approval {
	t.Helper()
	a, err := st.GetApproval(context.Background(), id)
	require.NoError(t, err)
	return a
}
// failingStore is a MemStore whose approval methods fail while fail is set.
type failingStore struct {
	*memory.MemStore
	mu   sync.Mutex
	fail bool
}

var errStoreDown = errors.New("store down")

func (f *failingStore) down() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errStoreDown
	}
	return nil
}

func (f *failingStore) set(fail bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *failingStore) CreateApproval(ctx context.Context, a memory.Approval) error {
	if err := f.down(); err != nil {
		return err
	}
	return f.MemStore.CreateApproval(ctx, a)
}

func (f *failingStore) DecideApproval(ctx context.Context, s, id string, d memory.ApprovalDecision) (memory.Approval, error) {
	if err := f.down(); err != nil {
		return memory.Approval{}, err
	}
	return f.MemStore.DecideApproval(ctx, s, id, d)
}

func (f *failingStore) GetApproval(ctx context.Context, id string) (memory.Approval, error) {
	if err := f.down(); err != nil {
		return memory.Approval{}, err
	}
	return f.MemStore.GetApproval(ctx, id)
}

func (f *failingStore) PendingApprovals(ctx context.Context, s string) ([]memory.Approval, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.MemStore.PendingApprovals(ctx, s)
}

func (f *failingStore) ApprovalByKey(ctx context.Context, s, key string) (memory.Approval, error) {
	if err := f.down(); err != nil {
		return memory.Approval{}, err
	}
	return f.MemStore.ApprovalByKey(ctx, s, key)
}

func (f *failingStore) Decisions(ctx context.Context, q memory.DecisionQuery) ([]memory.Approval, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.MemStore.Decisions(ctx, q)
}
