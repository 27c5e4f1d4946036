package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/scripted"
	"github.com/planround/planround/memory"
)

// --- planning round ----------------------------------------------------------

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

// --- consumer breaks out ---------------------------------------------------------

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
