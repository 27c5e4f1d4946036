package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/scripted"
	"github.com/planround/planround/memory"
)

// --- planning round ----------------------------------------------------------

func TestPlanningRoundNeedToolRunsToolLoop(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Pa`, `ris"}`).Finish("tool_calls"),
		scripted.Reply().Text("It is sunny in Paris.").Usage(30, 6).Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "Weather in Paris?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"text", "tool:start:get_weather", "tool:approval_required:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, "Let me look that up. ", text(chunks, 0), "tags never visible")
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			assert.Equal(t, "sunny in Paris", c.Tool.Result)
			assert.JSONEq(t, `{"city":"Paris"}`, string(c.Tool.Arguments))
		}
	}

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	plan := reqs[0]
	assert.False(t, plan.HasTools(), "planning request carries no tools")
	withPrompt(t, plan, intent.DefaultDictionary().PlanningPrompt())
	assert.NotContains(t, plan.LastMessage().Content, "get_weather", "no tool descriptions in the planning prompt")

	for i, req := range reqs[1:] {
		assert.True(t, req.HasTools(), "tool-loop request %d has tools", i+1)
		var sawContinue bool
		for _, m := range req.Messages {
			assert.NotContains(t, m.Content, intent.DefaultDictionary().PlanningPrompt(), "planning prompt gone from later requests")
			if m.Role == "assistant" {
				assert.NotContains(t, m.Content, "<need_tool>", "no intent tag in later requests")
			}
			if m.Role == "user" && m.Content == intent.ContinueMessage {
				sawContinue = true
			}
		}
		assert.True(t, sawContinue, "request %d has the [continue] transition", i+1)
	}
	// The tool loop's second request answers the call.
	second := reqs[2].Messages
	require.GreaterOrEqual(t, len(second), 2)
	assert.Equal(t, "tool", second[len(second)-1].Role)
	assert.Equal(t, "call_1", second[len(second)-1].ToolCallID)
	assert.Equal(t, "sunny in Paris", second[len(second)-1].Content)

	msgs := turn.Messages()
	validHistory(t, msgs)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = string(m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "assistant", "tool", "assistant"}, roles)
	assert.Equal(t, "Let me look that up. <need_tool>", msgs[1].Content, "persisted text keeps raw tags")
	for _, c := range chunks {
		if c.Kind == agent.KindRoundEnd && c.Round == 0 {
			assert.Equal(t, agent.IntentNeedTool, c.Intent)
			assert.Equal(t, int64(10), c.Usage.PromptTokens, "usage per round")
		}
	}
	assert.Equal(t, int64(40), turn.Usage().PromptTokens)
}

func TestPlanningRoundNoToolContinues(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), scripted.Reply().Text("The answer ", "is 42.").Finish("stop"))
	a := newAgent(t, srv, nil, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "What is the answer?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
	assert.Equal(t, "The answer is 42.", text(chunks, 1))

	reqs := srv.Requests()
	require.Len(t, reqs, 2, "exactly one continuation request")
	cont := reqs[1]
	assert.False(t, cont.HasTools())
	rest := withPrompt(t, cont, intent.ContinuationPrompt())
	n := len(rest)
	require.GreaterOrEqual(t, n, 2)
	assert.Equal(t, intent.ContinueMessage, rest[n-1].Content)
	assert.Equal(t, "Hello! I can answer that.", rest[n-2].Content, "tags stripped from the working list")
	for _, m := range cont.Messages {
		assert.NotContains(t, m.Content, intent.DefaultDictionary().PlanningPrompt())
	}
	msgs := turn.Messages()
	require.Len(t, msgs, 3)
	assert.Equal(t, "Hello! I can answer that.<no_tool>", msgs[1].Content)
	for _, m := range msgs {
		assert.NotEqual(t, intent.ContinueMessage, m.Content, "[continue] is never persisted")
	}
}

