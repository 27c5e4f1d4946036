package person_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/internal/waiting"
	"github.com/planround/planround/memory"
)

// replica returns a durable Approvals on cfg.Store, closed when t ends: two
// of them on one MemStore stand for two processes sharing a database.
func replica(t *testing.T, cfg person.ApprovalsConfig) *person.Approvals {
	t.Helper()
	m := startApprovals(t, cfg)
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

func TestStartApprovalsDurableConfig(t *testing.T) {
	st := &memory.MemStore{}
	tests := []struct {
		name string
		cfg  person.ApprovalsConfig
		want string // substring of the error; "" for none
	}{
		{"store only", person.ApprovalsConfig{Store: st}, ""},
		{"everything", person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: func(memory.Approval) {}, SuspendAfter: time.Minute}, ""},
		{"notifier without store", person.ApprovalsConfig{Notifier: st}, "Notifier needs a Store"},
		{"OnDecided without store", person.ApprovalsConfig{OnDecided: func(memory.Approval) {}}, ""}, // its own MemStore
		{"SuspendAfter without store", person.ApprovalsConfig{SuspendAfter: time.Minute}, ""},
		{"negative SuspendAfter", person.ApprovalsConfig{Store: st, SuspendAfter: -time.Second}, "negative SuspendAfter"},
		{"listen fails", person.ApprovalsConfig{Store: st, Notifier: failingNotifier{}}, "listen for decisions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			m, err := person.StartApprovals(tt.cfg)
			if tt.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.want)
				assert.Nil(t, m)
				return
			}
			require.NoError(t, err)
			require.NoError(t, m.Close())
			require.NoError(t, m.Close(), "a second Close does nothing")
		})
	}
}

type failingNotifier struct{}

func (failingNotifier) Notify(context.Context, string, string) error {
	return errors.New("notifier down")
}

func (failingNotifier) Listen(context.Context, string, func(string)) (func(), error) {
	return nil, errors.New("notifier down")
}

// TestDurableRequestStoresApproval: the approval is in the Store, with
// everything the call needs, before Request returns.
func TestDurableRequestStoresApproval(t *testing.T) {
	st := &memory.MemStore{}
	m := replica(t, person.ApprovalsConfig{Store: st})
	req := request("s", 7)
	req.Round = 3
	before := time.Now().Add(-time.Second)
	tk, err := m.Request(t.Context(), req)
	require.NoError(t, err)
	a := stored(t, st, tk.ApprovalID())
	assert.Equal(t, "s", a.SessionID)
	assert.Equal(t, "call_7", a.CallID)
	assert.Equal(t, "run_command", a.Tool)
	assert.JSONEq(t, `{"n":7}`, string(a.Arguments))
	assert.Equal(t, 3, a.Round)
	assert.False(t, a.Decided)
	assert.True(t, a.CreatedAt.After(before), "CreatedAt %v is the registration's time", a.CreatedAt)
	assert.Equal(t, 1, m.Len())

	d, err := tk.Wait(cancelledContext())
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, cancelledDecision, d)
	assert.Equal(t, 0, m.Len())
}

func cancelledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestDurableDecisionOnOtherReplica: a decision posted to B wakes the Wait
// on A through the Notifier, exactly once; A's OnDecided is not called (its
// Wait took the decision), B's is, once (B waits for nothing: in a host it
// would try to resume the run, and the session's lease would tell it that
// A drives it).
func TestDurableDecisionOnOtherReplica(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		onA, onB := newDecisions(), newDecisions()
		a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onA.fn})
		b := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onB.fn})

		tk, err := a.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		id := tk.ApprovalID()
		done := waitAsync(t.Context(), tk)
		synctest.Wait() // A's Wait waits
		require.Equal(t, 1, a.Len())
		require.Equal(t, 0, b.Len(), "B holds nothing")
		listed := pendingList(t, b, "s")
		require.Len(t, listed, 1, "B lists the approval from the Store")
		assert.Equal(t, id, listed[0].ApprovalID)
		assert.Equal(t, "call_1", listed[0].Call.ID)
		assert.Equal(t, agent.StateApprovalRequired, listed[0].Call.State)

		sent := agent.Decision{Approved: true, Reason: "fine", Arguments: json.RawMessage(`{"n":2}`), Scope: agent.ScopeSession}
		pending, err := respond(b, "s", id, request("s", 1), sent)
		require.NoError(t, err)
		require.True(t, pending)
		got := <-done
		require.NoError(t, got.err)
		assert.True(t, sameDecision(sent, got.d), "A's Wait = %+v, want %+v", got.d, sent)

		synctest.Wait() // every note handled
		onA.none(t, "A")
		x := <-onB
		assert.Equal(t, id, x.ID)
		assert.True(t, x.Decided && x.Decision.Approved)
		onB.none(t, "B")
		assert.Equal(t, 0, a.Len())

		pending, err = respond(a, "s", id, request("s", 1), agent.Decision{Reason: "too late"})
		require.NoError(t, err)
		assert.False(t, pending, "the first decision won")
		synctest.Wait()
		onA.none(t, "A after a late decision")
		onB.none(t, "B after a late decision")
		assert.Empty(t, pendingList(t, a, "s"))
	})
}

