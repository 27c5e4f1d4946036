package sqlitestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/memory/storetest"
)

func TestDurable(t *testing.T) {
	leaktest.Check(t)
	storetest.RunDurable(t, func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "db.sqlite")) })
}

// TestEventLogTwoStoresOneFile: two Stores on one file, as two processes
// would open it, share the event logs, and of writers on both exactly one
// gets each number.
func TestEventLogTwoStoresOneFile(t *testing.T) {
	leaktest.Check(t)
	storetest.RunEventLogPair(t, func(t *testing.T) (a, b memory.Store) {
		path := filepath.Join(t.TempDir(), "db")
		return openSQLite(t, path), openSQLite(t, path)
	})
}

// TestDurableTwoStoresOneFile: what one Store writes, another on the same
// file reads; of deciders on both, one wins; a lease held through one is
// refused through the other.
func TestDurableTwoStoresOneFile(t *testing.T) {
	leaktest.Check(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	a, b := openSQLite(t, path), openSQLite(t, path)
	_, err := a.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	m, err := a.Append(ctx, "s", memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f"}}})
	require.NoError(t, err)
	require.NoError(t, a.SaveCall(ctx, "s", memory.OpenCall{MessageID: m[0].ID, CallID: "c", ApprovalID: "ap"}))
	calls, err := b.OpenCalls(ctx, "s")
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, "ap", calls[0].ApprovalID)

	require.NoError(t, a.CreateApproval(ctx, memory.Approval{ID: "ap", SessionID: "s", CallID: "c", Tool: "f"}))
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		st := []*sqlitestore.Store{a, b}[i%2]
		wg.Go(func() {
			_, errs[i] = st.DecideApproval(ctx, "s", "ap", memory.ApprovalDecision{Approved: true, Reason: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
		} else {
			assert.ErrorIs(t, err, memory.ErrDecided, "decider %d", i)
		}
	}
	assert.Equal(t, 1, won, "deciders that won")

	ok, err := a.AcquireLease(ctx, "s", "A", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.AcquireLease(ctx, "s", "B", time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "B took the lease A holds through another Store")

	// The tool message appended through b closes the record a saved.
	_, err = b.Append(ctx, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c", Name: "f", Content: "ok"})
	require.NoError(t, err)
	ids, err := a.OpenSessions(ctx)
	require.NoError(t, err)
	assert.Empty(t, ids)

	// DeleteSession through b removes what a wrote, lease included.
	require.NoError(t, b.DeleteSession(ctx, "s"))
	_, err = a.GetApproval(ctx, "ap")
	assert.ErrorIs(t, err, memory.ErrNotFound)
	ok, err = a.AcquireLease(ctx, "s", "B", time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the lease of a deleted session is free")
}

// TestCloseStopsListeners: Close ends every listener's goroutine; stop
// afterwards does nothing, and Notify and Listen fail.
func TestCloseStopsListeners(t *testing.T) {
	leaktest.Check(t)
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	require.NoError(t, err)
	var stops []func()
	for _, ch := range []string{"x", "x", "y"} {
		stop, err := st.Listen(t.Context(), ch, func(string) {})
		require.NoError(t, err)
		stops = append(stops, stop)
	}
	require.NoError(t, st.Close())
	for _, stop := range stops {
		stop()
	}
	assert.Error(t, st.Notify(t.Context(), "x", "late"))
	_, err = st.Listen(t.Context(), "x", func(string) {})
	assert.Error(t, err)
}

// decideEnv, when set, makes TestDecideProcesses the child process that
// decides the approval "ap" of the database it names.
const decideEnv = "PLANROUND_SQLITE_DECIDE_DB"

// TestDecideProcesses decides one approval from four processes with four
// deciders each: exactly one decision is taken.
func TestDecideProcesses(t *testing.T) {
	if path := os.Getenv(decideEnv); path != "" {
		decideChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	path := filepath.Join(t.TempDir(), "decide.db")
	st := openSQLite(t, path)
	require.NoError(t, st.CreateApproval(t.Context(), memory.Approval{ID: "ap", SessionID: "s", CallID: "c", Tool: "f"}))
	const procs = 4
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	outs := make([]strings.Builder, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range procs {
		cmds[i] = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDecideProcesses$")
		cmds[i].Env = append(os.Environ(), decideEnv+"="+path)
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		require.NoError(t, cmds[i].Start())
	}
	won, lost := 0, 0
	for i, c := range cmds {
		require.NoError(t, c.Wait(), "process %d: %s", i, outs[i].String())
		won += strings.Count(outs[i].String(), "won\n")
		lost += strings.Count(outs[i].String(), "decided\n")
	}
	assert.Equal(t, 1, won, "deciders that won")
	assert.Equal(t, procs*4-1, lost, "deciders told ErrDecided")
	a, err := st.GetApproval(t.Context(), "ap")
	require.NoError(t, err)
	assert.True(t, a.Decided)
	var who struct{ Pid int }
	require.NoError(t, json.Unmarshal(a.Decision.Arguments, &who))
	assert.NotZero(t, who.Pid)
}

// decideChild decides "ap" from four goroutines and prints, for each,
// "won" or "decided".
func decideChild(path string) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	defer st.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lines []string
	for range 4 {
		wg.Go(func() {
			d := memory.ApprovalDecision{Approved: true, Arguments: json.RawMessage(fmt.Sprintf(`{"pid":%d}`, os.Getpid()))}
			_, err := st.DecideApproval(ctx, "s", "ap", d)
			line := "won"
			if errors.Is(err, memory.ErrDecided) {
				line = "decided"
			} else if err != nil {
				line = err.Error()
			}
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// queryPlan returns the lines of SQLite's plan for query with args.
func queryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		b.WriteString(detail + "\n")
	}
	require.NoError(t, rows.Err())
	return b.String()
}

// TestApprovalQueriesUseIndexes: Decisions reads the partial indexes of
// decided rows in their order (approvals_decided across sessions,
// approvals_session_decided for one), so a page costs its rows and not a
// sort of every decision, and ApprovalByKey finds its row in
// approvals_key; before and after ANALYZE has seen a store with many
// decided and pending approvals.
func TestApprovalQueriesUseIndexes(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	st := openSQLite(t, path)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 400 {
		a := memory.Approval{ID: fmt.Sprintf("a%03d", i), SessionID: fmt.Sprint("s", i%20), CallID: "c", Tool: "t",
			Key: fmt.Sprint("k", i), Kind: []string{"", memory.KindApproval, memory.KindForm}[i%3]}
		if i%4 != 0 {
			a.Decided, a.DecidedAt = true, base.Add(time.Duration(i%50)*time.Second)
		}
		require.NoError(t, st.CreateApproval(ctx, a))
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()

	since := base.Add(10 * time.Second)
	queries := []struct {
		q     memory.DecisionQuery
		index string
	}{
		{memory.DecisionQuery{}, "approvals_decided"},
		{memory.DecisionQuery{Limit: 10}, "approvals_decided"},
		{memory.DecisionQuery{Since: since, AfterID: "a100", Limit: 10}, "approvals_decided"},
		{memory.DecisionQuery{Since: since, Until: since.Add(time.Minute), Kind: memory.KindApproval}, "approvals_decided"},
		{memory.DecisionQuery{SessionID: "s3"}, "approvals_session_decided"},
		{memory.DecisionQuery{SessionID: "s3", Since: since, AfterID: "a100", Until: since.Add(time.Minute), Limit: 10}, "approvals_session_decided"},
		{memory.DecisionQuery{SessionID: "s3", Since: since, Kind: memory.KindForm, Limit: 10}, "approvals_session_decided"},
	}
	check := func(when string) {
		for _, c := range queries {
			query, args := sqlitestore.DecisionsSQL(c.q)
			plan := queryPlan(t, db, query, args...)
			assert.Contains(t, plan, "USING INDEX "+c.index, "%s: Decisions(%+v)", when, c.q)
			assert.NotContains(t, plan, "TEMP B-TREE", "%s: Decisions(%+v) sorts", when, c.q)
		}
		assert.Contains(t, queryPlan(t, db, sqlitestore.ApprovalByKeySQL, "s3", "k3"), "USING INDEX approvals_key", when)
	}
	check("before ANALYZE")
	rw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer rw.Close()
	_, err = rw.ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	check("after ANALYZE")
}

func TestKV(t *testing.T) {
	leaktest.Check(t)
	storetest.RunKV(t, func(t *testing.T) memory.KV { return openSQLite(t, filepath.Join(t.TempDir(), "db.sqlite")) })
}

// TestKVTwoStoresOneFile: two Stores on one file, as two processes would
// open it, share their values, and of swaps through both one wins.
func TestKVTwoStoresOneFile(t *testing.T) {
	leaktest.Check(t)
	storetest.RunKVPair(t, func(t *testing.T) (a, b memory.KV) {
		path := filepath.Join(t.TempDir(), "db")
		return openSQLite(t, path), openSQLite(t, path)
	})
}

func TestAPILog(t *testing.T) {
	storetest.RunAPILog(t, func(t *testing.T, l memory.APILogLimits) memory.APILog {
		st := openSQLite(t, filepath.Join(t.TempDir(), "db.sqlite"))
		st.SetAPILogLimits(l)
		return st
	})
}
