package agent_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

func TestNewRequestLimitRefusesNonPositive(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, err := agent.NewRequestLimit(n)
		assert.Error(t, err, "n = %d", n)
	}
}

// Eight runs of two Agents that share a limit of 2 never have more than
// two responses streaming at once; each run still gets its two rounds, and
// the queue is empty at the end.
func TestRequestLimitBoundsRequestsInFlight(t *testing.T) {
	leaktest.Check(t)
	const runs, limit = 8, 2
	srv := newServer(t)
	var streaming, most atomic.Int32
	reply := func(text string) agenttest.Response {
		r := agenttest.Reply().Text(text, " and more", " words").Finish("stop").Delay(5 * time.Millisecond)
		last := r.NumFrames()
		return r.OnFlush(func(frame int) {
			switch frame {
			case 1:
				n := streaming.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
			case last:
				streaming.Add(-1)
			}
		})
	}
	for range runs {
		srv.Enqueue(reply("Hello.<no_tool>"), reply("Done."))
	}
	l, err := agent.NewRequestLimit(limit)
	require.NoError(t, err)
	agents := []*agent.Agent{
		newAgent(t, srv, func(c *agent.Config) { c.RequestLimit = l }),
		newAgent(t, srv, func(c *agent.Config) { c.RequestLimit = l }),
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			chunks, err := collect(agents[i%2].Run(context.Background(), agent.Input{Message: "hi"}))
			assert.NoError(t, err)
			tr := trace(chunks)
			assert.Equal(t, "round_end:1", tr[len(tr)-1])
		})
	}
	wg.Wait()
	assert.Zero(t, srv.Pending(), "every run sent its two requests")
	assert.LessOrEqual(t, most.Load(), int32(limit), "responses streaming at once")
	assert.Zero(t, l.InFlight())
	assert.Zero(t, l.Waiting())
}

// A run waiting for a slot leaves the queue when it is interrupted: it
// ends interrupted, its request never sent, and the queue is empty.
func TestRequestLimitWaitIsInterrupted(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	hold := make(chan struct{})
	srv.Enqueue(agenttest.Reply().Text("Hello.<no_tool>").Finish("stop").OnFlush(func(frame int) {
		if frame == 1 {
			<-hold
		}
	}), agenttest.Reply().Text("Done.").Finish("stop"))
	l, err := agent.NewRequestLimit(1)
	require.NoError(t, err)
	rec := newRecording(t)
	a := newAgent(t, srv, func(c *agent.Config) { c.RequestLimit = l; rec.config(c) })

	first := make(chan []agent.Chunk)
	go func() {
		chunks, _ := collect(a.Run(context.Background(), agent.Input{Message: "first"}))
		first <- chunks
	}()
	require.Eventually(t, func() bool { return l.InFlight() == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan []agent.Chunk)
	go func() {
		chunks, _ := collect(a.Run(ctx, agent.Input{Message: "second"}))
		second <- chunks
	}()
	require.Eventually(t, func() bool { return l.Waiting() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	chunks := <-second
	require.NotEmpty(t, chunks)
	assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
	assert.Zero(t, l.Waiting(), "it left the queue")
	assert.Equal(t, 1, l.InFlight(), "the first run still holds its slot")

	close(hold)
	tr := trace(<-first)
	assert.Equal(t, "round_end:1", tr[len(tr)-1])
	assert.Zero(t, l.InFlight())
	assert.Zero(t, srv.Pending(), "the interrupted run sent nothing")

	// Three requests came to the limit (the first run's two, the second
	// run's one, which waited and gave up); none waits now.
	m := rec.metrics(t)
	assert.Equal(t, []string{"gen_ai.request.model=test-model: 3"}, points(t, m["planround.model.queue.wait"]))
	assert.Equal(t, []string{"gen_ai.request.model=test-model: 0"}, points(t, m["planround.model.queue.length"]))
}