// TestDurableFirstDecisionWins: 16 decisions race for one approval from two
// Approvals; exactly one is taken, the Wait gets that one, and the Store
// holds it. Then B's OnDecided was called once per approval and A's never.
func TestDurableFirstDecisionWins(t *testing.T) {
	leaktest.Check(t)
	const approvals, deciders = 25, 16
	st := &memory.MemStore{}
	onA, onB := newDecisions(), newDecisions()
	a := startApprovals(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onA.fn})
	b := startApprovals(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onB.fn})
	defer a.Close()
	defer b.Close()
	ids := make(map[string]bool)
	for i := range approvals {
		tk, err := a.Request(t.Context(), request("s", i))
		require.NoError(t, err)
		id := tk.ApprovalID()
		ids[id] = true
		done := waitAsync(t.Context(), tk)

		start := make(chan struct{})
		taken := make([]bool, deciders)
		var wg sync.WaitGroup
		for j := range deciders {
			m := []*person.Approvals{a, b}[j%2]
			wg.Go(func() {
				<-start
				var err error
				taken[j], err = respond(m, "s", id, request("s", i), agent.Decision{Approved: j%3 == 0, Reason: fmt.Sprint("decider ", j)})
				if err != nil {
					t.Errorf("Respond %d: %v", j, err)
				}
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for j, ok := range taken {
			if ok {
				if winner >= 0 {
					t.Fatalf("approval %d: deciders %d and %d both taken", i, winner, j)
				}
				winner = j
			}
		}
		require.GreaterOrEqual(t, winner, 0, "approval %d: no decision taken", i)
		want := fmt.Sprint("decider ", winner)
		got := within(t, done)
		require.NoError(t, got.err)
		assert.Equal(t, want, got.d.Reason, "approval %d: Wait", i)
		assert.Equal(t, want, stored(t, st, id).Decision.Reason, "approval %d: Store", i)
	}
	for range approvals {
		x := onB.next(t)
		if !ids[x.ID] {
			t.Errorf("B's OnDecided got %s twice or unknown", x.ID)
		}
		delete(ids, x.ID)
	}
	require.NoError(t, b.Close()) // no note is handled after Close
	onB.none(t, "B")
	onA.none(t, "A")
	assert.Equal(t, 0, a.Len())
	assert.Equal(t, 0, b.Len())
}

// TestDurableSuspendAfter: a Wait nobody answers suspends after
// SuspendAfter and the approval stays pending; a late decision goes to
// OnDecided, and the resumed turn's Request gets it as a Decided ticket.
func TestDurableSuspendAfter(t *testing.T) {
	tests := []struct {
		name string
		sent agent.Decision
		want agent.Decision
	}{
		{"approved", agent.Decision{Approved: true, Scope: agent.ScopeAlways}, agent.Decision{Approved: true, Scope: agent.ScopeAlways}},
		{"rejected by a person", agent.Decision{Reason: "no"}, agent.Decision{Reason: "no", Cause: agent.CauseUser}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			synctest.Test(t, func(t *testing.T) {
				st := &memory.MemStore{}
				on := newDecisions()
				m := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: on.fn, SuspendAfter: time.Minute, Timeout: time.Hour})
				req := keyed("s", 1)
				tk, err := m.Request(t.Context(), req)
				require.NoError(t, err)
				id := tk.ApprovalID()
				start := time.Now()
				d, err := tk.Wait(t.Context())
				require.ErrorIs(t, err, agent.ErrSuspended)
				assert.Equal(t, time.Minute, time.Since(start))
				assert.False(t, d.Approved)
				assert.Equal(t, 0, m.Len(), "a suspended Wait holds nothing")
				assert.False(t, stored(t, st, id).Decided, "the approval stays pending")
				require.Len(t, pendingList(t, m, "s"), 1, "and is listed")

				pending, err := respond(m, "s", id, req, tt.sent)
				require.NoError(t, err)
				require.True(t, pending, "a suspended approval can be decided")
				x := <-on
				assert.Equal(t, id, x.ID)
				assert.Equal(t, "s", x.SessionID)
				synctest.Wait()
				on.none(t, "after the decision")
				tk, err = m.Request(t.Context(), req)
				require.NoError(t, err)
				got, decided := tk.Decision()
				require.True(t, decided, "the resumed request gets the decision at once")
				assert.True(t, sameDecision(tt.want, got), "Decision = %+v, want %+v", got, tt.want)
				assert.Equal(t, 0, m.Len())
			})
		})
	}
}

// TestDurableSuspendFindsDecision: a decision taken in the Store whose note
// never came (the deciding process has no Notifier) is found by the last
// look before suspending, and wins.
func TestDurableSuspendFindsDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		on := newDecisions()
		a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: on.fn, SuspendAfter: time.Minute})
		deaf := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := a.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		done := waitAsync(t.Context(), tk)
		synctest.Wait()
		pending, err := respond(deaf, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true, Reason: "silent"})
		require.NoError(t, err)
		require.True(t, pending)
		synctest.Wait()
		select {
		case o := <-done:
			t.Fatalf("Wait returned %+v before the suspension: no note was sent", o)
		default:
		}
		start := time.Now()
		got := <-done
		require.NoError(t, got.err)
		assert.Equal(t, byPerson(agent.Decision{Approved: true, Reason: "silent", Scope: agent.ScopeOnce}), got.d)
		assert.Equal(t, time.Minute, time.Since(start), "found at the suspension")
		on.none(t, "A")
		assert.Equal(t, 0, a.Len())
	})
}

