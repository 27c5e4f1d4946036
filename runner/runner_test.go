package runner_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// TestSendFinishes: Send yields a whole turn, turn_started to turn_ended,
// numbered without gaps; Subscribe from before the turn replays the same.
func TestSendFinishes(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	var evs []runner.Event
	for e, err := range p.r.Send(ctx, agent.Input{SessionID: "s1", Message: "hello"}) {
		require.NoError(t, err)
		evs = append(evs, e)
	}
	require.NotEmpty(t, evs)
	assert.Equal(t, runner.EventTurnStarted, evs[0].Kind)
	assert.Equal(t, "hello", evs[0].Started.Message)
	last := evs[len(evs)-1]
	assert.Equal(t, runner.EventTurnEnded, last.Kind)
	assert.Equal(t, runner.StatusFinished, last.Ended.Status)
	for i, e := range evs {
		assert.Equal(t, int64(i+1), e.Seq, "event %d", i)
		assert.Equal(t, evs[0].Seq, e.Turn, "event %d belongs to the turn", i)
	}
	// A second turn continues the numbering; a subscriber from 0 gets it
	// all (the first turn's events are dropped once the second starts).
	var second []runner.Event
	for e, err := range p.r.Send(ctx, agent.Input{SessionID: "s1", Message: "hello again"}) {
		require.NoError(t, err)
		second = append(second, e)
	}
	assert.Equal(t, last.Seq+1, second[0].Seq)
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	assert.Len(t, msgs, 6, "two turns of user, plan, answer")
	assert.Equal(t, msgs[2].ID, second[0].Started.History, "History names the last message stored before the turn")
}

// TestApproveRunsOnce: a turn waits for its approval; a second message
// meanwhile is refused (ErrBusy); the decision runs the tool once and the
// turn ends.
func TestApproveRunsOnce(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	f := subscribe(ctx, t, p.r, "s1", 0)
	turn, req := startWaiting(ctx, t, p.r, f)

	_, err := p.r.Start(ctx, agent.Input{SessionID: "s1", Message: "again"})
	assert.ErrorIs(t, err, agent.ErrBusy)
	_, err = p.r.Resume(ctx, "s1")
	assert.ErrorIs(t, err, agent.ErrBusy, "Resume of a session this process drives")

	ok, err := p.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	f.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
	<-turn.Done()
	assert.Equal(t, runner.StatusFinished, turn.Ended().Status)
	assert.Equal(t, int32(1), runs.Load())
}

// TestTwoProcessesOneDriver: two replicas on one store, no Holder set:
// while A's turn waits, B refuses the session (the lease); the decision
// posted to B is taken by A's run, B's attempt to resume it finds it busy,
// and the tool runs once.
func TestTwoProcessesOneDriver(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	srv := model(t)
	var runs atomic.Int32
	a := newReplica(t, st, srv, &runs, options{})
	b := newReplica(t, st, srv, &runs, options{})
	f := subscribe(ctx, t, a.r, "s1", 0)
	_, req := startWaiting(ctx, t, a.r, f)

	_, err := b.r.Start(ctx, agent.Input{SessionID: "s1", Message: "again"})
	assert.ErrorIs(t, err, agent.ErrBusy, "another process's message")
	_, err = b.r.Resume(ctx, "s1")
	assert.ErrorIs(t, err, agent.ErrBusy, "another process's resume")

	ok, err := b.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	f.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
	time.Sleep(100 * time.Millisecond) // B's resume, if any, would have run by now
	assert.Equal(t, int32(1), runs.Load())
}

// TestCloseSuspendsAndRestartResumes: Close suspends a turn that waits for
// a decision; a new process on the store resumes it when the decision
// comes, and the tool runs once.
func TestCloseSuspendsAndRestartResumes(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	srv := model(t)
	var runs atomic.Int32
	a := newReplica(t, st, srv, &runs, options{})
	f := subscribe(ctx, t, a.r, "s1", 0)
	turn, req := startWaiting(ctx, t, a.r, f)
	a.close()
	<-turn.Done()
	assert.Equal(t, runner.StatusSuspended, turn.Ended().Status)
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, open, 1, "the call stays open")

	b := newReplica(t, st, srv, &runs, options{})
	g := subscribe(ctx, t, b.r, "s1", 0)
	ok, err := b.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	// The store keeps the events: B's subscriber gets A's turn first,
	// ended as suspended, then the resumed one.
	g.waitFor(ctx, "A's turn, suspended", isEnd(runner.StatusSuspended))
	started := g.waitFor(ctx, "the resumed turn", func(e runner.Event) bool { return e.Kind == runner.EventTurnStarted })
	assert.True(t, started.Started.Resumed)
	g.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
	assert.Equal(t, int32(1), runs.Load())
}

