package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
)

// TestContextLayers: the system prompt and the layers' blocks come first,
// in order; a block that is empty or only white space is left out (a
// system message with nothing to say, which strict providers refuse); a
// layer's error ends the run before any request, naming the layer.
func TestContextLayers(t *testing.T) {
	layers := []memory.Layer{
		memory.TextLayer{"Known documents: a.txt.", " \n\t", ""},
		memory.LayerFunc(func(_ context.Context, session string) ([]string, error) {
			return []string{"\n", "Session " + session + "."}, nil
		}),
	}
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Fine.").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) {
		c.SystemPrompt = "You are helpful."
		c.Layers = layers
	})
	_, err := collect(a.Run(t.Context(), agent.Input{SessionID: "s1", Message: "hi"}))
	require.NoError(t, err)
	for _, req := range srv.Requests() {
		var system []string
		for _, m := range req.Messages {
			if m.Role == "system" {
				system = append(system, m.Content)
			}
		}
		want := []string{"You are helpful.", "Known documents: a.txt.", "Session s1."}
		if strict {
			want = []string{strings.Join(want, "\n\n")}
		} else {
			want = append(want, req.LastMessage().Content) // the temporary prompt
		}
		assert.Equal(t, want, system, "request %d", req.Seq)
	}

	t.Run("error", func(t *testing.T) {
		srv := newServer(t)
		boom := errors.New("index unavailable")
		a := newAgent(t, srv, func(c *agent.Config) {
			c.Layers = []memory.Layer{memory.TextLayer{"ok"}, memory.LayerFunc(func(context.Context, string) ([]string, error) { return nil, boom })}
		})
		_, err := collect(a.Run(t.Context(), agent.Input{Message: "hi"}))
		require.ErrorIs(t, err, boom)
		assert.Contains(t, err.Error(), "context layer 1")
		assert.Empty(t, srv.Requests())
	})
}

// TestPreview: Preview returns the messages of a turn's first request, as
// the model receives them, in either shape, and changes nothing: no
// session is created, no message saved, no request sent.
func TestPreview(t *testing.T) {
	st := new(memory.MemStore)
	_, err := st.CreateSession(t.Context(), memory.Session{ID: "s"})
	require.NoError(t, err)
	_, err = st.Append(t.Context(), "s",
		memory.Message{Role: memory.RoleUser, Content: "Weather in Oslo?"},
		memory.Message{Role: memory.RoleAssistant, Content: "Checking. <need_tool>", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
		memory.Message{Role: memory.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: strings.Repeat("sunny ", 100)},
		memory.Message{Role: memory.RoleAssistant, Content: "Sunny."},
	)
	require.NoError(t, err)

	srv := newServer(t)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.SystemPrompt = "You are helpful."
		c.Layers = []memory.Layer{memory.TextLayer{"Known documents: none.", "  "}}
	}, weatherTool())
	in := agent.Input{SessionID: "s", Message: "And in Rome?"}
	preview, err := a.Preview(t.Context(), in)
	require.NoError(t, err)
	assert.Empty(t, srv.Requests(), "no request sent")
	stored, err := st.Messages(t.Context(), "s", true)
	require.NoError(t, err)
	assert.Len(t, stored, 4, "nothing saved")

	// A new session: its history is empty, and it is not created.
	fresh, err := a.Preview(t.Context(), agent.Input{SessionID: "new", Message: "hi"})
	require.NoError(t, err)
	_, err = st.Session(t.Context(), "new")
	require.ErrorIs(t, err, memory.ErrNotFound)
	var users []string
	for _, m := range fresh {
		if m.Role != memory.RoleSystem {
			users = append(users, m.Content)
		}
	}
	require.Len(t, users, 1, "no history: %v", contents(fresh))
	assert.True(t, strings.HasPrefix(users[0], "hi"), users[0])

	// The run's first request is the preview.
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Fine.").Finish("stop"))
	_, err = collect(a.Run(t.Context(), in))
	require.NoError(t, err)
	first := srv.Requests()[0]
	require.Len(t, first.Messages, len(preview))
	for i, m := range preview {
		got := first.Messages[i]
		assert.Equal(t, string(m.Role), got.Role, "message %d", i)
		assert.Equal(t, m.Content, got.Content, "message %d", i)
		require.Len(t, got.ToolCalls, len(m.ToolCalls), "message %d", i)
		for k, c := range m.ToolCalls {
			assert.Equal(t, c.ID, got.ToolCalls[k].ID)
			assert.Equal(t, string(c.Arguments), got.ToolCalls[k].Arguments)
		}
	}
	assert.Contains(t, contents(preview), "tool:"+strings.Repeat("sunny ", 50)+"…[truncated 300 chars]", "old tool traffic is shortened")
}