// TestDurableResumeRequest: a resumed turn's Request with the ApprovalID of
// a pending approval gets a Pending ticket with the same id, in any
// process, and the decision reaches it; any other id gets a new approval.
func TestDurableResumeRequest(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		onA, onB := newDecisions(), newDecisions()
		a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onA.fn})
		b := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onB.fn})

		req := keyed("s", 1)
		first, err := a.Request(t.Context(), req)
		require.NoError(t, err)
		id := first.ApprovalID()
		// A shuts down: its run is suspended, the approval stays.
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(fmt.Errorf("host shutting down: %w", agent.ErrSuspended))
		_, err = first.Wait(ctx)
		require.ErrorIs(t, err, agent.ErrSuspended)
		require.False(t, stored(t, st, id).Decided)

		// B resumes the turn.
		tk, err := b.Request(t.Context(), req)
		require.NoError(t, err)
		_, decided := tk.Decision()
		require.False(t, decided)
		require.Equal(t, id, tk.ApprovalID(), "the same approval, the same card")
		assert.Equal(t, 1, b.Len())
		_, err = b.Request(t.Context(), req)
		assert.ErrorContains(t, err, "held in this process already", "one ticket per approval in a process")
		done := waitAsync(t.Context(), tk)
		synctest.Wait()

		pending, err := respond(a, "s", id, req, agent.Decision{Reason: "no"})
		require.NoError(t, err)
		require.True(t, pending)
		got := <-done
		require.NoError(t, got.err)
		assert.Equal(t, byPerson(agent.Decision{Reason: "no"}), got.d)
		x := <-onA // A waits for nothing
		assert.Equal(t, id, x.ID)
		synctest.Wait()
		onA.none(t, "A")
		onB.none(t, "B: its Wait took the decision")

		// Another key, or the same key in another session, gets a new
		// approval.
		for _, tc := range []struct{ name, session, key string }{
			{"another key", "s", "msg_2/call_1"},
			{"the key in another session", "other", req.Key},
		} {
			r := request(tc.session, 1)
			r.Key = tc.key
			tk, err := b.Request(t.Context(), r)
			require.NoError(t, err, tc.name)
			assert.NotEqual(t, id, tk.ApprovalID(), tc.name)
			got := stored(t, st, tk.ApprovalID())
			assert.False(t, got.Decided, tc.name)
			assert.Equal(t, tc.session, got.SessionID, tc.name)
			_, _ = tk.Wait(cancelledContext())
		}
		assert.Equal(t, 0, a.Len())
		assert.Equal(t, 0, b.Len())
	})
}

// TestResumeRequestWithoutStore: an Approvals without a Store keeps its
// approvals in a MemStore of its own, so a resumed turn in the same process
// that asks again with the Key gets the same approval, and its decision;
// while a ticket of this Approvals holds the approval, a second Request for
// the key is refused.
func TestResumeRequestWithoutStore(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := keyed("s", 1)
	first, err := m.Request(t.Context(), req)
	require.NoError(t, err)
	_, err = m.Request(t.Context(), req)
	assert.ErrorContains(t, err, "held in this process already", "one ticket per approval in a process")
	_, err = first.Wait(withCause(t.Context(), agent.ErrSuspended))
	require.ErrorIs(t, err, agent.ErrSuspended)

	tk, err := m.Request(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, first.ApprovalID(), tk.ApprovalID(), "the resumed turn's card is the same")
	pending, err := respond(m, "s", tk.ApprovalID(), req, agent.Decision{Approved: true})
	require.NoError(t, err)
	require.True(t, pending)
	d, err := tk.Wait(t.Context())
	require.NoError(t, err)
	assert.True(t, d.Approved)

	again, err := m.Request(t.Context(), req)
	require.NoError(t, err)
	d, decided := again.Decision()
	assert.True(t, decided && d.Approved, "a decided approval is a Decided ticket: %+v", d)
	other, err := m.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	assert.NotEqual(t, first.ApprovalID(), other.ApprovalID(), "a request without a key gets a new approval")
	_, _ = other.Wait(cancelledContext())
	assert.Equal(t, 0, m.Len())
}

// TestDurableResumeDecided: the Decided ticket of a resumed request keeps
// the decision's own cause, and gives a person's rejection CauseUser.
func TestDurableResumeDecided(t *testing.T) {
	tests := []struct {
		name string
		sent agent.Decision // given to Respond; zero means: time out
		want agent.Decision
	}{
		{"approved with edit", agent.Decision{Approved: true, Arguments: json.RawMessage(`{"n":5}`)}, agent.Decision{Approved: true, Arguments: json.RawMessage(`{"n":5}`)}},
		{"rejected", agent.Decision{Reason: "no"}, agent.Decision{Reason: "no", Cause: agent.CauseUser}},
		{"rejected without reason", agent.Decision{}, agent.Decision{Cause: agent.CauseUser}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memory.MemStore{}
			m := replica(t, person.ApprovalsConfig{Store: st})
			req := keyed("s", 1)
			tk, err := m.Request(t.Context(), req)
			require.NoError(t, err)
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(agent.ErrSuspended)
			_, err = tk.Wait(ctx)
			require.ErrorIs(t, err, agent.ErrSuspended)
			pending, err := respond(m, "s", tk.ApprovalID(), req, tt.sent)
			require.NoError(t, err)
			require.True(t, pending)
			again, err := m.Request(t.Context(), req)
			require.NoError(t, err)
			got, decided := again.Decision()
			require.True(t, decided)
			assert.True(t, sameDecision(tt.want, got), "got %+v, want %+v", got, tt.want)
		})
	}
	t.Run("timed out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &memory.MemStore{}
			m := replica(t, person.ApprovalsConfig{Store: st, Timeout: time.Minute})
			req := keyed("s", 1)
			tk, err := m.Request(t.Context(), req)
			require.NoError(t, err)
			d, err := tk.Wait(t.Context())
			require.NoError(t, err)
			require.Equal(t, agent.CauseTimeout, d.Cause)
			again, err := m.Request(t.Context(), req)
			require.NoError(t, err)
			got, decided := again.Decision()
			require.True(t, decided)
			assert.Equal(t, timedOut("1m0s"), got)
		})
	})
}

// TestDurableTimeoutFromCreation: the timeout counts from the approval's
// creation, across suspensions and resumptions, and is decided in the
// Store.
func TestDurableTimeoutFromCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		m := replica(t, person.ApprovalsConfig{Store: st, Timeout: 10 * time.Minute, SuspendAfter: 4 * time.Minute})
		req := keyed("s", 1)
		start := time.Now()
		tk, err := m.Request(t.Context(), req)
		require.NoError(t, err)
		id := tk.ApprovalID()
		for _, at := range []time.Duration{4 * time.Minute, 8 * time.Minute} {
			_, err = tk.Wait(t.Context())
			require.ErrorIs(t, err, agent.ErrSuspended)
			assert.Equal(t, at, time.Since(start), "suspended")
			tk, err = m.Request(t.Context(), req) // resumed
			require.NoError(t, err)
			require.Equal(t, id, tk.ApprovalID())
		}
		d, err := tk.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 10*time.Minute, time.Since(start), "timed out 10m after the creation, not after the last resumption")
		want := timedOut("10m0s")
		assert.Equal(t, want, d)
		a := stored(t, st, id)
		assert.True(t, a.Decided)
		assert.Equal(t, "timeout", a.Decision.Cause)
		pending, err := respond(m, "s", id, req, agent.Decision{Approved: true})
		require.NoError(t, err)
		assert.False(t, pending, "a timed out approval is decided")

		// A turn resumed after its deadline times out at once.
		time.Sleep(time.Hour)
		late := keyed("s", 2)
		tk, err = m.Request(t.Context(), late)
		require.NoError(t, err)
		_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
		require.ErrorIs(t, err, agent.ErrSuspended)
		time.Sleep(time.Hour)
		tk, err = m.Request(t.Context(), late)
		require.NoError(t, err)
		start = time.Now()
		d, err = tk.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, agent.CauseTimeout, d.Cause)
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Equal(t, 0, m.Len())
	})
}

