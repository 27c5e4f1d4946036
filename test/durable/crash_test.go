package durable

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// crashSetup is the store of a crash test and how it goes on after the
// kill: on PostgreSQL another replica (holder B) takes over once the
// killed one's lease expired; on SQLite the killed replica is restarted on
// its file, as the same holder.
type crashSetup struct {
	db      backend
	effects string
	other   bool // true: a second replica B; false: restart A
}

func crashSetups(t *testing.T) map[string]func(t *testing.T) crashSetup {
	return map[string]func(t *testing.T) crashSetup{
		"postgres": func(t *testing.T) crashSetup {
			return crashSetup{db: postgresBackend(t), effects: filepath.Join(t.TempDir(), "effects"), other: true}
		},
		"sqlite": func(t *testing.T) crashSetup {
			return crashSetup{db: sqliteBackend(t), effects: filepath.Join(t.TempDir(), "effects")}
		},
	}
}

// args are the replica flags for holder.
func (s crashSetup) args(holder string, extra ...string) []string {
	args := append([]string{"-holder", holder, "-lease-ttl", "1s", "-effects", s.effects}, s.db.args...)
	return append(args, extra...)
}

// afterKill returns the replica that goes on after a was killed: B, or a
// restarted.
func (s crashSetup) afterKill(t *testing.T, a *replica) *replica {
	if s.other {
		return startReplica(t, "B", s.args("B")...)
	}
	return a.restart(t)
}

// TestKillAtApprovalRequired kills the replica whose run waits for an
// approval, posts the decision to the replica that goes on, and checks that
// the run resumes there and ends with the answer, the tool having run once.
func TestKillAtApprovalRequired(t *testing.T) {
	for name, setup := range crashSetups(t) {
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			s := setup(t)
			ctx := testContext(t, 90*time.Second)
			a := startReplica(t, "A", s.args("A")...)

			turn := a.turn(ctx, t, "s1", "k1")
			call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()
			require.NotEmpty(t, call.ApprovalID, "approval_required without an approval id")
			a.kill()

			b := s.afterKill(t, a)
			ev := b.events(ctx, t, "s1")
			b.mustApprove(ctx, t, decisionFor("s1", call, true))

			res := ev.waitFor(ctx, t, "the resumed call's result", isState(agent.StateResult))
			assert.Contains(t, res.tool().Result, "k1")
			ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))

			if got := executions(t, s.effects, "k1"); len(got) != 1 {
				t.Errorf("the tool ran %d times for one approval, want once: %+v", len(got), got)
			}
			msgs := b.history(ctx, t, "s1")
			checkHistory(t, msgs)
			require.NotEmpty(t, msgs)
			last := msgs[len(msgs)-1]
			assert.Equal(t, memory.RoleAssistant, last.Role)
			assert.Contains(t, last.Content, "done: k1")
		})
	}
}

// TestKillWhileExecuting kills the replica while its tool runs: the
// resumed turn reports the call stopped (with the partial output that was
// saved) and never starts it again.
func TestKillWhileExecuting(t *testing.T) {
	for name, setup := range crashSetups(t) {
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			s := setup(t)
			ctx := testContext(t, 90*time.Second)
			a := startReplica(t, "A", s.args("A")...)

			const key = "slow-k1"
			turn := a.turn(ctx, t, "s1", key)
			call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()
			a.mustApprove(ctx, t, decisionFor("s1", call, true))
			turn.waitFor(ctx, t, "executing", isState(agent.StateExecuting))

			// The tool has started (its execution is recorded) and its
			// record says it is executing; wait a little for a partial
			// output to be saved, which the agent may do at its pace.
			var partial string
			poll(ctx, t, 10*time.Second, "the tool to start and its record to say executing", func() (bool, error) {
				calls, err := a.openCalls(ctx, "s1")
				if err != nil || len(executions(t, s.effects, key)) == 0 {
					return false, err
				}
				for _, c := range calls {
					if c.CallID == call.ID && c.Executing {
						partial = c.Partial
						return true, nil
					}
				}
				return false, nil
			})
			if partial == "" {
				_, _ = within(ctx, 2*time.Second, func() (bool, error) {
					calls, err := a.openCalls(ctx, "s1")
					for _, c := range calls {
						if c.CallID == call.ID {
							partial = c.Partial
						}
					}
					return partial != "", err
				})
			}
			if partial == "" {
				t.Log("no partial output was saved within 2s of the start; checking the rejection without it")
			}
			a.kill()

			b := s.afterKill(t, a)
			ev := b.events(ctx, t, "s1") // the sweeper resumes it: no decision to post
			rej := ev.waitFor(ctx, t, "the stopped call's rejection", isState(agent.StateRejected)).tool()
			assert.Equal(t, call.ID, rej.ID)
			assert.Equal(t, agent.CauseStopped, rej.Cause, "reason %q", rej.Reason)
			assert.True(t, strings.HasPrefix(rej.PartialResult, partial), "partial result %q does not keep the saved %q", rej.PartialResult, partial)
			if partial != "" {
				assert.Contains(t, rej.PartialResult, "started "+key)
			}
			ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))
			for _, e := range ev.seen {
				if tc := e.tool(); e.Run == "resume" && tc != nil && tc.ID == call.ID && (tc.State == agent.StateExecuting || tc.State == agent.StateResult) {
					t.Errorf("the stopped call was run again: %s", e)
				}
			}

			if got := executions(t, s.effects, key); len(got) != 1 {
				t.Errorf("the tool started %d times, want once: %+v", len(got), got)
			}
			msgs := b.history(ctx, t, "s1")
			checkHistory(t, msgs)
			calls, err := b.openCalls(ctx, "s1")
			require.NoError(t, err)
			assert.Empty(t, calls, "open calls left after the resumed turn")
		})
	}
}

