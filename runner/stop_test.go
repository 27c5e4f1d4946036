package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// TestSendRightAfterInterrupt: a turn runs a tool that takes a moment to
// wind down once interrupted. A message sent as soon as Interrupt returned
// (true: a run was stopped) starts the next turn instead of being refused
// as busy, whether the interrupted run is driven by this process or by
// another one; five times in a row.
func TestSendRightAfterInterrupt(t *testing.T) {
	for _, where := range []string{"this process", "another process"} {
		t.Run(where, func(t *testing.T) {
			leaktest.Check(t)
			ctx := testContext(t, 30*time.Second)
			st := &memory.MemStore{}
			srv := model(t)
			var runs atomic.Int32
			type args struct {
				City string `json:"city"`
			}
			slow := agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in args, _ agent.Progress) (string, error) {
				runs.Add(1)
				select {
				case <-ctx.Done():
					time.Sleep(100 * time.Millisecond) // it cleans up
					return "", ctx.Err()
				case <-time.After(10 * time.Second):
					return "sunny in " + in.City, nil
				}
			})
			a := newReplica(t, st, srv, &runs, options{weather: slow})
			b := a
			if where == "another process" {
				b = newReplica(t, st, srv, &runs, options{weather: slow})
			}
			f := subscribe(ctx, t, a.r, "s1", 0)
			for i := range 5 {
				_, err := a.r.Start(ctx, agent.Input{SessionID: "s1", Message: "weather in Lima?"})
				require.NoError(t, err, "round %d", i)
				req := f.waitFor(ctx, "approval_required", isState(agent.StateApprovalRequired))
				ok, err := a.r.Decide(ctx, approve("s1", req.Chunk.Tool))
				require.NoError(t, err)
				require.True(t, ok)
				f.waitFor(ctx, "executing", isState(agent.StateExecuting))

				stopped, err := b.r.Interrupt(ctx, "s1")
				require.NoError(t, err)
				require.True(t, stopped, "round %d: a run was stopped", i)
				turn, err := b.r.Start(ctx, agent.Input{SessionID: "s1", Message: "hello"})
				require.NoError(t, err, "round %d: the message sent once the stop was acknowledged", i)
				select {
				case <-turn.Done():
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
				assert.Equal(t, runner.StatusFinished, turn.Ended().Status, "round %d", i)
				f.waitFor(ctx, "the next turn's end", func(e runner.Event) bool {
					return e.Kind == runner.EventTurnEnded && e.Turn == turn.Seq
				})
			}
		})
	}
}

// TestInterruptWhileALookElsewhere: the session's turn runs in process A
// while process B only looks at the session (a resume on a decision's note,
// slow to load it), when the user presses stop on B. B's look starts no
// turn (A holds the session), so the stop must reach A: Interrupt reports
// the run, and A's turn ends interrupted. Before, B took its own look for
// the whole story, reported nothing to stop, and A's turn ran on.
func TestInterruptWhileALookElsewhere(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 30*time.Second)
	mem := &memory.MemStore{}
	gated := &leaseGatedStore{MemStore: mem}
	srv := model(t)
	var runs atomic.Int32
	type args struct {
		City string `json:"city"`
	}
	slow := agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in args, _ agent.Progress) (string, error) {
		runs.Add(1)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Second):
			return "sunny in " + in.City, nil
		}
	})
	a := newReplica(t, mem, srv, &runs, options{weather: slow})
	b := newReplica(t, gated, srv, &runs, options{weather: slow})
	f := subscribe(ctx, t, a.r, "s1", 0)
	turn, err := a.r.Start(ctx, agent.Input{SessionID: "s1", Message: "weather in Lima?"})
	require.NoError(t, err)
	req := f.waitFor(ctx, "approval_required", isState(agent.StateApprovalRequired))
	ok, err := a.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	f.waitFor(ctx, "executing", isState(agent.StateExecuting))

	entered, open := gated.hold()
	resumed := make(chan error, 1)
	go func() {
		_, err := b.r.Resume(ctx, "s1")
		resumed <- err
	}()
	<-entered // B looks at the session, asking for its lease
	stopped := make(chan bool, 1)
	go func() {
		ok, err := b.r.Interrupt(ctx, "s1")
		assert.NoError(t, err)
		stopped <- ok
	}()
	for deadline := time.Now().Add(10 * time.Second); !runner.StopsOnStart(b.r, "s1"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the interrupt never found B's look")
		}
	}
	open()
	assert.Error(t, <-resumed, "B's look starts no turn: A holds the session")
	assert.True(t, <-stopped, "the stop reached A's turn")
	select {
	case <-turn.Done():
	case <-ctx.Done():
		t.Fatal("A's turn was not interrupted")
	}
	assert.Equal(t, runner.StatusInterrupted, turn.Ended().Status)
	assert.Equal(t, int32(1), runs.Load(), "the tool ran once")
}

// leaseGatedStore is a MemStore whose next AcquireLease, once held, waits
// for the gate to open: a process slow to ask for a session's lease.
type leaseGatedStore struct {
	*memory.MemStore
	gate
}

func (s *leaseGatedStore) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error) {
	if err := s.pass(ctx); err != nil {
		return false, err
	}
	return s.MemStore.AcquireLease(ctx, sessionID, holder, ttl)
}

// TestInterruptWhileAResumeLooks: a resume looks at a session whose turn
// ended (the sweeper, a decision's note), slow to load it, when the user
// presses stop. No turn is in progress: Interrupt reports none, so that a
// front end does not wait for the end of a turn that never comes.
func TestInterruptWhileAResumeLooks(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &gatedStore{MemStore: &memory.MemStore{}}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	finishTurn(ctx, t, p.r, "hello")

	entered, open := st.hold()
	resumed := make(chan error, 1)
	go func() {
		_, err := p.r.Resume(ctx, "s1")
		resumed <- err
	}()
	<-entered // the resume holds the session, loading it
	stopped := make(chan bool, 1)
	go func() {
		ok, err := p.r.Interrupt(ctx, "s1")
		assert.NoError(t, err)
		stopped <- ok
	}()
	// The interrupt finds the resume looking, and asks it to stop should
	// it start a turn.
	for deadline := time.Now().Add(10 * time.Second); !runner.StopsOnStart(p.r, "s1"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the interrupt never found the resume")
		}
	}
	open()
	assert.False(t, <-stopped, "a resume that started no turn is no run to report")
	assert.ErrorIs(t, <-resumed, agent.ErrNothingToResume, "the resume found nothing, and published nothing")
}
