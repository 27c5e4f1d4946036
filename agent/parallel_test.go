package agent_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

func TestParallelToolsRunConcurrentlyInCallOrder(t *testing.T) {
	leaktest.Check(t)
	// Each tool waits until the other has started: only a concurrent run
	// finishes both without the fallback.
	started := map[string]chan struct{}{"left": make(chan struct{}), "right": make(chan struct{})}
	other := map[string]string{"left": "right", "right": "left"}
	mk := func(name string) agent.Tool {
		return agent.FuncTool{
			Def: agent.ToolDefinition{Name: name},
			Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
				close(started[name])
				select {
				case <-started[other[name]]:
					return name + " saw " + other[name], nil
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(5 * time.Second):
					return name + " ran alone", nil
				}
			},
		}
	}
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_l", "left", `{}`).Call(1, "call_r", "right", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("both done").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = true }, mk("left"), mk("right"))
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:left", "tool:start:right",
		"tool:approval_required:left", "tool:approval_required:right",
		"tool:executing:left", "tool:executing:right",
		"tool:result:left", "tool:result:right",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "left saw right", msgs[3].Content)
	assert.Equal(t, "right saw left", msgs[4].Content)
}

// TestProgressOfAQuickToolIsAlwaysYielded: a tool that writes output and
// returns at once shows that output as an executing chunk in every run, also
// when its result is ready before the agent looks at its progress.
func TestProgressOfAQuickToolIsAlwaysYielded(t *testing.T) {
	leaktest.Check(t)
	mk := func(name string, wait <-chan struct{}, done chan<- struct{}) agent.Tool {
		return agent.FuncTool{
			Def: agent.ToolDefinition{Name: name, SkipApproval: true},
			Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
				if done != nil {
					defer close(done)
				}
				if wait != nil {
					<-wait
				}
				p.WriteString(name + " output\n")
				return name + " done", nil
			},
		}
	}
	for i := range 20 {
		// first waits until second has written and returned, so second's
		// result is usually ready when the agent turns to it.
		secondDone := make(chan struct{})
		srv := newServer(t)
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "first", `{}`).Call(1, "call_2", "second", `{}`).Finish("tool_calls"),
			agenttest.Reply().Text("ok").Finish("stop"),
		)
		a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = true }, mk("first", secondDone, nil), mk("second", nil, secondDone))
		chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
		require.NoError(t, err)
		assert.Equal(t, []string{
			"text", "round_end:0:need_tool",
			"tool:start:first", "tool:start:second",
			"tool:executing:first", "tool:executing:second",
			"tool:progress:first", "tool:result:first",
			"tool:progress:second", "tool:result:second",
			"round_end:1", "text", "round_end:2",
		}, trace(chunks), "run %d", i)
	}
}

func TestParallelToolsInterrupted(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var running atomic.Int32
	mk := func(name string) agent.Tool {
		return agent.FuncTool{
			Def: agent.ToolDefinition{Name: name, SkipApproval: true},
			Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
				p.WriteString(name + " working\n")
				if running.Add(1) == 2 {
					cancel() // both run: the user presses stop
				}
				<-ctx.Done()
				return "", ctx.Err()
			},
		}
	}
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_l", "left", `{}`).Call(1, "call_r", "right", `{}`).Finish("tool_calls"))
	a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = true }, mk("left"), mk("right"))
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.Equal(t, []string{
		"rejected:left:" + agent.CauseInterrupted.DefaultReason(), "rejected:right:" + agent.CauseInterrupted.DefaultReason(), "interrupted",
	}, tr[len(tr)-3:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "left working\n\n["+agent.CauseInterrupted.DefaultReason()+"]", msgs[len(msgs)-2].Content)
	assert.Equal(t, "right working\n\n["+agent.CauseInterrupted.DefaultReason()+"]", msgs[len(msgs)-1].Content)
}

// toolGoroutines counts the goroutines that run a tool call.
func toolGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "agent.(*run).start.func")
}

// TestParallelInterruptKeepsCompletedResults: with ParallelTools, a call that
// had returned before the run was interrupted keeps its result, as it would
// in a sequential run; only the call still running is interrupted.
func TestParallelInterruptKeepsCompletedResults(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quickDone := make(chan struct{})
	slow := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "slow", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
			<-quickDone
			// Wait until the quick call's goroutine has ended, so that it
			// has returned before the user presses stop.
			for toolGoroutines() > 1 {
				runtime.Gosched()
			}
			p.WriteString("slow working\n") // the consumer cancels on this
			<-ctx.Done()
			return "", ctx.Err()
		},
	}
	quick := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "quick", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			defer close(quickDone)
			return "quick result", nil
		},
	}
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_s", "slow", `{}`).Call(1, "call_q", "quick", `{}`).Finish("tool_calls"))
	a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = true }, slow, quick)
	turn := a.NewTurn(agent.Input{Message: "go"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindToolCall && c.Tool.PartialResult != "" {
			cancel()
		}
	}
	tr := trace(chunks)
	assert.Equal(t, []string{"rejected:slow:" + agent.CauseInterrupted.DefaultReason(), "tool:result:quick", "interrupted"}, tr[len(tr)-3:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "quick result", msgs[len(msgs)-1].Content)
	assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)))
}