// TestInterrupt: Interrupt stops a run that waits for its approval: the
// turn ends interrupted, and the tool never runs. So does a cancelled
// approval (an interrupt handled by another replica cancels the session's
// approvals, and that may reach the waiting call before the interrupt
// does): nobody rejected the call.
func TestInterrupt(t *testing.T) {
	for _, how := range []string{"Interrupt", "approval cancelled"} {
		t.Run(how, func(t *testing.T) {
			leaktest.Check(t)
			ctx := testContext(t, 20*time.Second)
			st := &memory.MemStore{}
			var runs atomic.Int32
			p := newReplica(t, st, model(t), &runs, options{})
			f := subscribe(ctx, t, p.r, "s1", 0)
			startWaiting(ctx, t, p.r, f)
			if how == "Interrupt" {
				ok, err := p.r.Interrupt(ctx, "s1")
				require.NoError(t, err)
				assert.True(t, ok)
			} else {
				// Cancelled in the store by another process, before any
				// interrupt reaches this one.
				other, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st})
				require.NoError(t, err)
				defer other.Close()
				n, err := other.CancelSession(ctx, "s1")
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
			end := f.waitFor(ctx, "the end", isEnd(runner.StatusInterrupted))
			assert.Empty(t, end.Ended.Cause, "%+v", end.Ended)
			assert.Zero(t, runs.Load())
			ok, err := p.r.Interrupt(ctx, "s1")
			require.NoError(t, err)
			assert.False(t, ok, "nothing left to interrupt")
		})
	}
}

// TestSubscribeFromCursor: a subscriber that reconnects with the Seq of
// the last event it had gets the rest and nothing twice; one whose cursor
// is beyond the log is told to reload.
func TestSubscribeFromCursor(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	var all []runner.Event
	for e, err := range p.r.Send(ctx, agent.Input{SessionID: "s1", Message: "hello"}) {
		require.NoError(t, err)
		all = append(all, e)
	}
	mid := all[len(all)/2].Seq
	var rest []runner.Event
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	for e, err := range p.r.Subscribe(sctx, "s1", mid) {
		require.NoError(t, err)
		rest = append(rest, e)
	}
	assert.Equal(t, all[len(all)/2+1:], rest)

	var lost error
	for _, err := range p.r.Subscribe(ctx, "s1", all[len(all)-1].Seq+5) {
		lost = err
	}
	assert.ErrorIs(t, lost, runner.ErrEventsLost)
}

// TestDeleteEndsSubscriptions: deleting a session ends its subscriptions
// with EventSessionDeleted and removes it from the store.
func TestDeleteEndsSubscriptions(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	f := subscribe(ctx, t, p.r, "s1", 0)
	startWaiting(ctx, t, p.r, f)
	require.NoError(t, p.r.Delete(ctx, "s1"))
	f.waitFor(ctx, "the deletion", func(e runner.Event) bool { return e.Kind == runner.EventSessionDeleted })
	_, err := st.Session(ctx, "s1")
	assert.ErrorIs(t, err, memory.ErrNotFound)
	assert.Zero(t, runs.Load())
}

// TestLostLeaseRunsNothing: a run whose lease another process took (it was
// too slow to renew it) does not run its approved call: it suspends, and
// the call stays open for the new holder.
func TestLostLeaseRunsNothing(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{holder: "A", ttl: time.Hour})
	f := subscribe(ctx, t, p.r, "s1", 0)
	turn, req := startWaiting(ctx, t, p.r, f)
	// While A waits, its lease goes to B.
	require.NoError(t, st.ReleaseLease(ctx, "s1", "A"))
	ok, err := st.AcquireLease(ctx, "s1", "B", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = p.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	<-turn.Done()
	assert.Equal(t, runner.StatusSuspended, turn.Ended().Status)
	assert.Zero(t, runs.Load())
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	assert.Len(t, open, 1)
}

// TestClosed: a closed Runner starts nothing.
func TestClosed(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	var runs atomic.Int32
	p := newReplica(t, &memory.MemStore{}, model(t), &runs, options{})
	p.close()
	_, err := p.r.Start(ctx, agent.Input{SessionID: "s1", Message: "hello"})
	assert.True(t, errors.Is(err, runner.ErrClosed), "Start after Close: %v", err)
	for _, err := range p.r.Subscribe(ctx, "s1", 0) {
		assert.ErrorIs(t, err, runner.ErrClosed)
	}
}

