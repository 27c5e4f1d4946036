package memory_test

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/storetest"
)

func TestMemStoreDurable(t *testing.T) {
	leaktest.Check(t)
	storetest.RunDurable(t, func(t *testing.T) memory.Store { return new(memory.MemStore) })
}

// decisionIDs returns the ids that Decisions lists for q.
func decisionIDs(t *testing.T, st *memory.MemStore, q memory.DecisionQuery) []string {
	t.Helper()
	list, err := st.Decisions(t.Context(), q)
	require.NoError(t, err)
	ids := make([]string, len(list))
	for i, a := range list {
		ids[i] = a.ID
	}
	return ids
}

// TestMemStoreForgetDecided: ForgetDecided keeps the keep most recently
// decided approvals (by DecidedAt, then id) and every pending one, and
// frees the ids and keys of those it removes.
func TestMemStoreForgetDecided(t *testing.T) {
	ctx := t.Context()
	st := new(memory.MemStore)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Created out of the order of their decisions; b and c tie.
	for _, r := range []struct {
		id  string
		sec int
	}{{"e", 5}, {"a", 1}, {"c", 3}, {"b", 3}, {"d", 4}} {
		require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: r.id, SessionID: "s", CallID: "c-" + r.id, Tool: "t",
			Key: "k-" + r.id, Decided: true, DecidedAt: base.Add(time.Duration(r.sec) * time.Second)}))
	}
	for _, id := range []string{"p1", "p2"} {
		require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: id, SessionID: "s", CallID: "c-" + id, Tool: "t", Key: "k-" + id}))
	}
	// Decided now: after every one above.
	_, err := st.DecideApproval(ctx, "s", "p2", memory.ApprovalDecision{Approved: true, Principal: "alice"})
	require.NoError(t, err)

	assert.Zero(t, st.ForgetDecided(6), "six decided, keep six")
	assert.Zero(t, st.ForgetDecided(100))
	require.Equal(t, []string{"a", "b", "c", "d", "e", "p2"}, decisionIDs(t, st, memory.DecisionQuery{}))

	assert.Equal(t, 3, st.ForgetDecided(3))
	assert.Equal(t, []string{"d", "e", "p2"}, decisionIDs(t, st, memory.DecisionQuery{}))
	for _, id := range []string{"a", "b", "c"} {
		_, err := st.GetApproval(ctx, id)
		assert.ErrorIs(t, err, memory.ErrNotFound, "GetApproval(%s)", id)
		_, err = st.ApprovalByKey(ctx, "s", "k-"+id)
		assert.ErrorIs(t, err, memory.ErrNotFound, "ApprovalByKey(k-%s)", id)
	}
	pending, err := st.PendingApprovals(ctx, "")
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "p1", pending[0].ID, "pending approvals are never forgotten")
	a, err := st.ApprovalByKey(ctx, "s", "k-d")
	require.NoError(t, err)
	assert.Equal(t, "d", a.ID, "a kept record keeps its key")

	// The ids and keys of forgotten records are free again; one decided
	// before the kept ones takes its place in the order.
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "a", SessionID: "s", CallID: "c", Tool: "t", Key: "k-b",
		Decided: true, DecidedAt: base}))
	assert.Equal(t, []string{"a", "d", "e", "p2"}, decisionIDs(t, st, memory.DecisionQuery{}))
	err = st.CreateApproval(ctx, memory.Approval{ID: "x", SessionID: "s", CallID: "c", Tool: "t", Key: "k-d"})
	assert.ErrorIs(t, err, memory.ErrExists, "a kept record's key")

	// A negative keep is none.
	assert.Equal(t, 4, st.ForgetDecided(-1))
	assert.Empty(t, decisionIDs(t, st, memory.DecisionQuery{}))
	pending, err = st.PendingApprovals(ctx, "")
	require.NoError(t, err)
	assert.Len(t, pending, 1)
	assert.Zero(t, st.ForgetDecided(0))
}

// TestMemStoreForgetDecidedDeleteSession: what DeleteSession removed is
// neither counted nor listed by ForgetDecided and Decisions afterwards.
func TestMemStoreForgetDecidedDeleteSession(t *testing.T) {
	ctx := t.Context()
	st := new(memory.MemStore)
	for _, s := range []string{"gone", "kept"} {
		_, err := st.CreateSession(ctx, memory.Session{ID: s})
		require.NoError(t, err)
		for i := range 3 {
			id := fmt.Sprint(s, i)
			require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: id, SessionID: s, CallID: id, Tool: "t", Key: id}))
			_, err := st.DecideApproval(ctx, s, id, memory.ApprovalDecision{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, st.DeleteSession(ctx, "gone"))
	assert.Equal(t, []string{"kept0", "kept1", "kept2"}, decisionIDs(t, st, memory.DecisionQuery{}))
	assert.Equal(t, 1, st.ForgetDecided(2))
	assert.Equal(t, []string{"kept1", "kept2"}, decisionIDs(t, st, memory.DecisionQuery{}))
}

// TestMemStoreForgetDecidedConcurrent: ForgetDecided races with creators,
// deciders and readers (run with -race) and leaves exactly the keep most
// recently decided records.
func TestMemStoreForgetDecidedConcurrent(t *testing.T) {
	ctx := t.Context()
	st := new(memory.MemStore)
	const workers, each, keep = 4, 50, 10
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		decided []memory.Approval // every decision taken, as returned
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%03d", w, i)
				if err := st.CreateApproval(ctx, memory.Approval{ID: id, SessionID: "s", CallID: id, Tool: "t", Key: id}); err != nil {
					t.Error(err)
					return
				}
				a, err := st.DecideApproval(ctx, "s", id, memory.ApprovalDecision{Approved: true})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				decided = append(decided, a)
				mu.Unlock()
				st.ForgetDecided(keep)
				if _, err := st.Decisions(ctx, memory.DecisionQuery{SessionID: "s", Limit: 3}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st.ForgetDecided(keep)
	slices.SortFunc(decided, func(a, b memory.Approval) int {
		return cmp.Or(a.DecidedAt.Compare(b.DecidedAt), cmp.Compare(a.ID, b.ID))
	})
	var want []string
	for _, a := range decided[len(decided)-keep:] {
		want = append(want, a.ID)
	}
	assert.Equal(t, want, decisionIDs(t, st, memory.DecisionQuery{}))
	pending, err := st.PendingApprovals(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, pending)
}