// TestKillBetweenApprovalAndRecord kills A right after its store created
// the approval of a call (before any approval_required chunk, before A
// recorded its id in the call's record). The approval is the call's by its
// key (agent.ApprovalRequest.Key): a resumed turn that asks about the call
// again gets that same approval, so the store must hold exactly that one
// pending approval for the call: a front end lists the pending approvals,
// and a second one beside it would take a decision that is lost. Its
// decision, posted to B, resumes the turn on B.
func TestKillBetweenApprovalAndRecord(t *testing.T) {
	checkLeaks(t)
	s := crashSetup{db: postgresBackend(t), effects: filepath.Join(t.TempDir(), "effects"), other: true}
	ctx := testContext(t, 60*time.Second)
	a := startReplica(t, "A", s.args("A", "-crash-at", "create-approval")...)
	b := startReplica(t, "B", s.args("B")...)
	ev := b.events(ctx, t, "s1")

	turn := a.turn(ctx, t, "s1", "k1")
	if e, err := turn.find(ctx, isState(agent.StateApprovalRequired)); err == nil {
		t.Fatalf("A showed %s before it died", e)
	}
	select {
	case <-a.exited:
	case <-ctx.Done():
		t.Fatal("A did not die after it created the approval")
	}

	// The turn is one suspended at that approval: a front end finds it
	// among the session's pending approvals (a run that asks again gets
	// the same one, by the call's key), and its decision resumes the turn.
	var pending []memory.Approval
	for len(pending) == 0 && ctx.Err() == nil {
		require.NoError(t, b.get(ctx, "/approvals?session=s1", &pending))
		if len(pending) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	require.Len(t, pending, 1, "the pending approvals of the session: want only the one A created")
	time.Sleep(500 * time.Millisecond) // a sweep or two of B's: none may ask again beside it
	var again []memory.Approval
	require.NoError(t, b.get(ctx, "/approvals?session=s1", &again))
	require.Equal(t, pending, again, "the pending approvals of the session after B's sweeps")

	b.mustApprove(ctx, t, decisionOn(pending[0], true))
	ev.waitFor(ctx, t, "the result on B", isState(agent.StateResult))
	ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))
	assert.Len(t, executions(t, s.effects, "k1"), 1, "executions of k1")
	checkHistory(t, b.history(ctx, t, "s1"))
	pending = nil
	require.NoError(t, b.get(ctx, "/approvals?session=s1", &pending))
	assert.Empty(t, pending, "approvals left pending after the turn")
}

// TestKillAfterStoringCalls kills A right after its store stored the
// assistant message of a tool round, before the call was asked about: the
// window where a turn was once left with a stored call, no record of it and
// no approval, which no sweeper found. The replica that goes on must ask
// about the call (its sweeper resumes the turn), and its decision must run
// the tool once and end the turn.
func TestKillAfterStoringCalls(t *testing.T) {
	for name, setup := range crashSetups(t) {
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			s := setup(t)
			ctx := testContext(t, 60*time.Second)
			a := startReplica(t, "A", s.args("A", "-crash-at", "store-calls")...)
			turn := a.turn(ctx, t, "s1", "k1")
			if e, err := turn.find(ctx, isState(agent.StateApprovalRequired)); err == nil {
				t.Fatalf("A showed %s before it died", e)
			}
			select {
			case <-a.exited:
			case <-ctx.Done():
				t.Fatal("A did not die after it stored the calls")
			}
			// What A left: the call stored and recorded, nothing asked.
			var pending []memory.Approval
			b := s.afterKill(t, a)
			ev := b.events(ctx, t, "s1")
			for len(pending) == 0 && ctx.Err() == nil {
				require.NoError(t, b.get(ctx, "/approvals?session=s1", &pending))
				if len(pending) == 0 {
					time.Sleep(50 * time.Millisecond)
				}
			}
			require.Len(t, pending, 1, "the pending approvals of the session: the sweeper must ask about the call A stored")
			b.mustApprove(ctx, t, decisionOn(pending[0], true))
			ev.waitFor(ctx, t, "the result", isState(agent.StateResult))
			ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))
			assert.Len(t, executions(t, s.effects, "k1"), 1, "executions of k1")
			checkHistory(t, b.history(ctx, t, "s1"))
			var calls []memory.OpenCall
			require.NoError(t, b.get(ctx, "/calls?session=s1", &calls))
			assert.Empty(t, calls, "open calls left after the turn")
		})
	}
}