func withCause(parent context.Context, cause error) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	cancel(cause)
	return ctx
}

// TestDurableTimeoutLosesToDecision: a person's decision taken in the Store
// by another process whose note never came, just before the timeout, stands
// against the timeout.
func TestDurableTimeoutLosesToDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		a := replica(t, person.ApprovalsConfig{Store: st, Timeout: time.Minute})
		deaf := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := a.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		done := waitAsync(t.Context(), tk)
		time.Sleep(59 * time.Second)
		pending, err := respond(deaf, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true, Reason: "just in time"})
		require.NoError(t, err)
		require.True(t, pending)
		got := <-done
		require.NoError(t, got.err)
		assert.True(t, got.d.Approved, "the decision stands: %+v", got.d)
		assert.Equal(t, "just in time", got.d.Reason)
		assert.True(t, stored(t, st, tk.ApprovalID()).Decision.Approved)
		assert.Equal(t, 0, a.Len())
	})
}

// TestDurableContextEnds: a Wait whose context ends decides the approval as
// interrupted, so that a later decision is refused; one whose context's
// cause is ErrSuspended leaves it as it is.
func TestDurableContextEnds(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := map[bool]string{false: "ended before Wait", true: "ends during Wait"}[during]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &memory.MemStore{}
				m := replica(t, person.ApprovalsConfig{Store: st})
				wait := func(tk agent.Ticket, cause error) outcome {
					ctx, cancel := context.WithCancelCause(t.Context())
					if !during {
						cancel(cause)
						d, err := tk.Wait(ctx)
						return outcome{d, err}
					}
					done := waitAsync(ctx, tk)
					synctest.Wait()
					cancel(cause)
					return <-done
				}

				tk, err := m.Request(t.Context(), request("s", 1))
				require.NoError(t, err)
				got := wait(tk, fmt.Errorf("shutting down: %w", agent.ErrSuspended))
				require.ErrorIs(t, got.err, agent.ErrSuspended)
				assert.False(t, stored(t, st, tk.ApprovalID()).Decided, "a suspension leaves the approval pending")
				assert.Equal(t, 0, m.Len())

				tk, err = m.Request(t.Context(), request("s", 2))
				require.NoError(t, err)
				got = wait(tk, nil)
				require.ErrorIs(t, got.err, context.Canceled)
				assert.Equal(t, cancelledDecision, got.d)
				a := stored(t, st, tk.ApprovalID())
				assert.True(t, a.Decided)
				assert.Equal(t, string(agent.CauseApprovalInterrupted), a.Decision.Cause)
				pending, err := respond(m, "s", tk.ApprovalID(), request("s", 2), agent.Decision{Approved: true})
				require.NoError(t, err)
				assert.False(t, pending, "an interrupted approval takes no later decision")
				assert.Equal(t, 0, m.Len())
			})
		})
	}
	t.Run("decided before the suspension", func(t *testing.T) {
		st := &memory.MemStore{}
		m := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := m.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		_, err = respond(m, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true})
		require.NoError(t, err)
		_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
		require.ErrorIs(t, err, agent.ErrSuspended, "the suspended run does not take the decision: the resumed turn will")
		assert.True(t, stored(t, st, tk.ApprovalID()).Decision.Approved)
		assert.Equal(t, 0, m.Len())
	})
	t.Run("decided elsewhere before the interrupt", func(t *testing.T) {
		st := &memory.MemStore{}
		m := replica(t, person.ApprovalsConfig{Store: st})
		deaf := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := m.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		_, err = respond(deaf, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Reason: "no"})
		require.NoError(t, err)
		d, err := tk.Wait(cancelledContext())
		require.NoError(t, err, "a decision taken before the context ended wins, as without a Store")
		assert.Equal(t, byPerson(agent.Decision{Reason: "no"}), d)
	})
}

