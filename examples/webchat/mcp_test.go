package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// stdioTools are the tools of the stdio MCP test server.
var stdioTools = []string{"echo", "image", "audio", "fail", "progress", "slow", "hang", "crash", "flood", "freeze", "spawn", "counter", "pid", "env", "cwd", "resources", "cancelled", "add_tool"}

// only returns the DisabledTools that leave the stdio test server with the
// tools named.
func only(names ...string) []string {
	var out []string
	for _, n := range stdioTools {
		if !slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out
}

// toolCall is a call the scripted model makes.
type toolCall struct{ name, args string }

// toolModel is a scripted model that, in every turn, plans a tool round,
// makes the calls (all in one reply), and then answers "Done.".
func toolModel(t *testing.T, calls ...toolCall) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	var ids atomic.Int64
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("I will use the tools. <need_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("Done.").Finish("stop")
		}
		b := agenttest.Reply().Text("Calling them.")
		for i, c := range calls {
			b = b.Call(i, fmt.Sprintf("call_%d", ids.Add(1)), c.name, c.args)
		}
		return b.Finish("tool_calls")
	})
	return srv
}

// newMCPHarness starts a Server with the demo tools and the MCP servers, on
// the scripted model. Call leaktest.Check before it.
func newMCPHarness(t *testing.T, model *agenttest.Server, servers ...mcpclient.ServerConfig) *harness {
	t.Helper()
	mc, err := mcpclient.New(t.Context(), servers, mcpclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mc.Close()) }) // after the Server's: LIFO
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: demo.Tools(), MCP: mc})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)} // 127.0.0.1
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h
}