func TestPlanningRoundWithoutTagRunsToolLoop(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		scripted.Reply().Text("Sure.").Finish("stop"),
		scripted.Reply().Text("Done.").Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:none", "text", "round_end:1"}, trace(chunks))
	assert.True(t, srv.Requests()[1].HasTools())
}

func TestHistoryTagsStrippedAfterPlanning(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), scripted.Reply().Text("ok").Finish("stop"))
	a := newAgent(t, srv, nil)
	history := []memory.Message{
		{Role: memory.RoleUser, Content: "earlier"},
		{Role: memory.RoleAssistant, Content: "Earlier answer.<no_tool>"},
	}
	_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "now"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	assert.Equal(t, "Earlier answer.<no_tool>", reqs[0].Messages[1].Content, "the planning round sees the examples")
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" {
			assert.NotContains(t, m.Content, "<no_tool>")
		}
	}
}

// --- tool loop ---------------------------------------------------------------

func TestParallelCallsAndSkipApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().
			Call(0, "call_a", "get_weather", `{"city":`, `"Rome"}`).
			Call(1, "call_b", "show_card", `{}`).
			Finish("tool_calls"),
		scripted.Reply().Text("Rome is sunny.").Finish("stop"),
	)
	var asked []string
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = agent.ApproverFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			asked = append(asked, r.Call.Name)
			return agent.Decision{Approved: true}, nil
		})
	}, weatherTool(), cardTool())
	turn := a.NewTurn(agent.Input{Message: "weather in Rome and a card"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:show_card",
		"tool:approval_required:get_weather", "tool:executing:get_weather", "tool:result:get_weather",
		"tool:executing:show_card", "tool:result:show_card",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, []string{"get_weather"}, asked, "skip-approval tools are never asked for")
	validHistory(t, turn.Messages())
}

func TestInvalidArgumentsAndUnknownToolAreToolErrors(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().
			Call(0, "call_bad", "get_weather", `{"city": "Par`).
			Call(1, "call_unknown", "launch_rockets", `{}`).
			Finish("tool_calls"),
		scripted.Reply().Text("Sorry.").Finish("stop"),
	)
	var asked atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			asked.Add(1)
			return agent.Decision{Approved: true}, nil
		})
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Zero(t, asked.Load(), "invalid calls never reach the Approver")
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:launch_rockets",
		"tool:result:get_weather", "tool:result:launch_rockets",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	var bad *agent.ToolCall
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult && c.Tool.Name == "get_weather" {
			bad = c.Tool
		}
	}
	require.NotNil(t, bad)
	assert.Equal(t, `{"city": "Par`, bad.ArgumentsRaw)
	assert.Contains(t, bad.Result, "not valid JSON")

	tools := srv.Requests()[2].Messages
	n := len(tools)
	assert.Contains(t, tools[n-2].Content, "not valid JSON")
	assert.Contains(t, tools[n-1].Content, `unknown tool "launch_rockets"`)
	validHistory(t, turn.Messages())
}

func TestToolPanicIsRecovered(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Call(0, "call_1", "boom", `{}`).Finish("tool_calls"),
		scripted.Reply().Text("It broke.").Finish("stop"),
	)
	boom := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "boom", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			panic("kaboom")
		},
	}
	a := newAgent(t, srv, nil, boom)
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	var res string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			res = c.Tool.Result
		}
	}
	assert.Equal(t, "error: tool panicked: kaboom", res)
	validHistory(t, turn.Messages())
}