// TestDurableCancelSession: CancelSession cancels every pending approval of
// the session in the Store, also one no Wait of this process waits for
// (OnDecided gets it); the other processes' Waits are woken.
func TestDurableCancelSession(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		onA, onB := newDecisions(), newDecisions()
		a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onA.fn})
		b := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: onB.fn})

		waited, err := a.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		done := waitAsync(t.Context(), waited)
		time.Sleep(time.Second) // orders the approvals
		// B registers one approval and does not wait for it yet.
		local, err := b.Request(t.Context(), request("s", 2))
		require.NoError(t, err)
		time.Sleep(time.Second)
		suspended, err := b.Request(t.Context(), request("s", 3))
		require.NoError(t, err)
		_, err = suspended.Wait(withCause(t.Context(), agent.ErrSuspended))
		require.ErrorIs(t, err, agent.ErrSuspended)
		kept, err := a.Request(t.Context(), request("other", 4))
		require.NoError(t, err)
		synctest.Wait()

		listed := pendingList(t, b, "s")
		require.Len(t, listed, 3, "Pending lists the Store's approvals, also those nobody waits for")
		for i, p := range listed {
			assert.Equal(t, fmt.Sprint("call_", i+1), p.Call.ID, "oldest first")
		}
		assert.Empty(t, pendingList(t, b, ""), "no session, no approvals")
		assert.Equal(t, 0, cancelSession(t, b, ""))

		n, err := b.CancelSession(t.Context(), "s")
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		got := <-done
		require.NoError(t, got.err)
		assert.Equal(t, cancelledDecision, got.d, "A's Wait is woken by the note")
		d, err := local.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, cancelledDecision, d)
		synctest.Wait() // every note handled
		// Each Approvals' OnDecided gets the decisions it has no Wait for:
		// B's, of the approval nobody waits for and of A's; A's, of that
		// one too (from the note) and of B's registered one.
		assert.ElementsMatch(t, []string{suspended.ApprovalID(), waited.ApprovalID()}, ids(onB), "B")
		assert.ElementsMatch(t, []string{suspended.ApprovalID(), local.ApprovalID()}, ids(onA), "A")
		for _, id := range []string{waited.ApprovalID(), local.ApprovalID(), suspended.ApprovalID()} {
			a := stored(t, st, id)
			assert.True(t, a.Decided && a.Decision.Cause == string(agent.CauseApprovalInterrupted), "%s: %+v", id, a)
		}
		assert.Empty(t, pendingList(t, a, "s"))
		assert.Len(t, pendingList(t, a, "other"), 1, "another session's approval stays")
		assert.Equal(t, 0, cancelSession(t, b, "s"))
		_, _ = kept.Wait(cancelledContext())
		assert.Equal(t, 0, a.Len())
		assert.Equal(t, 0, b.Len())
	})
}

// ids drains d and returns the ids it held.
func ids(d decisions) []string {
	var out []string
	for {
		select {
		case a := <-d:
			out = append(out, a.ID)
		default:
			return out
		}
	}
}

// TestDurableLostNotes: an empty note (notes may have been lost) makes every
// Approvals look up the approvals its Waits wait for.
func TestDurableLostNotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		lossy := &lossyNotifier{MemStore: st}
		on := newDecisions()
		a := replica(t, person.ApprovalsConfig{Store: st, Notifier: lossy, OnDecided: on.fn})
		deaf := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := a.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		other, err := a.Request(t.Context(), request("s", 2))
		require.NoError(t, err)
		done := waitAsync(t.Context(), tk)
		synctest.Wait()
		_, err = respond(deaf, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true})
		require.NoError(t, err)
		synctest.Wait()
		select {
		case o := <-done:
			t.Fatalf("Wait returned %+v without a note", o)
		default:
		}
		require.NoError(t, lossy.lose(t.Context()))
		got := <-done
		require.NoError(t, got.err)
		assert.True(t, got.d.Approved)
		synctest.Wait()
		on.none(t, "A")
		assert.Equal(t, 1, a.Len(), "the undecided one still waits")
		_, _ = other.Wait(cancelledContext())
	})
}

// lossyNotifier is a MemStore whose listeners can be told that notes were
// lost.
type lossyNotifier struct {
	*memory.MemStore
}

const lostNote = "planround-test: notes were lost"

func (l *lossyNotifier) Listen(ctx context.Context, channel string, fn func(string)) (func(), error) {
	return l.MemStore.Listen(ctx, channel, func(p string) {
		if p == lostNote {
			p = ""
		}
		fn(p)
	})
}

func (l *lossyNotifier) lose(ctx context.Context) error {
	return l.Notify(ctx, waiting.Channel, lostNote)
}

// TestDurableOnRegister: OnRegister sees a new approval once it is in the
// Store (an auto-approval from it is taken), and a resumed one too.
func TestDurableOnRegister(t *testing.T) {
	st := &memory.MemStore{}
	var m *person.Approvals
	var seen []string
	m = replica(t, person.ApprovalsConfig{Store: st, SuspendAfter: time.Hour, OnRegister: func(p approval.PendingApproval) {
		seen = append(seen, p.ApprovalID)
		if p.Call.ID == "call_1" {
			if _, err := m.Respond(t.Context(), person.ReplyTo(p, agent.Decision{Approved: true})); err != nil {
				t.Errorf("Respond from OnRegister: %v", err)
			}
		}
	}})
	tk, err := m.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	first := tk.ApprovalID()
	d, err := tk.Wait(t.Context())
	require.NoError(t, err)
	assert.True(t, d.Approved)

	req := keyed("s", 2)
	tk, err = m.Request(t.Context(), req)
	require.NoError(t, err)
	_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
	require.ErrorIs(t, err, agent.ErrSuspended)
	again, err := m.Request(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{first, tk.ApprovalID(), tk.ApprovalID()}, seen)
	_, _ = again.Wait(cancelledContext())
	assert.Equal(t, 0, m.Len())
}

// TestDurableStoreFails: a failing Store makes the calls fail with an error
// that says so, and changes nothing.
func TestDurableStoreFails(t *testing.T) {
	st := &failingStore{MemStore: &memory.MemStore{}}
	m := replica(t, person.ApprovalsConfig{Store: st})
	tk, err := m.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	st.set(true)

	_, err = m.Request(t.Context(), request("s", 2))
	require.ErrorIs(t, err, errStoreDown)
	assert.Contains(t, err.Error(), "store the approval of call call_2")
	assert.Equal(t, 1, m.Len(), "nothing registered")

	other := replica(t, person.ApprovalsConfig{Store: st})
	_, err = other.Request(t.Context(), keyed("s", 3))
	require.ErrorIs(t, err, errStoreDown)
	assert.Contains(t, err.Error(), "store the approval of call call_3")
	assert.Equal(t, 0, other.Len())

	pending, err := respond(m, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true})
	require.ErrorIs(t, err, errStoreDown)
	assert.False(t, pending)
	list, err := m.Pending(t.Context(), "s")
	require.ErrorIs(t, err, errStoreDown)
	assert.Empty(t, list)
	n, err := m.CancelSession(t.Context(), "s")
	require.ErrorIs(t, err, errStoreDown)
	assert.Equal(t, 0, n)

	d, err := tk.Wait(cancelledContext())
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "did not record the outcome")
	assert.Equal(t, cancelledDecision, d)
	assert.Equal(t, 0, m.Len())

	st.set(false)
	assert.Len(t, pendingList(t, m, "s"), 1, "the Store still has the approval it could not decide")
}