// mcpServers reads GET /api/mcp/servers as client.
func mcpServers(t *testing.T, client *http.Client, base string) (int, string) {
	t.Helper()
	resp, err := client.Get(base + "/api/mcp/servers")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// GET /api/mcp/servers: only for a browser that opened the page; every
// server with its transport, isolation, state and tools by the names the
// model knows them by; and no secret of the configuration, nor anything of
// the conversations (process ids, instance counts), even when a server's
// last words hold a secret.
func TestMCPServersEndpoint(t *testing.T) {
	leaktest.Check(t)
	secrets := map[string]string{
		"WEBCHAT_TEST_NAME":  "name-secret-5a4b3c2d",  // in a stdio server's arguments
		"WEBCHAT_TEST_TOKEN": "token-secret-9e8d7c6b", // in an HTTP server's headers
		"WEBCHAT_TEST_EXIT":  "exit-secret-1f2e3d4c",  // in what a server writes when it exits
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	const literal = "literal-secret-0a9b8c7d" // a secret by its variable's name
	clock := server.NewMCPServer("clock", "1.0.0")
	clock.AddTool(mcp.NewTool("get_time", mcp.WithDescription("The time, on another clock.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("teatime"), nil
		})
	ts := servertest.NewTestStreamableHTTPServer(clock) // 127.0.0.1
	t.Cleanup(ts.Close)
	bin := stdioServer(t)

	h := newMCPHarness(t, toolModel(t),
		mcpclient.ServerConfig{Name: "tools", Command: bin, Args: []string{"-name=${WEBCHAT_TEST_NAME}"},
			Env: map[string]string{"API_TOKEN": literal}, DisabledTools: only("echo", "progress")},
		mcpclient.ServerConfig{Name: "sandbox", Command: bin, Isolation: mcpclient.IsolationPerConversation, DisabledTools: only("counter")},
		mcpclient.ServerConfig{Name: "clock", URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${WEBCHAT_TEST_TOKEN}"}},
		// A wrapper that says a secret when the server has exited.
		mcpclient.ServerConfig{Name: "fragile", Command: "sh", Args: []string{"-c", bin + ` -name fragile; echo "left with ${WEBCHAT_TEST_EXIT}" >&2`},
			DisabledTools: only("crash")},
	)

	status, body := mcpServers(t, h.newClient(t), h.ts.URL)
	assert.Equal(t, http.StatusUnauthorized, status, "no owner cookie: %s", body)
	assert.Contains(t, body, "open the page first")

	status, body = mcpServers(t, h.client, h.ts.URL)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `[
		{"name":"tools","transport":"stdio","isolation":"shared","state":"connected","tools":["echo","progress"]},
		{"name":"sandbox","transport":"stdio","isolation":"per_conversation","state":"on_demand","tools":["counter"]},
		{"name":"clock","transport":"http","isolation":"shared","state":"connected","tools":["clock__get_time"]},
		{"name":"fragile","transport":"stdio","isolation":"shared","state":"connected","tools":["crash"]}
	]`, body, "the demo tool get_time keeps its name")

	// The server crashes; it is down, and says why.
	crash, _, ok := h.srv.tools.Lookup("crash")
	require.True(t, ok)
	_, err := crash.Execute(t.Context(), json.RawMessage(`{}`), nil)
	require.Error(t, err)
	require.Eventually(t, func() bool {
		_, body = mcpServers(t, h.client, h.ts.URL)
		return strings.Contains(body, `"state":"down"`)
	}, waitLimit, 10*time.Millisecond, "the crashed server is not down: %s", body)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list, 4)
	assert.Equal(t, "down", list[3]["state"])
	assert.Contains(t, list[3]["error"], "left with [redacted]", "the server's last words, without the secret")
	for _, s := range list {
		for k := range s {
			assert.Contains(t, []string{"name", "transport", "isolation", "state", "tools", "error"}, k, "a field of %s", s["name"])
		}
	}
	for _, secret := range append(slices.Collect(maps.Values(secrets)), literal) {
		assert.NotContains(t, body, secret)
	}
}

// An MCP tool in a run: approved on its card, its progress reaches the event
// stream as executing chunks with partial_result before its result; a
// per_conversation server runs one instance per session, kept between the
// session's runs.
func TestMCPToolsInARun(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	model := toolModel(t, toolCall{"progress", `{"steps":3,"delay_ms":30}`}, toolCall{"counter", `{}`})
	h := newMCPHarness(t, model,
		mcpclient.ServerConfig{Name: "tools", Command: bin, DisabledTools: only("progress")},
		mcpclient.ServerConfig{Name: "sandbox", Command: bin, Isolation: mcpclient.IsolationPerConversation,
			DisabledTools: only("counter"), SkipApproval: true},
	)

	turn := func(session string, ev *events) (progress, result, count string) {
		t.Helper()
		h.chat(t, session, "use the tools")
		call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
		require.Equal(t, "progress", call.Name, "only progress asks: sandbox skips approval")
		h.decide(t, session, call, true)
		done, chunks := ev.runDone(t)
		require.Equal(t, "finished", done.Status, "%+v", done)
		for _, c := range chunks {
			switch {
			case c.Kind != agent.KindToolCall:
			case c.Tool.Name == "progress" && c.Tool.State == agent.StateExecuting:
				require.Empty(t, result, "progress after the result")
				progress += c.Tool.PartialResult
			case c.Tool.Name == "progress" && c.Tool.State == agent.StateResult:
				result = c.Tool.Result
			case c.Tool.Name == "counter" && c.Tool.State == agent.StateResult:
				count = c.Tool.Result
			}
		}
		return progress, result, count
	}

	s1 := h.newSession(t)
	ev1, _ := h.openEvents(t, s1)
	progress, result, count := turn(s1, ev1)
	assert.Equal(t, "step 1 of 3\nstep 2 of 3\nstep 3 of 3\n", progress, "the progress as the card's live output")
	assert.Equal(t, "progress: done 3 steps", result)
	assert.Equal(t, "1", count)
	_, _, count = turn(s1, ev1)
	assert.Equal(t, "2", count, "the session's instance is kept between its runs")

	s2 := h.newSession(t)
	ev2, _ := h.openEvents(t, s2)
	_, _, count = turn(s2, ev2)
	assert.Equal(t, "1", count, "another session, another instance")
}

// mcpFile writes a configuration file of MCP servers, by name, and returns
// its path.
func mcpFile(t *testing.T, servers map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// The program with -mcp: a run's MCP call is still going (its server has
// started a child) when the program is told to stop; the run ends, and so do
// the server and its child.
func TestMainEndsMCPServers(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"pid", `{}`}, toolCall{"spawn", `{"block":true}`})
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_MODEL", "m")
	file := mcpFile(t, map[string]any{"mcptest": map[string]any{"command": stdioServer(t), "skipApproval": true}})

	p := startProgram(t, "-mcp", file)
	base := strings.TrimSuffix(p.URL, "/")

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar}
	resp, err := client.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	_, out := postAs(t, client, base, "/api/sessions", `{}`)
	session := out["session_id"].(string)
	resp, err = client.Get(base + "/api/events?session_id=" + session)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ev := &events{body: resp.Body, ch: make(chan sseEvent, 10000), done: make(chan struct{})}
	go ev.read(resp.Body)
	defer ev.close()
	status200, out := postAs(t, client, base, "/api/chat", mustString(map[string]string{"session_id": session, "message": "spawn a child"}))
	require.Equal(t, http.StatusAccepted, status200, "%v", out)

	var server, child int
	ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			require.NotEqual(t, "run_done", e.name, "the run ended: %s", e.data)
			return false
		}
		c := e.chunk(t)
		switch {
		case c.Kind != agent.KindToolCall:
		case c.Tool.Name == "pid" && c.Tool.State == agent.StateResult:
			server, err = strconv.Atoi(c.Tool.Result)
			require.NoError(t, err)
		case c.Tool.Name == "spawn" && c.Tool.State == agent.StateExecuting && c.Tool.PartialResult != "":
			child, err = strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(c.Tool.PartialResult), "child pid "))
			require.NoError(t, err)
		}
		return child != 0
	})
	require.NotZero(t, server)
	t.Cleanup(func() {
		// After a failure: nothing of the test lives on.
		_ = syscall.Kill(child, syscall.SIGKILL)
		_ = syscall.Kill(server, syscall.SIGKILL)
	})
	require.True(t, alive(server) && alive(child), "the server and its child run")

	p.cancel() // SIGINT or SIGTERM
	done := ev.until(t, func(e sseEvent) bool { return e.name == "run_done" })
	assert.Contains(t, done[len(done)-1].data, `"status":"interrupted"`)
	assert.Equal(t, 0, p.wait(t))
	gone(t, server, "the MCP server")
	gone(t, child, "the MCP server's child")
	assert.Contains(t, p.stderr.String(), `msg="server connected" mcp_server=mcptest`, "the MCP client logs on stderr")
}

// TestMCPServerNamesWithoutFormatCharacters: GET /api/mcp/servers shows a
// server's name without the format characters of the configuration's
// (a right-to-left override, a zero-width space), which could make it
// pass for another server.
func TestMCPServerNamesWithoutFormatCharacters(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	h := newMCPHarness(t, toolModel(t),
		mcpclient.ServerConfig{Name: "trusted\u202Edab\u200B", Command: bin, DisabledTools: only("echo")},
	)
	status, body := mcpServers(t, h.client, h.ts.URL)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `[{"name":"trusteddab","transport":"stdio","isolation":"shared","state":"connected","tools":["echo"]}]`, body)
}
