package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
)

// askServer is an MCP server over streamable HTTP on 127.0.0.1 whose one
// tool, ask, asks the user for a name in the multi round-trip style
// (an input_required result, protocol 2026-07-28), and counts what it
// gets: the calls that came without an answer (each asked again) and the
// answers.
type askServer struct {
	url string

	mu      sync.Mutex
	asked   int      // calls without an answer, guarded by mu
	answers []string // the answers' contents, guarded by mu
}

// newAskServer starts an askServer, closed when t ends.
func newAskServer(t *testing.T) *askServer {
	t.Helper()
	s := &askServer{}
	srv := server.NewMCPServer("asker", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation(), server.WithRecovery())
	form := map[string]any{
		"type":       "object",
		"properties": map[string]any{"name": map[string]any{"type": "string", "title": "Name", "minLength": 1}},
		"required":   []string{"name"},
	}
	srv.AddTool(mcp.NewTool("ask", mcp.WithDescription("Asks the user for a name.")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res := server.ElicitationResponse(req.Params.InputResponses, "who")
			s.mu.Lock()
			defer s.mu.Unlock()
			if res == nil {
				s.asked++
				return server.NewInputRequestBuilder("state-1").Elicit("who", mcp.ElicitationParams{
					Message: "Who are you?", RequestedSchema: form,
				}).ToolResult(), nil
			}
			raw, err := json.Marshal(res.Content)
			if err != nil {
				return nil, err
			}
			s.answers = append(s.answers, string(res.Action)+" "+string(raw))
			return mcp.NewToolResultText(fmt.Sprintf("%s %s state=%s", res.Action, raw, req.Params.RequestState)), nil
		})
	ts := servertest.NewTestStreamableHTTPServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	s.url = ts.URL + "/mcp"
	return s
}

// counts returns how many calls came without an answer, and the answers.
func (s *askServer) counts() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked, append([]string(nil), s.answers...)
}

// untilElicitationAfter waits for an elicitation_request side chunk,
// returning it with the named events seen before it ("run_done",
// "run_started", ..., with their data): a replica that takes a turn over
// ends the turn its dead driver left, then resumes it.
func (ev *events) untilElicitationAfter(t *testing.T) (interact.ElicitationRequest, []sseEvent) {
	t.Helper()
	var named []sseEvent
	seen := ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			named = append(named, e)
			return false
		}
		return e.chunk(t).Kind == agent.KindSide && strings.Contains(e.data, `"elicitation_request"`)
	})
	var side struct {
		Side interact.ElicitationRequest `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &side))
	return side.Side, named
}

// TestMCPElicitationReplicaKilled: an MCP server's request for input,
// asked by a call on replica A, is answered on replica B after A was
// killed (SIGKILL). B's sweeper takes the turn over once A's lease has
// expired: it ends the turn A left, suspended, and resumes it, running the
// call again (the call saved that it waits for input). The server asks
// again and the call takes up the form asked before, the one the person
// sees, listed by B. The answer given on B reaches the server once, and
// the turn ends on B with the tool's result holding it. The person was
// asked once: one form throughout.
func TestMCPElicitationReplicaKilled(t *testing.T) {
	leaktest.Check(t)
	url := postgresURL(t)
	schema := freshSchema(t, url)
	mcpSrv := newAskServer(t)
	model := toolModel(t, toolCall{"ask", `{}`})
	file := mcpFile(t, map[string]any{"asker": map[string]any{"type": "http", "url": mcpSrv.url, "skipApproval": true}})
	env := []string{"OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=", "OPENAI_MODEL=m"}
	args := []string{"-postgres", url, "-postgres-schema", schema, "-lease-ttl", "1s", "-sweep-interval", "100ms", "-mcp", file}
	a := startChildEnv(t, env, args...)
	b := startChildEnv(t, env, args...)

	client := browserOf(t, a.url)
	s1 := postSession(t, client, a.url)
	onB, _ := openEventsAt(t, client, b.url, s1, "after=0")
	status, out := postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": "who am I?"}))
	require.Equal(t, http.StatusAccepted, status, "%v", out)

	// The call on A waits for the answer; B's page shows the form.
	asked, named := onB.untilElicitationAfter(t)
	require.Len(t, named, 1, "the run started and did not end before its request for input: %v", named)
	require.Equal(t, "run_started", named[0].name)
	assert.Equal(t, "asker", asked.Server)
	assert.Equal(t, "Who are you?", asked.Message)
	require.NotEmpty(t, asked.FormID)
	n, answers := mcpSrv.counts()
	require.Equal(t, 1, n, "the server asked once so far")
	require.Empty(t, answers)

	require.Error(t, a.stop(t, syscall.SIGKILL))

	// B takes the turn over once A's lease has expired: it ends the turn A
	// left (suspended: a call of it is open) and resumes it, running the
	// call again; the server asks again, and the call shows the same form.
	again, named := onB.untilElicitationAfter(t)
	require.Len(t, named, 2, "%v", named)
	require.Equal(t, "run_done", named[0].name)
	var end runDone
	require.NoError(t, json.Unmarshal([]byte(named[0].data), &end))
	end.Turn = 0
	assert.Equal(t, runDone{Status: "suspended", Reason: reasonStopped}, end)
	require.Equal(t, "run_started", named[1].name)
	var started runStarted
	require.NoError(t, json.Unmarshal([]byte(named[1].data), &started))
	assert.True(t, started.Resumed, "B resumed the turn: %s", named[1].data)
	assert.Equal(t, asked.FormID, again.FormID, "the form asked on A, taken up on B")
	n, answers = mcpSrv.counts()
	assert.Equal(t, 2, n, "the call sent again by B, without an answer, is asked again by the server")
	require.Empty(t, answers)

	// A page opened on B now lists the form.
	fresh, hello := openEventsAt(t, client, b.url, s1, "")
	assert.Equal(t, true, hello["busy"], "B runs the turn")
	listed, _ := fresh.untilElicitationAfter(t)
	assert.Equal(t, asked.FormID, listed.FormID, "B lists the form")

	status, out = postAs(t, client, b.url, "/api/form-answer", mustString(map[string]any{
		"session_id": s1, "form_id": asked.FormID, "action": "accept", "content": map[string]any{"name": "Ada"},
	}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "answered on B: %v", out)

	forms := map[string]bool{asked.FormID: true, again.FormID: true, listed.FormID: true}
	var result string
	seen := onB.until(t, func(e sseEvent) bool { return e.name == "run_done" })
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &end))
	assert.Equal(t, "finished", end.Status, "%+v\n%s", end, b.stderr)
	for _, e := range seen[:len(seen)-1] {
		if e.name != "" {
			continue
		}
		c := e.chunk(t)
		switch {
		case c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateResult:
			result = c.Tool.Result
		case c.Kind == agent.KindSide && strings.Contains(e.data, `"elicitation_request"`):
			var side struct {
				Side interact.ElicitationRequest `json:"side"`
			}
			require.NoError(t, json.Unmarshal([]byte(e.data), &side))
			forms[side.Side.FormID] = true
		}
	}
	assert.Equal(t, `accept {"name":"Ada"} state=state-1`, result, "the tool's result holds the answer")
	n, answers = mcpSrv.counts()
	assert.Equal(t, []string{`accept {"name":"Ada"}`}, answers, "the server got the answer once")
	assert.Equal(t, 2, n, "no call asked again after the answer")
	assert.Len(t, forms, 1, "the person was asked once: %v", forms)
	fresh.close()
	require.NoError(t, b.stop(t, syscall.SIGTERM), "%s", b.stderr)
}