func TestDecisionEncoding(t *testing.T) {
	tests := []agent.Decision{
		{Approved: true},
		{Approved: true, Arguments: json.RawMessage(`{"a":1}`), Scope: agent.ScopeSession, Reason: "edited"},
		{Approved: true, Scope: agent.ScopeAlways},
		{Reason: "no", Cause: agent.CauseTimeout},
		{Cause: agent.CauseApprovalInterrupted, Reason: agent.CauseApprovalInterrupted.DefaultReason()},
	}
	for _, d := range tests {
		enc := person.EncodeDecision(d)
		assert.Contains(t, []string{"once", "session", "always"}, enc.Scope)
		got := person.DecodeDecision(enc)
		assert.True(t, sameDecision(d, got), "round trip of %+v gave %+v", d, got)
	}
	assert.Equal(t, agent.ScopeOnce, person.DecodeDecision(memory.ApprovalDecision{Approved: true, Scope: "forever"}).Scope, "an unknown scope is the narrowest")
	assert.Equal(t, agent.ScopeOnce, person.DecodeDecision(memory.ApprovalDecision{Approved: true}).Scope)
}

// heldNotifier is a MemStore whose notes are held until flush: the note
// about a decision then comes after the Wait took the decision from the
// Store by another way.
type heldNotifier struct {
	*memory.MemStore
	mu   sync.Mutex
	held []string
}

func (h *heldNotifier) Notify(_ context.Context, _, payload string) error {
	h.mu.Lock()
	h.held = append(h.held, payload)
	h.mu.Unlock()
	return nil
}

func (h *heldNotifier) flush(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	require.NotEmpty(t, held, "a note was sent")
	for _, p := range held {
		require.NoError(t, h.MemStore.Notify(t.Context(), waiting.Channel, p))
	}
}

// TestDurableLateNote: when A's Wait took B's decision from the Store
// before B's note came (a losing Respond on A, the look before suspending,
// a timeout, a resumed request), the note is no news: A's OnDecided is not
// called, which would resume a turn A's run already goes on with. When A
// waits for nothing, the same note goes to OnDecided.
func TestDurableLateNote(t *testing.T) {
	tests := []struct {
		name        string
		suspend     time.Duration
		take        func(t *testing.T, a *person.Approvals, tk agent.Ticket, req agent.ApprovalRequest, decide func())
		wantDecided bool // A's OnDecided gets the note
	}{
		{"losing Respond on A", 0, func(t *testing.T, a *person.Approvals, tk agent.Ticket, _ agent.ApprovalRequest, decide func()) {
			done := waitAsync(t.Context(), tk)
			synctest.Wait()
			decide()
			pending, err := respond(a, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Reason: "late"})
			require.NoError(t, err)
			require.False(t, pending)
			got := <-done
			assert.Equal(t, "from B", got.d.Reason)
		}, false},
		{"look before suspending", time.Minute, func(t *testing.T, _ *person.Approvals, tk agent.Ticket, _ agent.ApprovalRequest, decide func()) {
			done := waitAsync(t.Context(), tk)
			time.Sleep(30 * time.Second)
			decide()
			got := <-done
			require.NoError(t, got.err)
			assert.Equal(t, "from B", got.d.Reason)
		}, false},
		{"timeout", 0, func(t *testing.T, _ *person.Approvals, tk agent.Ticket, _ agent.ApprovalRequest, decide func()) {
			done := waitAsync(t.Context(), tk)
			time.Sleep(time.Hour - time.Second)
			decide()
			got := <-done
			require.NoError(t, got.err)
			assert.Equal(t, "from B", got.d.Reason)
		}, false},
		{"resumed request", 0, func(t *testing.T, a *person.Approvals, tk agent.Ticket, req agent.ApprovalRequest, decide func()) {
			_, err := tk.Wait(withCause(t.Context(), agent.ErrSuspended))
			require.ErrorIs(t, err, agent.ErrSuspended)
			decide()
			again, err := a.Request(t.Context(), req)
			require.NoError(t, err)
			d, decided := again.Decision()
			require.True(t, decided)
			assert.Equal(t, "from B", d.Reason)
		}, false},
		{"suspended: nobody waits", 0, func(t *testing.T, _ *person.Approvals, tk agent.Ticket, _ agent.ApprovalRequest, decide func()) {
			_, err := tk.Wait(withCause(t.Context(), agent.ErrSuspended))
			require.ErrorIs(t, err, agent.ErrSuspended)
			decide()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &memory.MemStore{}
				notes := &heldNotifier{MemStore: st}
				onA := newDecisions()
				a := replica(t, person.ApprovalsConfig{Store: st, Notifier: notes, OnDecided: onA.fn, Timeout: time.Hour, SuspendAfter: tt.suspend})
				b := replica(t, person.ApprovalsConfig{Store: st, Notifier: notes, Timeout: time.Hour})
				req := keyed("s", 1)
				tk, err := a.Request(t.Context(), req)
				require.NoError(t, err)
				tt.take(t, a, tk, req, func() {
					pending, err := respond(b, "s", tk.ApprovalID(), req, agent.Decision{Reason: "from B"})
					require.NoError(t, err)
					require.True(t, pending)
				})
				notes.flush(t)
				synctest.Wait()
				if tt.wantDecided {
					assert.Equal(t, []string{tk.ApprovalID()}, ids(onA))
				} else {
					onA.none(t, "A")
				}
				assert.Equal(t, 0, a.Len())
			})
		})
	}
}