func TestMaxToolRounds(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool())
	for i := range 2 {
		srv.Enqueue(scripted.Reply().Call(0, fmt.Sprintf("call_%d", i), "show_card", `{}`).Finish("tool_calls"))
	}
	a := newAgent(t, srv, func(c *agent.Config) { c.MaxToolRounds = 2 }, cardTool())
	turn := a.NewTurn(agent.Input{Message: "loop"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	last := chunks[len(chunks)-1]
	assert.Equal(t, agent.KindWarning, last.Kind)
	assert.Equal(t, agent.WarnMaxToolRounds, last.Text)
	assert.Equal(t, 2, last.Round)
	assert.Len(t, srv.Requests(), 3)
	validHistory(t, turn.Messages())
}

// --- approvals -----------------------------------------------------------------

func TestRejectionEndsRunByDefault(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Call(1, "call_2", "get_weather", `{"city":"Bergen"}`).Finish("tool_calls"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: false, Reason: "not now"}, nil
		})
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:get_weather",
		"tool:approval_required:get_weather", "rejected:get_weather:not now",
		"rejected:get_weather:" + agent.ReasonNotRun, "interrupted",
	}, trace(chunks))
	assert.Len(t, srv.Requests(), 2)
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "not now", msgs[len(msgs)-2].Content)
}

func TestRejectionContinueTellsModel(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		scripted.Reply().Text("Understood.").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.OnReject = agent.RejectContinue
		c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{}, nil
		})
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:approval_required:get_weather", "rejected:get_weather:" + agent.ReasonRejected,
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	req := srv.Requests()[2]
	assert.Equal(t, agent.ReasonRejected, req.LastMessage().Content)
}

func TestEditedArguments(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		scripted.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":"Tromsø"}`)}, nil
		})
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Equal(t, "sunny in Tromsø", result)
}

func TestPreparerIsCalledBeforeTheChunk(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"), scripted.Reply().Text("ok").Finish("stop"))
	p := &preparer{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			assert.Equal(t, int32(1), p.prepared.Load(), "registered before the chunk is yielded")
			assert.Equal(t, "key-1", c.Tool.ApprovalID)
			assert.True(t, c.Tool.ApprovalRequired)
		}
	}
	assert.Equal(t, int32(1), p.approved.Load())
}

func TestBreakAfterApprovalRequiredReleasesPreparedApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	p := &preparer{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	for c, err := range turn.Run(context.Background()) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			break
		}
	}
	assert.Equal(t, int32(1), p.approved.Load(), "Approve is called exactly once after Prepare")
	assert.Equal(t, int32(1), p.cancelledApprove.Load(), "with a cancelled context")
	validHistory(t, turn.Messages())
}

// --- interruption --------------------------------------------------------------

func TestInterruptDuringApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &preparer{decide: func(ctx context.Context) (agent.Decision, error) {
		cancel() // the user presses stop while the card waits
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	}}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.Equal(t, []string{"rejected:get_weather:" + agent.ReasonApprovalInterrupted, "interrupted"}, tr[len(tr)-2:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, agent.ReasonApprovalInterrupted, msgs[len(msgs)-1].Content)
}

func TestInterruptDuringExecutionKeepsPartialOutput(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "tail", `{}`).Finish("tool_calls"))
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
	assert.Equal(t, []string{"rejected:tail:" + agent.ReasonInterrupted, "interrupted"}, tr[len(tr)-2:])
	rej := chunks[len(chunks)-2].Tool
	assert.Equal(t, "line 1\nline 2\n", rej.PartialResult)
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "line 1\nline 2\n\n["+agent.ReasonInterrupted+"]", msgs[len(msgs)-1].Content)
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
	srv.Enqueue(scripted.Reply().Text("Thinking ", "about ", "it").Finish("stop").HoldAfter(2))
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

// --- consumer breaks out ---------------------------------------------------------

