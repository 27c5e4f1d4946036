package runner_test

import (
	"context"
	"math"
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

// sameTurn checks that two subscribers saw the same events, numbered
// alike.
func sameTurn(t *testing.T, a, b *follow) {
	t.Helper()
	require.Equal(t, describe(a.seen), describe(b.seen), "both processes' subscribers saw the same turn")
	for i := range a.seen {
		assert.Equal(t, a.seen[i].Seq, b.seen[i].Seq, "event %d", i)
		if i > 0 {
			assert.Equal(t, a.seen[i-1].Seq+1, a.seen[i].Seq, "event %d follows the one before", i)
		}
	}
}

// TestEventLogSurvivesStoreBlip: the store fails the first appends of a
// turn's events (a blip; or writes them and reports a failure, as a
// connection lost at commit does). The subscriber of another process, which
// reads the store's log, still gets the whole turn, answer and end, numbered
// as in the driving process; the next turn's too; and the other process does
// not take the finished turn for one a stopped process left open.
func TestEventLogSurvivesStoreBlip(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int
		committed bool
	}{
		{"three failed appends", 3, false},
		{"four failed appends", 4, false},
		{"an append written but reported failed", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := testContext(t, 20*time.Second)
			st := &flakyStore{MemStore: &memory.MemStore{}}
			srv := model(t)
			var runs atomic.Int32
			a := newReplica(t, st, srv, &runs, options{})
			b := newReplica(t, st, srv, &runs, options{})
			onA := subscribe(ctx, t, a.r, "s1", 0)
			onB := subscribe(ctx, t, b.r, "s1", 0)

			st.failAppends(tc.failures, tc.committed)
			_, err := a.r.Start(ctx, agent.Input{SessionID: "s1", Message: "hello"})
			require.NoError(t, err)
			onA.waitFor(ctx, "the end on A", isEnd(runner.StatusFinished))
			onB.waitFor(ctx, "the end on B", isEnd(runner.StatusFinished))
			sameTurn(t, onA, onB)
			assert.Contains(t, describe(onB.seen), `"text"`, "B got the answer")

			running, err := b.r.Running(ctx, "s1")
			require.NoError(t, err)
			assert.False(t, running)
			state, err := b.r.Log(ctx, "s1")
			require.NoError(t, err)
			assert.Equal(t, onA.seen[len(onA.seen)-1].Seq, state.Last)

			// The next turn goes on after it, on either process.
			_, err = b.r.Start(ctx, agent.Input{SessionID: "s1", Message: "hello again"})
			require.NoError(t, err)
			onA.waitFor(ctx, "the second end on A", isEnd(runner.StatusFinished))
			onB.waitFor(ctx, "the second end on B", isEnd(runner.StatusFinished))
			sameTurn(t, onA, onB)
			for _, e := range onB.seen {
				if e.Ended != nil {
					assert.NotEqual(t, runner.ReasonProcessStopped, e.Ended.Reason, "a finished turn taken for a stopped one")
				}
			}
		})
	}
}

// TestEventLogKeepsUnencodableChunk: a tool shows a side payload that does
// not encode as JSON (a NaN). The event log holds a warning in its place,
// and the subscriber of another process gets the rest of the turn: the
// answer and the end, numbered as in the driving process.
func TestEventLogKeepsUnencodableChunk(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	srv := model(t)
	var runs atomic.Int32
	type args struct {
		City string `json:"city"`
	}
	nan := agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in args, _ agent.Progress) (string, error) {
		runs.Add(1)
		agent.ShowSide(ctx, map[string]any{"temperature": math.NaN()})
		return "sunny in " + in.City, nil
	})
	a := newReplica(t, st, srv, &runs, options{weather: nan})
	b := newReplica(t, st, srv, &runs, options{})
	onA := subscribe(ctx, t, a.r, "s1", 0)
	onB := subscribe(ctx, t, b.r, "s1", 0)
	_, req := startWaiting(ctx, t, a.r, onA)
	ok, err := a.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	onA.waitFor(ctx, "the end on A", isEnd(runner.StatusFinished))
	onB.waitFor(ctx, "the end on B", isEnd(runner.StatusFinished))
	require.Len(t, onB.seen, len(onA.seen))
	found := false
	for i, e := range onB.seen {
		assert.Equal(t, onA.seen[i].Seq, e.Seq, "event %d", i)
		if ae := onA.seen[i]; ae.Chunk != nil && ae.Chunk.Kind == agent.KindSide {
			found = true
			require.NotNil(t, e.Chunk, "event %d", i)
			assert.Equal(t, agent.KindWarning, e.Chunk.Kind, "the log holds a warning in place of the side chunk")
			assert.Equal(t, runner.WarnNotLogged, e.Chunk.Code)
			assert.Contains(t, e.Chunk.Text, "NaN")
			assert.Equal(t, ae.Chunk.Round, e.Chunk.Round)
		}
	}
	assert.True(t, found, "A's subscriber saw the side chunk: %s", describe(onA.seen))
	var text string
	for _, e := range onB.seen {
		if e.Chunk != nil && e.Chunk.Kind == agent.KindText && e.Chunk.Round > 0 {
			text += e.Chunk.Text
		}
	}
	assert.Equal(t, "It is sunny in Lima.", text, "B got the answer")
}

// TestEventLogWrittenByAnother: while A drives a turn, another process
// writes the session's log (a process that took the session over, or one
// whose late events land after A took it): A's events do not go after
// it, and A's run stops as one that lost the session.
func TestEventLogWrittenByAnother(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	type args struct {
		City string `json:"city"`
	}
	blocking := agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in args, _ agent.Progress) (string, error) {
		runs.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return "", ctx.Err()
	})
	a := newReplica(t, st, model(t), &runs, options{weather: blocking})
	f := subscribe(ctx, t, a.r, "s1", 0)
	turn, req := startWaiting(ctx, t, a.r, f)

	// Wait until A's events so far are in the store, then write one of
	// another process after them.
	var last int64
	require.Eventually(t, func() bool {
		n, err := st.LastEvent(ctx, "s1")
		last = n
		return err == nil && n == req.Seq
	}, 5*time.Second, 5*time.Millisecond)
	foreign := memory.Event{Seq: last + 1, Turn: req.Turn, Kind: string(runner.EventTurnEnded), Data: []byte(`{"status":"interrupted","reason":"another process"}`)}
	require.NoError(t, st.AppendEvents(ctx, "s1", foreign))

	ok, err := a.r.Decide(ctx, approve("s1", req.Chunk.Tool))
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-turn.Done():
	case <-ctx.Done():
		t.Fatal("A's run went on after another process wrote the session's log")
	}
	assert.Equal(t, runner.TurnEnded{Status: runner.StatusInterrupted, Reason: runner.ReasonSessionLost}, turn.Ended())
	evs, n, err := st.Events(ctx, "s1", last, 0)
	require.NoError(t, err)
	assert.Equal(t, last+1, n, "nothing of A after the other process's event")
	require.Len(t, evs, 1)
	assert.Equal(t, foreign.Data, evs[0].Data)
}
