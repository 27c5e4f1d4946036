package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

func TestInterruptDuringApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &recorder{decide: func(ctx context.Context) (agent.Decision, error) {
		cancel() // the user presses stop while the card waits
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	}}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.Equal(t, []string{"rejected:get_weather:" + agent.CauseApprovalInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, agent.CauseApprovalInterrupted.DefaultReason(), msgs[len(msgs)-1].Content)
}

func TestInterruptDuringExecutionKeepsPartialOutput(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "tail", `{}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tail := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "tail", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
			p.WriteString("line 1\n")
			p.WriteString("line 2\n")
			<-ctx.Done()
			return "", ctx.Err()
		},
	}
	a := newAgent(t, srv, nil, tail)
	turn := a.NewTurn(agent.Input{Message: "go"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindToolCall && c.Tool.PartialResult != "" && strings.HasSuffix(partialSoFar(chunks), "line 2\n") {
			cancel()
		}
	}
	tr := trace(chunks)
	require.GreaterOrEqual(t, len(tr), 2)
	assert.Equal(t, []string{"rejected:tail:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	rej := chunks[len(chunks)-2].Tool
	assert.Equal(t, "line 1\nline 2\n", rej.PartialResult)
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "line 1\nline 2\n\n["+agent.CauseInterrupted.DefaultReason()+"]", msgs[len(msgs)-1].Content)
}

func partialSoFar(chunks []agent.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateExecuting {
			b.WriteString(c.Tool.PartialResult)
		}
	}
	return b.String()
}

func TestInterruptDuringStreaming(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv.Enqueue(agenttest.Reply().Text("Thinking ", "about ", "it").Finish("stop").HoldAfter(2))
	a := newAgent(t, srv, nil)
	turn := a.NewTurn(agent.Input{Message: "go"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindText {
			cancel()
		}
	}
	require.NotEmpty(t, chunks)
	assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
	msgs := turn.Messages()
	validHistory(t, msgs)
	require.Len(t, msgs, 2)
	assert.True(t, strings.HasPrefix(msgs[1].Content, "Thinking "), "what arrived is kept: %q", msgs[1].Content)
}

// TestInterruptBetweenCallsAsksNoMore: once the run is interrupted, the calls
// that have not begun are closed as not run; none is shown for approval,
// prepared or executed.
func TestInterruptBetweenCallsAsksNoMore(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			leaktest.Check(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := newServer(t)
			// The first call ends at once: a result in the sequential run, an
			// unknown tool in both.
			first := "get_weather"
			if parallel {
				first = "no_such_tool"
			}
			srv.Enqueue(planNeedTool(), agenttest.Reply().
				Call(0, "call_1", first, `{"city":"Oslo"}`).
				Call(1, "call_2", "get_weather", `{"city":"Rome"}`).
				Call(2, "call_3", "show_card", `{}`).
				Finish("tool_calls").Unsolicited()) // no_such_tool is not offered
			p := &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
			a := newAgent(t, srv, func(c *agent.Config) {
				c.ParallelTools = parallel
				c.Approver = p
			}, weatherTool(), cardTool())
			turn := a.NewTurn(agent.Input{Message: "go"})
			var chunks []agent.Chunk
			for c, err := range turn.Run(ctx) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Tool != nil && c.Tool.ID == "call_1" && (c.Kind == agent.KindToolRejected || c.Tool.State == agent.StateResult) {
					cancel() // the user presses stop as the first result shows
				}
			}
			tr := trace(chunks)
			firstEnd := "tool:result:get_weather"
			if parallel {
				firstEnd = `rejected:no_such_tool:error: unknown tool "no_such_tool"`
			}
			assert.Equal(t, []string{
				firstEnd,
				"rejected:get_weather:" + agent.CauseNotRun.DefaultReason(),
				"rejected:show_card:" + agent.CauseNotRun.DefaultReason(),
				"interrupted",
			}, tr[len(tr)-4:])
			if parallel {
				assert.Zero(t, p.requested.Load(), "no approval prepared after the interrupt")
			} else {
				assert.Equal(t, int32(1), p.requested.Load(), "no approval prepared after the interrupt")
			}
			assert.Equal(t, p.requested.Load(), p.waited.Load())
			closedCards(t, chunks)
			validHistory(t, turn.Messages())
			assert.Equal(t, strip(turn.Messages()[1:]), strip(agent.History(chunks)))
		})
	}
}