// TestBreakAfterEveryChunk breaks out of the loop after chunk 1, 2, ... N of
// a tool run, sequential and parallel, with a plain Approver and a Preparer:
// no panic, no leaked goroutine, valid history that keeps everything the
// consumer saw, and every prepared approval answered.
func TestBreakAfterEveryChunk(t *testing.T) {
	script := func(srv *scripted.Server) {
		srv.Enqueue(
			planNeedTool(),
			scripted.Reply().Text("Checking.").
				Call(0, "call_1", "get_weather", `{"city":"Paris"}`).
				Call(1, "call_2", "tail", `{}`).
				Call(2, "call_3", "get_weather", `{"city":"Rome"}`).
				Finish("tool_calls"),
			scripted.Reply().Text("Done.").Finish("stop"),
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
		for _, prepare := range []bool{false, true} {
			name := fmt.Sprintf("parallel=%v/preparer=%v", parallel, prepare)
			var p *preparer
			mut := func(c *agent.Config) {
				c.ParallelTools = parallel
				if prepare {
					p = &preparer{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
					c.Approver = p
				}
			}
			// Count the chunks of a full run first.
			srv := newServer(t)
			script(srv)
			all, err := collect(newAgent(t, srv, mut, weatherTool(), tail).Run(context.Background(), agent.Input{Message: "go"}))
			require.NoError(t, err, name)
			require.Greater(t, len(all), 12, name)

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
						assert.Equal(t, p.prepared.Load(), p.approved.Load(), "every Prepare gets its Approve")
					}
				})
			}
		}
	}
}

func TestRunTwiceYieldsErrTurnUsed(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), scripted.Reply().Text("ok").Finish("stop"))
	turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
	_, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	_, err = collect(turn.Run(context.Background()))
	assert.ErrorIs(t, err, agent.ErrTurnUsed)
}

// --- provider errors ---------------------------------------------------------------

func TestProviderErrors(t *testing.T) {
	tests := []struct {
		name  string
		resp  scripted.Response
		check func(t *testing.T, err error)
	}{
		{"429", scripted.HTTPError(429, "slow down"), func(t *testing.T, err error) {
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 429, apiErr.StatusCode)
		}},
		{"500", scripted.HTTPError(500, "boom"), func(t *testing.T, err error) {
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 500, apiErr.StatusCode)
		}},
		{"cut", scripted.Reply().Text("Hel", "lo ", "there").Finish("stop").CutAfter(2), func(t *testing.T, err error) {
			assert.ErrorContains(t, err, "round 0")
		}},
		{"no done no finish", scripted.Frames(`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`), func(t *testing.T, err error) {
			assert.ErrorIs(t, err, agent.ErrTruncated)
		}},
		{"error frame", scripted.Reply().Text("Hel", "lo").Finish("stop").ErrorAfter(1, "model overloaded"), func(t *testing.T, err error) {
			assert.ErrorContains(t, err, "model overloaded")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.resp)
			turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
			chunks, err := collect(turn.Run(context.Background()))
			require.Error(t, err)
			tt.check(t, err)
			for _, c := range chunks {
				assert.NotEqual(t, agent.KindInvalid, c.Kind)
			}
			validHistory(t, turn.Messages())
		})
	}
}

func TestCutStreamInToolRoundKeepsHistoryValid(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Text("Calling").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).Finish("tool_calls").CutAfter(3))
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "go"})
	_, err := collect(turn.Run(context.Background()))
	require.Error(t, err)
	validHistory(t, turn.Messages())
}

// --- reasoning, usage, wire schema -----------------------------------------------------

func TestReasoningIsNeverText(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		scripted.Reply().Reasoning("let me think").Text("Hi.<no_tool>").Finish("stop"),
		scripted.Reply().Text("Hello!").Finish("stop"),
	)
	turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, "reasoning", chunks[0].Kind.String())
	assert.Equal(t, "let me think", chunks[0].Text)
	for _, m := range turn.Messages() {
		assert.NotContains(t, m.Content, "let me think", "reasoning is not persisted")
	}
}