// TestDecisionResumesOnce: A's turn is suspended while it waits
// (SuspendAfter); the decision is posted to B; both processes hear of it
// and try to resume the turn; exactly one does, and the tool runs once.
func TestDecisionResumesOnce(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	srv := model(t)
	var runs atomic.Int32
	a := newReplica(t, st, srv, &runs, options{suspendAfter: 50 * time.Millisecond})
	b := newReplica(t, st, srv, &runs, options{suspendAfter: 50 * time.Millisecond})
	f := subscribe(ctx, t, a.r, "s1", 0)
	turn, req := startWaiting(ctx, t, a.r, f)
	<-turn.Done()
	require.Equal(t, runner.StatusSuspended, turn.Ended().Status)

	ok, err := b.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	f.waitFor(ctx, "the resumed turn's end", isEnd(runner.StatusFinished))
	time.Sleep(200 * time.Millisecond) // a second resume would have run by now
	assert.Equal(t, int32(1), runs.Load())
	starts := 0
	for _, e := range f.seen {
		if e.Kind == runner.EventTurnStarted {
			starts++
		}
	}
	assert.Equal(t, 2, starts, "the turn and one resumed turn: %s", describe(f.seen))
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	assert.Equal(t, "It is sunny in Lima.", msgs[len(msgs)-1].Content)
}

// TestFollowAndInterruptOnOtherProcess: B's subscribers follow a turn that
// A drives, through the store's event log and its notes; an interrupt
// posted to B stops A's run.
func TestFollowAndInterruptOnOtherProcess(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	srv := model(t)
	var runs atomic.Int32
	a := newReplica(t, st, srv, &runs, options{})
	b := newReplica(t, st, srv, &runs, options{})
	onA := subscribe(ctx, t, a.r, "s1", 0)
	onB := subscribe(ctx, t, b.r, "s1", 0)
	_, err := a.r.Start(ctx, agent.Input{SessionID: "s1", Message: "weather in Lima?"})
	require.NoError(t, err)
	onA.waitFor(ctx, "approval_required on A", isState(agent.StateApprovalRequired))
	onB.waitFor(ctx, "approval_required on B", isState(agent.StateApprovalRequired))
	running, err := b.r.Running(ctx, "s1")
	require.NoError(t, err)
	assert.True(t, running, "B sees A's turn in progress")
	state, err := b.r.Log(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), state.Turn)
	require.NotNil(t, state.Started)
	assert.Equal(t, "weather in Lima?", state.Started.Message)

	ok, err := b.r.Interrupt(ctx, "s1")
	require.NoError(t, err)
	assert.True(t, ok)
	onA.waitFor(ctx, "the end on A", isEnd(runner.StatusInterrupted))
	onB.waitFor(ctx, "the end on B", isEnd(runner.StatusInterrupted))
	assert.Equal(t, describe(onA.seen), describe(onB.seen), "both processes' subscribers saw the same turn")
	for i := range onA.seen {
		assert.Equal(t, onA.seen[i].Seq, onB.seen[i].Seq)
	}
	assert.Zero(t, runs.Load())
}

// TestStaleTurnEnded: a turn whose process stopped mid-turn (its events
// end without a turn_ended, its lease is free) is ended by the sweeper of
// a process whose subscribers follow it: suspended, since its call waits.
func TestStaleTurnEnded(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	_, err := st.CreateSession(ctx, memory.Session{ID: "s1"})
	require.NoError(t, err)
	stored, err := st.AppendCalls(ctx, "s1", []memory.OpenCall{{CallID: "call_1", Round: 1}},
		memory.Message{Role: memory.RoleUser, Content: "weather in Lima?"},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: []byte(`{"city":"Lima"}`)}}})
	require.NoError(t, err)
	require.Len(t, stored, 2)
	// What the stopped process wrote: the turn's start and a chunk.
	require.NoError(t, st.AppendEvents(ctx, "s1",
		memory.Event{Seq: 1, Turn: 1, Kind: "turn_started", Data: []byte(`{"message":"weather in Lima?","history":0}`)},
		memory.Event{Seq: 2, Turn: 1, Kind: "chunk", Data: []byte(`{"kind":"text","round":0,"text":"Let me look."}`)}))

	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{sweep: 20 * time.Millisecond})
	f := subscribe(ctx, t, p.r, "s1", 0)
	end := f.waitFor(ctx, "the stale turn's end", func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded })
	assert.Equal(t, int64(3), end.Seq)
	assert.Equal(t, int64(1), end.Turn)
	assert.Equal(t, runner.StatusSuspended, end.Ended.Status)
	assert.Contains(t, end.Ended.Reason, "stopped")
	// The sweeper asks about the call it finds never asked about.
	f.waitFor(ctx, "the call asked about again", isState(agent.StateApprovalRequired))
}
