package durable

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
)

// twoReplicas starts replicas A and B on one fresh PostgreSQL schema; it
// returns them and the effects file.
func twoReplicas(t testing.TB, extra ...string) (a, b *replica, effects string) {
	return twoReplicasOn(t, postgresBackend(t), extra...)
}

// backends are the stores that replicas may share: a PostgreSQL schema,
// and a SQLite file that two processes of one machine open.
var backends = []struct {
	name string
	new  func(testing.TB) backend
}{{"postgres", postgresBackend}, {"sqlite", sqliteBackend}}

// twoReplicasOn starts replicas A and B on db; it returns them and the
// effects file.
func twoReplicasOn(t testing.TB, db backend, extra ...string) (a, b *replica, effects string) {
	effects = filepath.Join(t.TempDir(), "effects")
	args := func(holder string) []string {
		args := append([]string{"-holder", holder, "-lease-ttl", "2s", "-effects", effects}, db.args...)
		return append(args, extra...)
	}
	return startReplica(t, "A", args("A")...), startReplica(t, "B", args("B")...), effects
}

// TestDecisionOnOtherReplica posts the decision of a run waiting on A to B:
// A's run goes on at once, B never runs the call, the tool runs once. On
// PostgreSQL, and with both processes on one SQLite file, whose notes
// travel through the file; the approval timeout is the replica's default
// (ten minutes), far beyond the test's minute.
func TestDecisionOnOtherReplica(t *testing.T) {
	for _, db := range backends {
		t.Run(db.name, func(t *testing.T) { decisionOnOtherReplica(t, db.new(t)) })
	}
}

func decisionOnOtherReplica(t *testing.T, db backend) {
	checkLeaks(t)
	a, b, effects := twoReplicasOn(t, db)
	ctx := testContext(t, 60*time.Second)

	turn := a.turn(ctx, t, "s1", "k1")
	call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()
	b.mustApprove(ctx, t, decisionFor("s1", call, true))

	ex := turn.waitFor(ctx, t, "executing on A", isState(agent.StateExecuting))
	assert.Equal(t, call.ID, ex.tool().ID)
	turn.waitFor(ctx, t, "the result on A", isState(agent.StateResult))
	turn.waitFor(ctx, t, "the end of A's turn", isEnd("turn"))

	// Nothing is left for B to run: no open call, one execution, A's.
	calls, err := a.openCalls(ctx, "s1")
	require.NoError(t, err)
	assert.Empty(t, calls)
	got := executions(t, effects, "k1")
	if assert.Len(t, got, 1, "executions of k1") {
		assert.Equal(t, "A", got[0].Holder, "the call ran on the replica that did not wait for it")
	}
	// B got the decision and may have tried to resume (A's lease refused
	// it); let it sweep twice more, then check it ran nothing. (B's event
	// stream would not tell: a session's events come from the store's log,
	// wherever the run ran; the executions' holders say which replica ran
	// the call.)
	from := b.sweeps(ctx, t)
	poll(ctx, t, 10*time.Second, "two more sweeps on B", func() (bool, error) { return b.sweeps(ctx, t) >= from+2, nil })
	assert.Len(t, executions(t, effects, "k1"), 1, "executions of k1 after B swept")
	checkHistory(t, a.history(ctx, t, "s1"))
}

// TestDecisionsRace posts an approval to A and a rejection to B of the same
// approval at the same moment, several times: exactly one is taken, and the
// run does what that one said.
func TestDecisionsRace(t *testing.T) {
	checkLeaks(t)
	a, b, effects := twoReplicas(t)
	ctx := testContext(t, 90*time.Second)

	wins := map[string]int{}
	for i := range 8 {
		session, key := fmt.Sprintf("s%d", i), fmt.Sprintf("k%d", i)
		turn := a.turn(ctx, t, session, key)
		call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()

		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			status [2]int
			errs   [2]error
		)
		for k, r := range []*replica{a, b} {
			wg.Go(func() {
				<-start
				var body string
				status[k], body, errs[k] = r.approve(ctx, decisionFor(session, call, k == 0))
				if taken(status[k], body) {
					status[k] = http.StatusAccepted // taken: told from 200 {"success":false}
				}
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		var approved bool
		switch status {
		case [2]int{http.StatusAccepted, http.StatusOK}:
			approved = true
			wins["approve on A"]++
		case [2]int{http.StatusOK, http.StatusAccepted}:
			wins["reject on B"]++
		default:
			t.Fatalf("%s: statuses %v, want one taken (202 here) and one not pending (200)", session, status)
		}

		if approved {
			turn.waitFor(ctx, t, "the result", isState(agent.StateResult))
			assert.Len(t, executions(t, effects, key), 1, "%s: executions", session)
		} else {
			rej := turn.waitFor(ctx, t, "the rejection", isState(agent.StateRejected)).tool()
			assert.Equal(t, agent.CauseUser, rej.Cause)
			assert.Empty(t, executions(t, effects, key), "%s: a rejected call ran", session)
		}
		turn.waitFor(ctx, t, "the end of the turn", isEnd("turn"))
		checkHistory(t, a.history(ctx, t, session))
	}
	t.Logf("winners: %v", wins)
}

// TestSuspendedRunResumesOnOtherReplica: a run on A that waits longer than
// -suspend-after ends suspended, releasing its goroutine and its lease; A
// is then killed, and the decision, posted to B, resumes the turn on B
// without waiting for A's lease to expire (30s: the resume must come
// within 15s).
func TestSuspendedRunResumesOnOtherReplica(t *testing.T) {
	checkLeaks(t)
	a, b, effects := twoReplicas(t, "-suspend-after", "300ms", "-lease-ttl", "30s")
	ctx := testContext(t, 60*time.Second)

	turn := a.turn(ctx, t, "s1", "k1")
	call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()
	turn.waitFor(ctx, t, "the suspended chunk", func(e event) bool { return e.Chunk != nil && e.Chunk.Kind == agent.KindSuspended })
	turn.waitFor(ctx, t, "the end of A's turn", isEnd("turn"))
	calls, err := a.openCalls(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, calls, 1, "the suspended call stays open")
	assert.Equal(t, call.ApprovalID, calls[0].ApprovalID)
	a.kill() // so that only B can resume it

	ev := b.events(ctx, t, "s1")
	b.mustApprove(ctx, t, decisionFor("s1", call, true))
	soon, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ex := ev.waitFor(soon, t, "executing on B", isState(agent.StateExecuting))
	assert.Equal(t, call.ID, ex.tool().ID)
	ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))
	got := executions(t, effects, "k1")
	if assert.Len(t, got, 1, "executions of k1") {
		assert.Equal(t, "B", got[0].Holder)
	}
	checkHistory(t, b.history(ctx, t, "s1"))
}