func TestChunkJSONSchema(t *testing.T) {
	tests := []struct {
		chunk agent.Chunk
		want  string
	}{
		{agent.Chunk{Kind: agent.KindText, Text: "Hello! ", Raw: "<voice>Hello! ", Voice: true}, `{"kind":"text","round":0,"text":"Hello! ","raw":"<voice>Hello! ","voice":true}`},
		{agent.Chunk{Kind: agent.KindRoundEnd, Intent: agent.IntentNeedTool}, `{"kind":"round_end","round":0,"intent":"need_tool"}`},
		{agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: &agent.ToolCall{ID: "call_1", Name: "get_weather", State: agent.StateApprovalRequired, Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			`{"kind":"tool_call","round":1,"tool":{"id":"call_1","name":"get_weather","state":"approval_required","arguments":{"city":"Paris"}}}`},
		{agent.Chunk{Kind: agent.KindToolRejected, Round: 2, Tool: &agent.ToolCall{ID: "call_3", Name: "run_command", State: agent.StateRejected, Arguments: json.RawMessage(`{"command":"ls"}`), Reason: "tool call interrupted", PartialResult: "a.txt\n"}},
			`{"kind":"tool_rejected","round":2,"tool":{"id":"call_3","name":"run_command","state":"rejected","arguments":{"command":"ls"},"reason":"tool call interrupted","partial_result":"a.txt\n"}}`},
		{agent.Chunk{Kind: agent.KindInterrupted, Round: 2}, `{"kind":"interrupted","round":2}`},
		{agent.Chunk{Kind: agent.KindWarning, Round: 8, Text: "maximum tool rounds reached"}, `{"kind":"warning","round":8,"text":"maximum tool rounds reached"}`},
		{agent.Chunk{Kind: agent.KindSide, Round: 1, Tool: &agent.ToolCall{ID: "call_2", Name: "ask_user_question"}, Side: map[string]any{"type": "form_request", "form_id": "f1", "questions": []any{}}},
			`{"kind":"side","round":1,"tool":{"id":"call_2","name":"ask_user_question"},"side":{"type":"form_request","form_id":"f1","questions":[]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.chunk.Kind.String(), func(t *testing.T) {
			b, err := json.Marshal(tt.chunk)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(b))
			var back agent.Chunk
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.chunk.Kind, back.Kind)
		})
	}
	_, err := json.Marshal(agent.Chunk{})
	assert.Error(t, err, "a zero chunk does not marshal as valid")
}

func TestNewValidates(t *testing.T) {
	reg, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	_, err = agent.New(agent.Config{})
	assert.ErrorContains(t, err, "Model")
	_, err = agent.New(agent.Config{Model: "m", Tools: reg})
	assert.ErrorContains(t, err, "Approver")
	_, err = agent.NewToolRegistry(weatherTool(), weatherTool())
	assert.ErrorContains(t, err, "twice")
	_, err = agent.NewToolRegistry(agent.FuncTool{Def: agent.ToolDefinition{Name: "bad name"}})
	assert.Error(t, err)
}

func TestSideMessageComesRightAfterExecuting(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "ask_user_question", `{"q":"Color?"}`).Finish("tool_calls"), scripted.Reply().Text("ok").Finish("stop"))
	var ranAfterSide atomic.Bool
	ask := &askTool{ran: &ranAfterSide}
	chunks, err := collect(newAgent(t, srv, nil, ask).Run(context.Background(), agent.Input{Message: "ask me"}))
	require.NoError(t, err)
	tr := trace(chunks)
	i := indexOf(tr, "tool:executing:ask_user_question")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "side", tr[i+1])
	assert.True(t, ranAfterSide.Load())
}

type askTool struct {
	sideDone atomic.Bool
	ran      *atomic.Bool
}

func (a *askTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: "ask_user_question", SkipApproval: true}
}

func (a *askTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	a.sideDone.Store(true)
	return map[string]any{"type": "form_request", "form_id": "f1"}, nil
}

func (a *askTool) Execute(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
	a.ran.Store(a.sideDone.Load())
	return "blue", nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

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
		scripted.Reply().Call(0, "call_l", "left", `{}`).Call(1, "call_r", "right", `{}`).Finish("tool_calls"),
		scripted.Reply().Text("both done").Finish("stop"),
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
			scripted.Reply().Call(0, "call_1", "first", `{}`).Call(1, "call_2", "second", `{}`).Finish("tool_calls"),
			scripted.Reply().Text("ok").Finish("stop"),
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

func TestOneLogRecordPerModelCall(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), scripted.Reply().Text("ok").Usage(7, 2).Finish("stop"))
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	a := newAgent(t, srv, func(c *agent.Config) { c.Logger = logger })
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s9", Message: "hi"}))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var rec struct {
		Msg              string
		Round            int
		Outcome          string
		Session          string
		Latency          int64
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &rec))
	assert.Equal(t, "model call", rec.Msg)
	assert.Equal(t, 1, rec.Round)
	assert.Equal(t, "ok", rec.Outcome)
	assert.Equal(t, "s9", rec.Session)
	assert.Positive(t, rec.Latency)
	assert.Equal(t, int64(7), rec.PromptTokens)
	assert.Equal(t, int64(2), rec.CompletionTokens)
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
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_l", "left", `{}`).Call(1, "call_r", "right", `{}`).Finish("tool_calls"))
	a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = true }, mk("left"), mk("right"))
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.Equal(t, []string{
		"rejected:left:" + agent.ReasonInterrupted, "rejected:right:" + agent.ReasonInterrupted, "interrupted",
	}, tr[len(tr)-3:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "left working\n\n["+agent.ReasonInterrupted+"]", msgs[len(msgs)-2].Content)
	assert.Equal(t, "right working\n\n["+agent.ReasonInterrupted+"]", msgs[len(msgs)-1].Content)
}

// TestEveryCardIsClosed: however a tool round ends, each call shown with a
// start chunk ends with a result or a rejected chunk, and the history from
// the chunks is the turn's.
func TestEveryCardIsClosed(t *testing.T) {
	secondRejected := func(cancel context.CancelFunc) agent.Approver {
		return agent.ApproverFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: r.Call.ID != "call_2", Reason: "not that one"}, nil
		})
	}
	interruptedAtSecond := func(cancel context.CancelFunc) agent.Approver {
		return agent.ApproverFunc(func(ctx context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			if r.Call.ID != "call_2" {
				return agent.Decision{Approved: true}, nil
			}
			cancel()
			<-ctx.Done()
			return agent.Decision{}, ctx.Err()
		})
	}
	for _, parallel := range []bool{false, true} {
		for name, approver := range map[string]func(context.CancelFunc) agent.Approver{
			"rejected":    secondRejected,
			"interrupted": interruptedAtSecond,
		} {
			t.Run(fmt.Sprintf("%s/parallel=%v", name, parallel), func(t *testing.T) {
				leaktest.Check(t)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				srv := newServer(t)
				srv.Enqueue(planNeedTool(), scripted.Reply().
					Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
					Call(1, "call_2", "get_weather", `{"city":"Rome"}`).
					Call(2, "call_3", "get_weather", `{"city":"Lima"}`).
					Finish("tool_calls"))
				a := newAgent(t, srv, func(c *agent.Config) {
					c.ParallelTools = parallel
					c.Approver = approver(cancel)
				}, weatherTool())
				turn := a.NewTurn(agent.Input{Message: "go"})
				chunks, err := collect(turn.Run(ctx))
				require.NoError(t, err)
				assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
				closedCards(t, chunks)
				validHistory(t, turn.Messages())
				assert.Equal(t, strip(turn.Messages()[1:]), strip(agent.History(chunks)))
			})
		}
	}
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
			srv.Enqueue(planNeedTool(), scripted.Reply().
				Call(0, "call_1", first, `{"city":"Oslo"}`).
				Call(1, "call_2", "get_weather", `{"city":"Rome"}`).
				Call(2, "call_3", "show_card", `{}`).
				Finish("tool_calls"))
			p := &preparer{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
			a := newAgent(t, srv, func(c *agent.Config) {
				c.ParallelTools = parallel
				c.Approver = p
			}, weatherTool(), cardTool())
			turn := a.NewTurn(agent.Input{Message: "go"})
			var chunks []agent.Chunk
			for c, err := range turn.Run(ctx) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult && c.Tool.ID == "call_1" {
					cancel() // the user presses stop as the first result shows
				}
			}
			tr := trace(chunks)
			assert.Equal(t, []string{
				"tool:result:" + first,
				"rejected:get_weather:" + agent.ReasonNotRun,
				"rejected:show_card:" + agent.ReasonNotRun,
				"interrupted",
			}, tr[len(tr)-4:])
			if parallel {
				assert.Zero(t, p.prepared.Load(), "no approval prepared after the interrupt")
			} else {
				assert.Equal(t, int32(1), p.prepared.Load(), "no approval prepared after the interrupt")
			}
			assert.Equal(t, p.prepared.Load(), p.approved.Load())
			closedCards(t, chunks)
			validHistory(t, turn.Messages())
			assert.Equal(t, strip(turn.Messages()[1:]), strip(agent.History(chunks)))
		})
	}
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
	srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_s", "slow", `{}`).Call(1, "call_q", "quick", `{}`).Finish("tool_calls"))
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
	assert.Equal(t, []string{"rejected:slow:" + agent.ReasonInterrupted, "tool:result:quick", "interrupted"}, tr[len(tr)-3:])
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "quick result", msgs[len(msgs)-1].Content)
	assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)))
}

// TestApproverErrorIsARejection: an Approver's error rejects the call with
// the error's text as reason, or the default reason when the text is empty;
// the run does not fail.
func TestApproverErrorIsARejection(t *testing.T) {
	for _, msg := range []string{"approval service down", ""} {
		t.Run(fmt.Sprintf("%q", msg), func(t *testing.T) {
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"), scripted.Reply().Text("ok").Finish("stop"))
			a := newAgent(t, srv, func(c *agent.Config) {
				c.OnReject = agent.RejectContinue
				c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
					return agent.Decision{Approved: true}, errors.New(msg)
				})
			}, weatherTool())
			turn := a.NewTurn(agent.Input{Message: "go"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)
			want := msg
			if want == "" {
				want = agent.ReasonRejected
			}
			assert.Contains(t, trace(chunks), "rejected:get_weather:"+want)
			msgs := turn.Messages()
			validHistory(t, msgs)
			assert.Equal(t, want, msgs[len(msgs)-2].Content)
		})
	}
}

// TestPlanningRoundIgnoresToolCalls: a model that calls a tool in the
// planning round (which offers none) has the call ignored: no chunk, no
// history, nothing run.
func TestPlanningRoundIgnoresToolCalls(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		scripted.Reply().Text("On it. <need_tool>").Call(0, "call_p", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		scripted.Reply().Text("Done.").Finish("stop"),
	)
	var ran atomic.Bool
	tool := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			ran.Store(true)
			return "", nil
		},
	}
	turn := newAgent(t, srv, nil, tool).NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:need_tool", "text", "round_end:1"}, trace(chunks))
	assert.False(t, ran.Load())
	for _, m := range turn.Messages() {
		assert.Empty(t, m.ToolCalls)
	}
	for _, m := range srv.Requests()[1].Messages {
		assert.Empty(t, m.ToolCalls, "the next request carries no planning-round call")
	}
}

// TestCallWithoutNameIsDropped: argument fragments that never got a function
// name (a provider that numbered a continuation as a new call) are not a
// call: no chunk, no history, and the next request stays valid (the API
// refuses an empty function name).
func TestCallWithoutNameIsDropped(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		scripted.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Fragment(1, "", "", `{"x":1}`).Finish("tool_calls"),
		scripted.Reply().Text("done").Finish("stop"),
	)
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	for _, c := range chunks {
		if c.Tool != nil {
			assert.NotEmpty(t, c.Tool.Name, "%v", trace(chunks))
		}
	}
	msgs := turn.Messages()
	validHistory(t, msgs)
	for _, m := range append(msgs, agent.History(chunks)...) {
		for _, c := range m.ToolCalls {
			assert.NotEmpty(t, c.Name)
		}
	}
	for _, m := range srv.Requests()[2].Messages {
		for _, c := range m.ToolCalls {
			assert.NotEmpty(t, c.Name, "no nameless call in the next request")
		}
	}
}
