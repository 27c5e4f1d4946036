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
	"github.com/planround/planround/memory"
)

// TestBreakAfterEveryChunk breaks out of the loop after chunk 1, 2, ... N of
// a tool run, sequential and parallel, with a policy, a person who answers
// at once, and a person whose tickets are counted: no panic, no leaked
// goroutine, valid history that keeps everything the consumer saw, and every
// pending ticket waited for once.
func TestBreakAfterEveryChunk(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Text("Checking.").
				Call(0, "call_1", "get_weather", `{"city":"Paris"}`).
				Call(1, "call_2", "tail", `{}`).
				Call(2, "call_3", "get_weather", `{"city":"Rome"}`).
				Finish("tool_calls"),
			agenttest.Reply().Text("Done.").Finish("stop"),
		)
	}
	tail := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "tail", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
			p.WriteString("partial\n")
			return "all", nil
		},
	}
	for _, parallel := range []bool{false, true} {
		for _, approver := range []string{"policy", "person", "recorder"} {
			name := fmt.Sprintf("parallel=%v/%s", parallel, approver)
			var p *recorder
			mut := func(c *agent.Config) {
				c.ParallelTools = parallel
				switch approver {
				case "policy":
					c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
						return agent.Decision{Approved: true}, nil
					})
				case "recorder":
					p = &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
					c.Approver = p
				}
			}
			// Count the chunks of a full run first.
			srv := newServer(t)
			script(srv)
			all, err := collect(newAgent(t, srv, mut, weatherTool(), tail).Run(context.Background(), agent.Input{Message: "go"}))
			require.NoError(t, err, name)
			require.Greater(t, len(all), 10, name)

			for n := 1; n <= len(all); n++ {
				t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
					leaktest.Check(t)
					srv := newServer(t)
					script(srv)
					turn := newAgent(t, srv, mut, weatherTool(), tail).NewTurn(agent.Input{Message: "go"})
					var got []agent.Chunk
					for c, err := range turn.Run(context.Background()) {
						require.NoError(t, err)
						got = append(got, c)
						if len(got) == n {
							break
						}
					}
					require.Len(t, got, n)
					msgs := turn.Messages()
					validHistory(t, msgs)
					validHistory(t, agent.History(got))
					// The turn keeps every piece of text the consumer saw.
					var seen, kept strings.Builder
					for _, c := range got {
						if c.Kind == agent.KindText {
							seen.WriteString(c.Raw)
						}
					}
					for _, m := range msgs {
						if m.Role == memory.RoleAssistant {
							kept.WriteString(m.Content)
						}
					}
					assert.True(t, strings.HasPrefix(kept.String(), seen.String()), "kept %q, saw %q", kept.String(), seen.String())
					if p != nil {
						assert.Equal(t, p.requested.Load(), p.waited.Load(), "every Request gets its Wait")
					}
				})
			}
		}
	}
}

func TestRunTwiceYieldsErrTurnUsed(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
	_, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	_, err = collect(turn.Run(context.Background()))
	assert.ErrorIs(t, err, agent.ErrTurnUsed)
}