// TestDurableResumeThroughWrappers: a resumed turn's request goes past the
// policies of the Approver (the runner's policies, an AllowList's among
// them) to the approval the Store holds: a person's rejection stands even
// when a policy, or a grant learned since, would approve the tool; and an
// AllowList wrapped around the approvals learns the grant of a decision
// taken while the run was suspended.
func TestDurableResumeThroughWrappers(t *testing.T) {
	st := &memory.MemStore{}
	m := replica(t, person.ApprovalsConfig{Store: st})
	list := approval.NewAllowList()
	wrapped := list.Wrap(m)
	chained := m.Approver(approval.AllowTools("run_command"))
	granting := m.Approver(list.Policy())

	suspendOne := func(i int, d agent.Decision) agent.ApprovalRequest {
		req := keyed("s", i)
		tk, err := m.Request(t.Context(), req)
		require.NoError(t, err)
		_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
		require.ErrorIs(t, err, agent.ErrSuspended)
		_, err = respond(m, "s", tk.ApprovalID(), req, d)
		require.NoError(t, err)
		return req
	}

	rejected := suspendOne(1, agent.Decision{Reason: "no"})
	tk, err := chained.Request(t.Context(), rejected)
	require.NoError(t, err)
	d, decided := tk.Decision()
	require.True(t, decided)
	assert.False(t, d.Approved, "the policy approves run_command, but a person rejected this call")
	assert.Equal(t, agent.CauseUser, d.Cause)

	granted := suspendOne(2, agent.Decision{Approved: true, Scope: agent.ScopeSession})
	require.False(t, list.Allowed("s", "run_command"))
	tk, err = wrapped.Request(t.Context(), granted)
	require.NoError(t, err)
	d, decided = tk.Decision()
	require.True(t, decided && d.Approved)
	assert.True(t, list.Allowed("s", "run_command"), "the grant of the resumed decision is learned")

	tk, err = granting.Request(t.Context(), rejected)
	require.NoError(t, err)
	d, _ = tk.Decision()
	assert.False(t, d.Approved, "the grant does not overrule the person's rejection")
	assert.Equal(t, 0, m.Len())
}

// TestCancelApproval: the agent cancels the approval of a call it rejected
// because the user moved on; the approval is decided so, a ticket that holds
// it gets that decision, a later answer finds it stale, and nobody is told
// (no OnDecided). Wrappers pass the call on.
func TestCancelApproval(t *testing.T) {
	movedOn := agent.Decision{Reason: agent.CauseMovedOn.DefaultReason(), Cause: agent.CauseMovedOn, By: approval.ViaSystem, Via: approval.ViaSystem}
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "store"}[durable], func(t *testing.T) {
			st := &memory.MemStore{}
			on := newDecisions()
			cfg := person.ApprovalsConfig{}
			if durable {
				cfg = person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: on.fn}
			}
			m := replica(t, cfg)
			var canceler agent.ApprovalCanceler = m
			tk, err := m.Request(t.Context(), request("s", 1))
			require.NoError(t, err)
			id := tk.ApprovalID()

			assert.ErrorIs(t, canceler.CancelApproval(t.Context(), "other", id), approval.ErrWrongSession)
			assert.NoError(t, canceler.CancelApproval(t.Context(), "s", "unknown"))
			wrapped, ok := approval.Chain(m).(agent.ApprovalCanceler)
			require.True(t, ok, "Chain passes CancelApproval on")
			_, ok = m.Approver().(agent.ApprovalCanceler)
			require.True(t, ok, "the Approver passes CancelApproval on")
			require.NoError(t, wrapped.CancelApproval(t.Context(), "s", id))
			assert.Equal(t, 0, m.Len())
			d, err := tk.Wait(t.Context())
			require.NoError(t, err)
			assert.Equal(t, movedOn, d)
			pending, err := respond(m, "s", id, request("s", 1), agent.Decision{Approved: true})
			require.NoError(t, err)
			assert.False(t, pending, "a cancelled approval is not answerable")
			require.NoError(t, canceler.CancelApproval(t.Context(), "s", id), "again: nothing to do")
			if durable {
				a := stored(t, st, id)
				assert.True(t, a.Decided)
				assert.Equal(t, string(agent.CauseMovedOn), a.Decision.Cause)
				on.none(t, "the agent closed the call itself")
			}
		})
	}
	t.Run("a suspended approval, from another process", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &memory.MemStore{}
			on := newDecisions()
			a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: on.fn})
			b := replica(t, person.ApprovalsConfig{Store: st, Notifier: st, OnDecided: on.fn})
			tk, err := a.Request(t.Context(), request("s", 1))
			require.NoError(t, err)
			_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
			require.ErrorIs(t, err, agent.ErrSuspended)
			require.NoError(t, b.CancelApproval(t.Context(), "s", tk.ApprovalID()))
			assert.Equal(t, string(agent.CauseMovedOn), stored(t, st, tk.ApprovalID()).Decision.Cause)
			assert.Empty(t, pendingList(t, a, "s"))
			synctest.Wait()
			on.none(t, "no Approvals is told")
		})
	})
	t.Run("store fails", func(t *testing.T) {
		st := &failingStore{MemStore: &memory.MemStore{}}
		m := replica(t, person.ApprovalsConfig{Store: st})
		tk, err := m.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		st.set(true)
		err = m.CancelApproval(t.Context(), "s", tk.ApprovalID())
		require.ErrorIs(t, err, errStoreDown)
		assert.Contains(t, err.Error(), "cancel approval "+tk.ApprovalID())
		st.set(false)
		_, _ = tk.Wait(cancelledContext())
	})
}

