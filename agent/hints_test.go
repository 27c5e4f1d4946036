package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// notingTool is show_card that skips approval but notes every call as one
// a person must decide on.
type notingTool struct{ agent.FuncTool }

func (notingTool) NoteApproval(ctx context.Context, call agent.ToolCall) agent.ApprovalNote {
	in, _ := agent.CallFromContext(ctx) // the call, for a tool that keeps state per session
	return agent.ApprovalNote{MustAsk: true, Details: []string{"definition of " + call.Name + " changed in " + in.SessionID + "/" + in.CallID}, Hints: &agent.ToolHints{Destructive: true}}
}

// TestApprovalSeesHintsAndNotes: the Approver and the approval_required
// chunk see a tool's hints; a tool's note makes a tool that skips approval
// ask, with its details and hints, and the chunks after the decision keep
// the hints without the details.
func TestApprovalSeesHintsAndNotes(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().
		Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
		Call(1, "call_2", "show_card", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("done").Finish("stop"))
	weather := weatherTool().(agent.FuncTool)
	weather.Def.Hints = &agent.ToolHints{ReadOnly: true, Trusted: true}
	var mu sync.Mutex
	asked := map[string]agent.ToolCall{}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = personFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
			mu.Lock()
			asked[req.Call.Name] = req.Call
			mu.Unlock()
			return agent.Decision{Approved: true}, nil
		})
	}, weather, notingTool{cardTool().(agent.FuncTool)})
	chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}))
	require.NoError(t, err)

	require.Contains(t, asked, "get_weather")
	assert.Equal(t, &agent.ToolHints{ReadOnly: true, Trusted: true}, asked["get_weather"].Hints)
	assert.True(t, asked["get_weather"].Hints.SafeToRun())
	assert.False(t, asked["get_weather"].MustAsk)
	require.Contains(t, asked, "show_card", "a must-ask note asks about a tool that skips approval")
	assert.True(t, asked["show_card"].MustAsk)
	assert.Equal(t, []string{"definition of show_card changed in s1/call_2"}, asked["show_card"].Details)
	assert.Equal(t, &agent.ToolHints{Destructive: true}, asked["show_card"].Hints)

	var sawCard bool
	for _, c := range chunks {
		if c.Tool == nil || c.Tool.Name != "show_card" {
			continue
		}
		switch c.Tool.State {
		case agent.StateApprovalRequired:
			sawCard = true
			assert.True(t, c.Tool.MustAsk)
			assert.Equal(t, []string{"definition of show_card changed in s1/call_2"}, c.Tool.Details)
			b, err := json.Marshal(c.Tool)
			require.NoError(t, err)
			assert.Contains(t, string(b), `"hints":{"destructive":true}`)
			assert.Contains(t, string(b), `"must_ask":true`)
		case agent.StateExecuting, agent.StateResult:
			assert.False(t, c.Tool.MustAsk)
			assert.Nil(t, c.Tool.Details)
			assert.NotNil(t, c.Tool.Hints)
		}
	}
	assert.True(t, sawCard)
	assert.Equal(t, "shown", results(chunks)["call_2"])
}

// TestWithHints: NewTool's WithHints marks the host's hints trusted, and a
// read-only tool is never destructive.
func TestWithHints(t *testing.T) {
	tl := agent.NewTool("look", "Looks.", func(context.Context, struct{}, agent.Progress) (string, error) { return "", nil },
		agent.WithHints(agent.ToolHints{ReadOnly: true, Destructive: true}))
	assert.Equal(t, &agent.ToolHints{ReadOnly: true, Trusted: true}, tl.Definition().Hints)
	assert.True(t, tl.Definition().Hints.SafeToRun())
	var none *agent.ToolHints
	assert.False(t, none.SafeToRun())
	assert.False(t, (&agent.ToolHints{ReadOnly: true, OpenWorld: true, Trusted: true}).SafeToRun())
	assert.False(t, (&agent.ToolHints{ReadOnly: true}).SafeToRun())
}
