package runner_test

import (
	"context"
	"errors"
	"sync"
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

// gate holds the next call of a store method that passes it, once held:
// a process slow at that step.
type gate struct {
	mu      sync.Mutex
	open    chan struct{} // the next call waits until it is closed; nil: none
	entered chan struct{} // closed when that call waits
}

// hold gates the next call; the returned channel is closed once that call
// waits, and open lets it go on.
func (g *gate) hold() (entered <-chan struct{}, open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open, g.entered = make(chan struct{}), make(chan struct{})
	gate := g.open
	return g.entered, func() { close(gate) }
}

// pass waits, when the call is gated, until the gate opens or ctx ends.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	open, entered := g.open, g.entered
	g.open, g.entered = nil, nil
	g.mu.Unlock()
	if open == nil {
		return nil
	}
	close(entered)
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedStore is a MemStore whose next Messages, once held, waits for the
// gate to open: a process slow to load a session.
type gatedStore struct {
	*memory.MemStore
	gate
}

func (s *gatedStore) Messages(ctx context.Context, sessionID string, all bool) ([]memory.Message, error) {
	if err := s.pass(ctx); err != nil {
		return nil, err
	}
	return s.MemStore.Messages(ctx, sessionID, all)
}

// finishTurn runs a turn of s1 on r to its end.
func finishTurn(ctx context.Context, t *testing.T, r *runner.Runner, message string) {
	t.Helper()
	turn, err := r.Start(ctx, agent.Input{SessionID: "s1", Message: message})
	require.NoError(t, err)
	select {
	case <-turn.Done():
	case <-ctx.Done():
		t.Fatalf("waiting for the turn's end: %v", ctx.Err())
	}
	require.Equal(t, runner.StatusFinished, turn.Ended().Status, "%+v", turn.Ended())
}

// sendAsync starts a turn of s1 on r with message and gives its outcome,
// once its turn has ended (or Start's error).
func sendAsync(ctx context.Context, r *runner.Runner, message string) <-chan error {
	started := make(chan error, 1)
	go func() {
		turn, err := r.Start(ctx, agent.Input{SessionID: "s1", Message: message})
		if err == nil {
			<-turn.Done()
		}
		started <- err
	}()
	return started
}

// TestMessageWaitsForAResumeThatFindsNothing: a turn has ended; the
// sweeper or a decision's note makes this process look for something to
// resume in the session (here slow to load it) just as the user sends the
// next message. The message waits for that look, which starts no turn,
// instead of being refused as if a run were active.
func TestMessageWaitsForAResumeThatFindsNothing(t *testing.T) {
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
	started := sendAsync(ctx, p.r, "hello again")
	select {
	case err := <-started:
		open()
		t.Fatalf("the message was answered while the resume looked at the session: %v", err)
	case <-time.After(100 * time.Millisecond): // it waits: it would have been refused by now
	}
	open()
	assert.True(t, errors.Is(<-resumed, agent.ErrNothingToResume), "the resume found nothing")
	require.NoError(t, <-started, "the message, once the resume let the session go")
}

// TestMessageWaitsForALeaseWithNoTurn: another process holds the session's
// lease while no turn is in progress (it ends a turn whose end is already
// shown, or looks at the session: a sweep, a resume that finds nothing),
// longer than a moment, as a process under load does. A new message waits
// for the lease instead of being refused as if a run were active.
func TestMessageWaitsForALeaseWithNoTurn(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{})
	finishTurn(ctx, t, p.r, "hello")

	ok, err := st.AcquireLease(ctx, "s1", "other", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	started := sendAsync(ctx, p.r, "hello again")
	select {
	case err := <-started:
		t.Fatalf("the message was answered while the other process held the lease: %v", err)
	case <-time.After(1500 * time.Millisecond): // longer than a moment (the runner's former 1 s)
	}
	require.NoError(t, st.ReleaseLease(ctx, "s1", "other"))
	require.NoError(t, <-started, "the message, once the lease was released")
}
