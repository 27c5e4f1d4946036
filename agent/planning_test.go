package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
)

func TestPlanningRoundNeedToolRunsToolLoop(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Pa`, `ris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("It is sunny in Paris.").Usage(30, 6).Finish("stop"),
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
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("The answer ", "is 42.").Finish("stop"))
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
		agenttest.Reply().Text("Sure.").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:none", "text", "round_end:1"}, trace(chunks))
	assert.True(t, srv.Requests()[1].HasTools())
}

// TestPlanningRoundIgnoresToolCalls: a model that calls a tool in the
// planning round (which offers none) has the call ignored: no chunk, no
// history, nothing run.
func TestPlanningRoundIgnoresToolCalls(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Text("On it. <need_tool>").Call(0, "call_p", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
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
