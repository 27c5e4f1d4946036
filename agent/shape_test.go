package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestRequestShapes: against a server with a strict chat template, the
// default shape is refused (system messages after the first, assistant
// after assistant) and ShapeStrict is accepted in every round, with one
// leading system message, alternating turns and the temporary prompt at
// the end of the last user message.
func TestRequestShapes(t *testing.T) {
	history := []memory.Message{
		{Role: memory.RoleAssistant, Content: "Earlier, summarised."}, // the start was summarised away
		{Role: memory.RoleUser, Content: "Hi"},
		{Role: memory.RoleAssistant, Content: "Hello!<no_tool>"},
		{Role: memory.RoleAssistant, Content: "How can I help?"},
		{Role: memory.RoleUser, Content: "Weather in Oslo?"},
		{Role: memory.RoleAssistant, Content: "Checking.", ToolCalls: []memory.ToolCall{{ID: "c0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c0", Name: "get_weather", Content: "tool call interrupted"},
		{Role: memory.RoleUser, Content: "Never mind."},
	}
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Text("Checking Lima.").Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny in Lima.").Finish("stop"),
		)
	}
	run := func(t *testing.T, shape agent.RequestShape) (*agenttest.Server, error) {
		srv := newServer(t)
		srv.Enforce(agenttest.CheckAll)
		script(srv)
		a := newAgent(t, srv, func(c *agent.Config) {
			c.RequestShape = shape
			c.SystemPrompt = "You are helpful."
			c.Layers = []memory.Layer{memory.TextLayer{"Known documents: none."}}
		}, weatherTool())
		_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "Weather in Lima?"}))
		return srv, err
	}

	t.Run("default is refused", func(t *testing.T) {
		leaktest.Check(t)
		_, err := run(t, agent.ShapeDefault)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "400")
	})
	t.Run("strict", func(t *testing.T) {
		leaktest.Check(t)
		srv, err := run(t, agent.ShapeStrict)
		require.NoError(t, err)
		reqs := srv.Requests()
		require.Len(t, reqs, 3, "every round accepted")

		type msg struct{ Role, Content string }
		layout := func(req *agenttest.Request) []msg {
			var out []msg
			for _, m := range req.Messages {
				out = append(out, msg{m.Role, m.Content})
			}
			return out
		}
		earlier := []msg{
			{"system", "You are helpful.\n\nKnown documents: none."},
			{"user", intent.ContinueMessage},
			{"assistant", "Earlier, summarised."},
			{"user", "Hi"},
			{"assistant", "Hello!<no_tool>"},
			{"user", intent.ContinueMessage},
			{"assistant", "How can I help?"},
			{"user", "Weather in Oslo?"},
			{"assistant", "Checking."},
			{"tool", "tool call interrupted"},
			{"assistant", "[no reply]"},
		}
		assert.Equal(t, append(earlier[:len(earlier):len(earlier)],
			msg{"user", "Never mind.\n\nWeather in Lima?\n\n" + intent.DefaultDictionary().PlanningPrompt()},
		), layout(reqs[0]), "planning request")

		stripped := append([]msg(nil), earlier...)
		stripped[4].Content = "Hello!" // tags are stripped after planning
		assert.Equal(t, append(stripped[:len(stripped):len(stripped)],
			msg{"user", "Never mind.\n\nWeather in Lima?"},
			msg{"assistant", "Let me look that up."},
			msg{"user", intent.ContinueMessage},
			msg{"assistant", "Checking Lima."},
			msg{"tool", "sunny in Lima"},
		), layout(reqs[2]), "last tool-loop request")
	})
}

// TestStrictShapeForEveryEnding: whatever ended the previous turn (a tag
// only, an interrupt after tool results, no reply at all), the next turn's
// requests satisfy a strict chat template.
func TestStrictShapeForEveryEnding(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	srv.Enforce(agenttest.CheckAll)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.RequestShape = agent.ShapeStrict
		c.Store = st
		c.OnReject = agent.RejectEndRun
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: false, Reason: "no"}, nil
		})
	}, weatherTool())
	ctx := context.Background()
	turns := []agenttest.Response{
		agenttest.Reply().Text("<need_tool>").Finish("stop"), // a tag only
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		// The rejection ended the turn after a tool message.
		agenttest.Reply().Text("Sure. <no_tool>").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	}
	srv.Enqueue(turns[:2]...)
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "one"}))
	require.NoError(t, err)
	srv.Enqueue(turns[2:]...)
	_, err = collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "two"}))
	require.NoError(t, err, "the turn after a rejection is accepted")
	require.Len(t, srv.Requests(), 4)
}

// The placeholder memory.Strict puts between two assistant messages is the
// transition message the agent itself puts after a planning reply, so the
// strict shape of a stored turn reads like the run that wrote it.
func TestStrictPlaceholderIsContinueMessage(t *testing.T) {
	got := memory.Strict([]memory.Message{
		{Role: memory.RoleUser, Content: "q"},
		{Role: memory.RoleAssistant, Content: "a"},
		{Role: memory.RoleAssistant, Content: "b"},
	})
	require.Len(t, got, 4)
	assert.Equal(t, memory.Message{Role: memory.RoleUser, Content: intent.ContinueMessage}, got[2])
}
