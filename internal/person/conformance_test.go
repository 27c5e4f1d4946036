package person_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval/approvaltest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
)

// TestStoreConformance runs approvaltest's suite with every kind of Store
// the approvals are kept in: none (their own MemStore), a MemStore, a
// SQLite file and PostgreSQL (skipped without a server, a failure under
// PLANROUND_REQUIRE_ALL=1).
func TestStoreConformance(t *testing.T) {
	t.Run("no Store", func(t *testing.T) {
		approvaltest.RunStore(t, func(*testing.T) memory.ApprovalStore { return nil })
	})
	t.Run("MemStore", func(t *testing.T) {
		approvaltest.RunStore(t, func(*testing.T) memory.ApprovalStore { return &memory.MemStore{} })
	})
	t.Run("SQLite", func(t *testing.T) {
		approvaltest.RunStore(t, func(t *testing.T) memory.ApprovalStore {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "approvals.db"))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
			return st
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := pgtest.URL(t)
		approvaltest.RunStore(t, func(t *testing.T) memory.ApprovalStore {
			st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(pgtest.Schema(t, url, "planround_approvaltest_")))
			require.NoError(t, err)
			t.Cleanup(st.Close)
			return st
		})
	})
}

// TestFirstDecisionWinsAcrossStores: two Approvals on two handles of one
// database stand for two processes: the run's approval is suspended on A,
// 16 decisions race for it from both, exactly one is taken, the Store
// holds that one, and the resumed turn on A gets it. With a SQLite file and
// with PostgreSQL.
func TestFirstDecisionWinsAcrossStores(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "approvals.db")
		open := func() memory.ApprovalStore {
			st, err := sqlitestore.Open(context.Background(), path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
			return st
		}
		firstDecisionWins(t, open(), open())
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgtest.Schema(t, url, "planround_approvalrace_")
		open := func() memory.ApprovalStore {
			st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(schema))
			require.NoError(t, err)
			t.Cleanup(st.Close)
			return st
		}
		firstDecisionWins(t, open(), open())
	})
}

func firstDecisionWins(t *testing.T, stA, stB memory.ApprovalStore) {
	const deciders = 16
	a := replica(t, person.ApprovalsConfig{Store: stA})
	b := replica(t, person.ApprovalsConfig{Store: stB})
	req := keyed("s", 1)
	tk, err := a.Request(t.Context(), req)
	require.NoError(t, err)
	_, err = tk.Wait(withCause(t.Context(), agent.ErrSuspended))
	require.ErrorIs(t, err, agent.ErrSuspended)

	start := make(chan struct{})
	taken := make([]bool, deciders)
	var wg sync.WaitGroup
	for j := range deciders {
		m := []*person.Approvals{a, b}[j%2]
		wg.Go(func() {
			<-start
			var err error
			taken[j], err = respond(m, "s", tk.ApprovalID(), req, agent.Decision{Approved: j%3 == 0, Reason: fmt.Sprint("decider ", j)})
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
			require.Less(t, winner, 0, "deciders %d and %d both taken", winner, j)
			winner = j
		}
	}
	require.GreaterOrEqual(t, winner, 0, "no decision taken")
	want := fmt.Sprint("decider ", winner)
	assert.Equal(t, want, stored(t, stB, tk.ApprovalID()).Decision.Reason, "the Store")
	again, err := a.Request(t.Context(), req)
	require.NoError(t, err)
	d, decided := again.Decision()
	require.True(t, decided, "the resumed turn gets the decision at once")
	assert.Equal(t, want, d.Reason)
	assert.Equal(t, 0, a.Len())
	assert.Equal(t, 0, b.Len())
}
