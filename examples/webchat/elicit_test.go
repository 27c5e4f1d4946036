package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// untilElicitation waits for an elicitation_request side chunk.
func (ev *events) untilElicitation(t *testing.T) interact.ElicitationRequest {
	t.Helper()
	seen := ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			require.NotEqual(t, "run_done", e.name, "the run ended before a request for input: %s", e.data)
			return false
		}
		return e.chunk(t).Kind == agent.KindSide && strings.Contains(e.data, `"elicitation_request"`)
	})
	var side struct {
		Side interact.ElicitationRequest `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &side))
	return side.Side
}

// TestMCPElicitation: an MCP server's request for input is a card of the
// page, answered through POST /api/form-answer with an action: content
// that does not fit the requested schema is refused (400, the form stays
// open), another browser is refused, and the owner's answer reaches the
// server, whose call completes with it.
func TestMCPElicitation(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	model := toolModel(t, toolCall{"ask", `{}`})
	forms, err := formsFor(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, forms.Close()) }) // after the Server's and the client's: LIFO
	mc, err := mcpclient.New(t.Context(), []mcpclient.ServerConfig{{Name: "asker", Command: bin, Args: []string{"-elicit"}, SkipApproval: true}},
		mcpclient.Options{Forms: forms})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mc.Close()) })
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: demo.Tools(), MCP: mc, Forms: forms})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)

	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "who am I?")
	req := ev.untilElicitation(t)
	assert.Equal(t, "asker", req.Server)
	assert.Equal(t, "Who are you?", req.Message)
	require.Len(t, req.Fields, 2)

	answer := func(client *http.Client, body map[string]any) (int, map[string]any) {
		body["session_id"], body["form_id"] = s1, req.FormID
		return postAs(t, client, h.ts.URL, "/api/form-answer", mustString(body))
	}
	status, out := answer(h.client, map[string]any{"action": "accept", "content": map[string]any{"age": -2}})
	assert.Equal(t, http.StatusBadRequest, status, "%v", out)
	assert.Contains(t, out["error"], "does not fit the requested schema")
	status, out = answer(h.newBrowser(t), map[string]any{"action": "decline"})
	assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "another browser: %v", out)
	status, out = answer(h.client, map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "age": 36}})
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "%v", out)

	done, chunks := ev.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Equal(t, "accept name=Ada age=36 state=state-1", result)
}