// TestDurableResumedRequestFindsOrphan: a process that stopped right after
// its Approvals created an approval left it pending. The resumed turn's
// request, on another process, names the call with the same Key and gets
// that approval back instead of a second one beside it; a request of
// another call gets a new approval.
func TestDurableResumedRequestFindsOrphan(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	a := replica(t, person.ApprovalsConfig{Store: st})
	req := keyed("s", 1)
	first, err := a.Request(t.Context(), req)
	require.NoError(t, err)
	orphan := first.ApprovalID()
	// The process dies here: nobody waits, nobody releases.

	b := replica(t, person.ApprovalsConfig{Store: st})
	tk, err := b.Request(t.Context(), keyed("s", 2))
	require.NoError(t, err)
	assert.NotEqual(t, orphan, tk.ApprovalID(), "another call's approval is not this one's")
	_, _ = tk.Wait(cancelledContext())

	tk, err = b.Request(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, orphan, tk.ApprovalID(), "the orphan is the call's approval")
	pending, err := st.PendingApprovals(t.Context(), "s")
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, orphan, pending[0].ID)

	ok, err := respond(b, "s", orphan, req, agent.Decision{Approved: true})
	require.NoError(t, err)
	require.True(t, ok)
	d, err := tk.Wait(t.Context())
	require.NoError(t, err)
	assert.True(t, d.Approved)
	_, _ = first.Wait(cancelledContext())
}

// FuzzNote: a note comes from the network (another process, through the
// database): whatever its payload, the Approvals neither panics nor takes it
// for a decision the store does not hold. The pending approval stays
// pending, its Wait is not woken and OnDecided is not called.
func FuzzNote(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"session_id":"s","approval_id":"x","from":"y"}`, `null`, `[`, `{"approval_id":1}`, "\x00", `{"approval_id":"` + "\u2028" + `"}`} {
		f.Add(s)
	}
	st := &memory.MemStore{}
	notes := &directNotifier{}
	called := make(chan memory.Approval, 1)
	m, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: notes, OnDecided: func(a memory.Approval) { called <- a }})
	require.NoError(f, err)
	f.Cleanup(func() { _ = m.Close() })
	tk, err := m.Request(context.Background(), request("s", 1))
	require.NoError(f, err)
	id := tk.ApprovalID()
	f.Cleanup(func() { _, _ = tk.Wait(cancelledContext()) })
	f.Fuzz(func(t *testing.T, payload string) {
		notes.hand(payload)
		notes.hand(strings.ReplaceAll(payload, "x", id)) // notes that name the approval
		a, err := st.GetApproval(context.Background(), id)
		require.NoError(t, err)
		assert.False(t, a.Decided)
		select {
		case a := <-called:
			t.Fatalf("OnDecided called for %s on a note %q", a.ID, payload)
		default:
		}
	})
}

// directNotifier hands a note to its listener in the caller's goroutine,
// as the Notifier of another process would have sent it; it sends nothing.
type directNotifier struct {
	mu sync.Mutex
	fn func(string)
}

func (d *directNotifier) Notify(context.Context, string, string) error { return nil }

func (d *directNotifier) Listen(_ context.Context, _ string, fn func(string)) (func(), error) {
	d.mu.Lock()
	d.fn = fn
	d.mu.Unlock()
	return func() {}, nil
}

func (d *directNotifier) hand(payload string) {
	d.mu.Lock()
	fn := d.fn
	d.mu.Unlock()
	fn(payload)
}

// TestDecisionNoted: the note a durable Approvals sends for a decision names
// its session and approval to what the runner reads notes with
// (waiting.ParseNote); other payloads are refused.
func TestDecisionNoted(t *testing.T) {
	leaktest.Check(t)
	h := &heldNotifier{MemStore: &memory.MemStore{}}
	m := replica(t, person.ApprovalsConfig{Store: h.MemStore, Notifier: h})
	tk, err := m.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	pending, err := respond(m, "s", tk.ApprovalID(), request("s", 1), agent.Decision{Approved: true})
	require.NoError(t, err)
	require.True(t, pending)
	_, err = tk.Wait(t.Context())
	require.NoError(t, err)
	h.mu.Lock()
	held := append([]string(nil), h.held...)
	h.mu.Unlock()
	require.Len(t, held, 1, "one note for the decision")
	note, ok := waiting.ParseNote(held[0])
	assert.True(t, ok)
	assert.Equal(t, "s", note.SessionID)
	assert.Equal(t, tk.ApprovalID(), note.ID)
	for _, p := range []string{"", "{}", `{"session_id":"s"}`, "1 s", "not json"} {
		_, ok := waiting.ParseNote(p)
		assert.False(t, ok, "payload %q", p)
	}
}

// TestRecordWithoutDigest: a record stored without a digest, as a version
// before digests stored each approval, shows the digest of its stored
// arguments (in Pending and in the audit) and is decided by it; a reply
// with another digest, or none, is refused and leaves it pending.
func TestRecordWithoutDigest(t *testing.T) {
	ctx := t.Context()
	st := &memory.MemStore{}
	args := json.RawMessage(`{"command": "ls -l"}`)
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "old", SessionID: "s", CallID: "c1", Tool: "run_command", Arguments: args}))
	m := startApprovals(t, person.ApprovalsConfig{Store: st})
	digest := agent.ArgumentsDigest(args)

	list := pendingList(t, m, "s")
	require.Len(t, list, 1)
	assert.Equal(t, digest, list[0].Call.ArgumentsDigest)
	for _, wrong := range []string{agent.ArgumentsDigest(json.RawMessage(`{"command":"rm -rf /"}`)), agent.ArgumentsDigest(nil), ""} {
		r := person.ReplyTo(list[0], agent.Decision{Approved: true})
		r.ArgumentsDigest = wrong
		pending, err := m.Respond(ctx, r)
		require.ErrorIs(t, err, approval.ErrMismatch, "digest %s", wrong)
		assert.False(t, pending)
	}
	require.Len(t, pendingList(t, m, "s"), 1, "still pending")
	pending, err := m.Respond(ctx, person.ReplyTo(list[0], agent.Decision{Approved: true, By: "alice"}))
	require.NoError(t, err)
	assert.True(t, pending)
	for rec, err := range m.Decisions(ctx, approval.DecisionQuery{SessionID: "s"}) {
		require.NoError(t, err)
		assert.Equal(t, digest, rec.ArgumentsDigest, "the audit names the digest the decision was bound to")
		assert.Equal(t, "alice", rec.Decision.By)
	}
}
