package person_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory/sqlitestore"
)

// deciderEnv, when set, makes TestDecisionFromAnotherProcess the second
// process: it approves the pending approval of session "s" in the SQLite
// file the variable names.
const deciderEnv = "PLANROUND_APPROVAL_DECIDER_DB"

// TestDecisionFromAnotherProcess: two processes on one SQLite file, each
// with an Approvals on its own Store, with the default timeout. A decision
// posted to the second process wakes the Wait in the first through the
// Store's notes, at once, instead of at the timeout five minutes later.
func TestDecisionFromAnotherProcess(t *testing.T) {
	if path := os.Getenv(deciderEnv); path != "" {
		decideInChild(t, path)
		return
	}
	if testing.Short() {
		t.Skip("starts a second process")
	}
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "approvals.db")
	st, err := sqlitestore.Open(t.Context(), path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	a := replica(t, person.ApprovalsConfig{Store: st, Notifier: st})
	require.Equal(t, approval.DefaultTimeout, a.Timeout())

	tk, err := a.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := waitAsync(ctx, tk)

	child, stopChild := context.WithTimeout(t.Context(), time.Minute)
	defer stopChild()
	cmd := exec.CommandContext(child, os.Args[0], "-test.run=^TestDecisionFromAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), deciderEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the second process:\n%s", out)

	// A safety net, far below the timeout: the note arrives within about a
	// quarter of a second.
	select {
	case got := <-done:
		require.NoError(t, got.err)
		assert.True(t, got.d.Approved, "Wait = %+v", got.d)
		assert.Equal(t, "from the other process", got.d.Reason)
		assert.Equal(t, "child", got.d.By)
	case <-time.After(30 * time.Second):
		t.Fatalf("the Wait did not hear the other process's decision within 30s (the approval times out after %v)", a.Timeout())
	}
	assert.Equal(t, 0, a.Len())
}

// decideInChild approves, as the second process, the one pending approval
// of session "s" in the file at path, through an Approvals of its own.
func decideInChild(t *testing.T, path string) {
	st, err := sqlitestore.Open(t.Context(), path)
	require.NoError(t, err)
	defer st.Close()
	m, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st})
	require.NoError(t, err)
	defer m.Close()
	list, err := m.Pending(t.Context(), "s")
	require.NoError(t, err)
	require.Len(t, list, 1)
	pending, err := m.Respond(t.Context(), person.ReplyTo(list[0], agent.Decision{Approved: true, Reason: "from the other process", By: "child"}))
	require.NoError(t, err)
	require.True(t, pending, "the approval was pending")
}
