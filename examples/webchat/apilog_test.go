package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// turnAs runs a turn of session as client on the server at base: it sends
// message, approves every card the run shows, and returns its run_done.
func turnAs(t *testing.T, client *http.Client, base, session, message string) runDone {
	t.Helper()
	ev, _ := openEventsAt(t, client, base, session, "")
	defer ev.close()
	status, out := postAs(t, client, base, "/api/chat", mustString(map[string]string{"session_id": session, "message": message}))
	require.Equal(t, http.StatusAccepted, status, "chat: %v", out)
	for {
		e := ev.next(t)
		if e.name == "run_done" {
			var d runDone
			require.NoError(t, json.Unmarshal([]byte(e.data), &d))
			return d
		}
		if e.name != "" {
			continue
		}
		if c := e.chunk(t); c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			status, out := postAs(t, client, base, "/api/tool-approve", approveBody(session, c.Tool, true, nil))
			require.Equal(t, http.StatusOK, status, "tool-approve: %v", out)
		}
	}
}

// getJSON sends a GET with client and returns the status and the raw
// answer.
func getJSON(t *testing.T, client *http.Client, u string) (int, []byte) {
	t.Helper()
	resp, err := client.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "GET %s", u)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// apiLogOf reads GET /api/apilog with query as client; it fails t unless
// the answer is 200.
func apiLogOf(t *testing.T, client *http.Client, base, query string) apiLogResponse {
	t.Helper()
	status, body := getJSON(t, client, base+"/api/apilog"+query)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var out apiLogResponse
	require.NoError(t, json.Unmarshal(body, &out))
	return out
}

// callIDs returns the ids of calls, in order.
func callIDs(calls []memory.APICall) []int64 {
	var out []int64
	for _, c := range calls {
		out = append(out, c.ID)
	}
	return out
}

// storedCalls returns the records the Server's API log holds for the
// sessions, newest first (every record with none).
func storedCalls(t *testing.T, s *Server, sessions ...string) []memory.APICall {
	t.Helper()
	require.NotNil(t, s.apiLog)
	calls, err := s.apiLog.APICalls(t.Context(), memory.APICallQuery{SessionIDs: sessions})
	require.NoError(t, err)
	return calls
}

// TestAPILogEndpoints: a browser lists the model calls of its own sessions
// only, newest first, without their content, filters them by one of its
// sessions, reads one in full, and deletes its own; another browser sees,
// reads and deletes none of them, and a client without the owner cookie
// gets 401.
func TestAPILogEndpoints(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	a1, a2 := h.newSession(t), h.newSession(t)
	other := h.newBrowser(t)
	b1 := postSession(t, other, h.ts.URL)
	ev, hello := h.openEvents(t, a1)
	ev.close()
	assert.Equal(t, "full", hello["api_log"], "the page learns that the log is kept")

	require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, a1, "What's the weather in Paris?").Status)
	require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, a2, "Say hello!").Status)
	require.Equal(t, "finished", turnAs(t, other, h.ts.URL, b1, "What time is it in Tokyo?").Status)

	// The browser's list: the records of its two sessions, as the store
	// holds them, newest first, without request or reply.
	mine := storedCalls(t, h.srv, a1, a2)
	require.NotEmpty(t, mine)
	status, raw := getJSON(t, h.client, h.ts.URL+"/api/apilog")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	assert.NotContains(t, string(raw), `"request"`, "the list holds no request")
	assert.NotContains(t, string(raw), `"reply"`, "the list holds no reply")
	assert.NotContains(t, string(raw), "Here is what I found", "nor anything of the replies")
	list := apiLogOf(t, h.client, h.ts.URL, "")
	assert.Equal(t, APILogFull, list.Mode)
	assert.Equal(t, callIDs(mine), callIDs(list.Calls))
	assert.True(t, slices.IsSortedFunc(list.Calls, func(x, y memory.APICall) int { return int(y.ID - x.ID) }), "newest first")
	assert.False(t, list.More)
	var sessions []string
	for _, s := range list.Sessions {
		sessions = append(sessions, s.ID)
	}
	assert.ElementsMatch(t, []string{a1, a2}, sessions)
	purposes := map[string][]memory.APICallPurpose{}
	for _, c := range list.Calls {
		assert.Equal(t, memory.APICallOK, c.Status)
		assert.Equal(t, "planround-demo", c.Model)
		assert.Positive(t, c.Latency)
		assert.False(t, c.Started.IsZero())
		purposes[c.SessionID] = append(purposes[c.SessionID], c.Purpose)
	}
	assert.Equal(t, []memory.APICallPurpose{memory.PurposeToolRound, memory.PurposeToolRound, memory.PurposePlanning}, purposes[a1],
		"the weather turn, newest first: the answer after the result, the call, the plan")

	// The filter, and the limit.
	only := apiLogOf(t, h.client, h.ts.URL, "?session_id="+a1)
	assert.Equal(t, callIDs(storedCalls(t, h.srv, a1)), callIDs(only.Calls))
	one := apiLogOf(t, h.client, h.ts.URL, "?limit=1")
	assert.Equal(t, callIDs(mine[:1]), callIDs(one.Calls))
	assert.True(t, one.More)
	for q, want := range map[string]int{
		"?session_id=" + b1:     http.StatusForbidden,
		"?session_id=":          http.StatusBadRequest,
		"?session_id=..%2Fx":    http.StatusBadRequest,
		"?limit=0":              http.StatusBadRequest,
		"?limit=1001":           http.StatusBadRequest,
		"?limit=ten":            http.StatusBadRequest,
		"?session_id=" + a2[:5]: http.StatusForbidden,
	} {
		status, body := getJSON(t, h.client, h.ts.URL+"/api/apilog"+q)
		assert.Equal(t, want, status, "%s: %s", q, body)
	}

	// The other browser's list: its own session only.
	theirs := apiLogOf(t, other, h.ts.URL, "")
	assert.Equal(t, callIDs(storedCalls(t, h.srv, b1)), callIDs(theirs.Calls))
	require.Len(t, theirs.Sessions, 1)
	assert.Equal(t, b1, theirs.Sessions[0].ID)

	// One record in full: the request as sent, the reply.
	first := mine[len(mine)-1] // a1's planning round
	status, raw = getJSON(t, h.client, h.ts.URL+"/api/apilog/call?id="+strconv.FormatInt(first.ID, 10))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var full memory.APICall
	require.NoError(t, json.Unmarshal(raw, &full))
	assert.Equal(t, memory.PurposePlanning, full.Purpose)
	assert.Equal(t, a1, full.SessionID)
	var req struct {
		Model    string           `json:"model"`
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(full.Request, &req), "%s", full.Request)
	assert.Equal(t, "planround-demo", req.Model)
	assert.Contains(t, string(full.Request), "What's the weather in Paris?")
	require.NotNil(t, full.Reply)
	assert.NotEmpty(t, full.Reply.Text)

	// Another browser's record is not found, as a record that never was.
	status, theirBody := getJSON(t, other, h.ts.URL+"/api/apilog/call?id="+strconv.FormatInt(first.ID, 10))
	assert.Equal(t, http.StatusNotFound, status)
	status, noneBody := getJSON(t, other, h.ts.URL+"/api/apilog/call?id=999999")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, string(noneBody), string(theirBody), "the answers tell nothing apart")
	assert.NotContains(t, string(theirBody), "Paris")
	for _, q := range []string{"", "?id=", "?id=abc", "?id=0", "?id=-3"} {
		status, body := getJSON(t, h.client, h.ts.URL+"/api/apilog/call"+q)
		assert.Equal(t, http.StatusBadRequest, status, "%s: %s", q, body)
	}

	// Without the owner cookie: 401 everywhere.
	anon := h.newClient(t)
	for _, u := range []string{"/api/apilog", "/api/apilog?session_id=" + a1, "/api/apilog/call?id=" + strconv.FormatInt(first.ID, 10)} {
		status, body := getJSON(t, anon, h.ts.URL+u)
		assert.Equal(t, http.StatusUnauthorized, status, "%s: %s", u, body)
	}
	for _, body := range []string{`{}`, `{"session_id":"` + a1 + `"}`} {
		status, out := postAs(t, anon, h.ts.URL, "/api/apilog/delete", body)
		assert.Equal(t, http.StatusUnauthorized, status, "%v", out)
	}

	// The other browser deletes: its own records only.
	status, out := postAs(t, other, h.ts.URL, "/api/apilog/delete", `{"session_id":"`+a1+`"}`)
	assert.Equal(t, http.StatusForbidden, status, "%v", out)
	status, out = postAs(t, other, h.ts.URL, "/api/apilog/delete", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Empty(t, storedCalls(t, h.srv, b1))
	assert.Equal(t, callIDs(mine), callIDs(storedCalls(t, h.srv, a1, a2)), "another browser's delete leaves these")

	// Deletes must come from the page, with a JSON body (CSRF).
	req2, err := http.NewRequest(http.MethodPost, h.ts.URL+"/api/apilog/delete", strings.NewReader(`{}`))
	require.NoError(t, err)
	req2.Header.Set("Content-Type", "application/json")
	req2.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := h.client.Do(req2)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site delete")
	resp, err = h.client.Post(h.ts.URL+"/api/apilog/delete", "text/plain", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "a form's body")
	resp, err = h.client.Get(h.ts.URL + "/api/apilog/delete")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, callIDs(mine), callIDs(storedCalls(t, h.srv, a1, a2)))

	// One session's records, then the session itself (its records go with
	// it), then all.
	status, out = postAs(t, h.client, h.ts.URL, "/api/apilog/delete", `{"session_id":"`+a2+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Empty(t, storedCalls(t, h.srv, a2))
	assert.NotEmpty(t, storedCalls(t, h.srv, a1))
	require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, a2, "Say hello again!").Status)
	assert.NotEmpty(t, storedCalls(t, h.srv, a2))
	status, out = postAs(t, h.client, h.ts.URL, "/api/sessions/delete", `{"session_id":"`+a2+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Empty(t, storedCalls(t, h.srv, a2), "deleting a session deletes its records")
	status, out = postAs(t, h.client, h.ts.URL, "/api/apilog/delete", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Empty(t, apiLogOf(t, h.client, h.ts.URL, "").Calls)
	assert.Empty(t, storedCalls(t, h.srv))

	// A browser without sessions lists nothing and deletes nothing: never
	// the whole log.
	require.Equal(t, "finished", turnAs(t, other, h.ts.URL, b1, "Say hello!").Status)
	fresh := h.newBrowser(t)
	assert.Empty(t, apiLogOf(t, fresh, h.ts.URL, "").Calls)
	status, out = postAs(t, fresh, h.ts.URL, "/api/apilog/delete", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.NotEmpty(t, storedCalls(t, h.srv, b1))
}

// TestAPILogModes: with APILogMetadata the records hold no request or
// reply, and the endpoints say so; with APILogOff nothing is recorded, the
// page hides its Log button, and the endpoints answer 404.
func TestAPILogModes(t *testing.T) {
	leaktest.Check(t)
	t.Run("metadata", func(t *testing.T) {
		h := newHarness(t, Options{APILog: APILogMetadata})
		s1 := h.newSession(t)
		require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, s1, "What's the weather in Oslo?").Status)
		stored := storedCalls(t, h.srv, s1)
		require.Len(t, stored, 3)
		for _, c := range stored {
			assert.Nil(t, c.Request)
			assert.Nil(t, c.Reply)
			assert.Positive(t, c.Latency)
		}
		list := apiLogOf(t, h.client, h.ts.URL, "")
		assert.Equal(t, APILogMetadata, list.Mode)
		assert.Equal(t, callIDs(stored), callIDs(list.Calls))
		status, raw := getJSON(t, h.client, h.ts.URL+"/api/apilog/call?id="+strconv.FormatInt(stored[0].ID, 10))
		require.Equal(t, http.StatusOK, status, "%s", raw)
		assert.NotContains(t, string(raw), "Oslo")
		assert.NotContains(t, string(raw), `"request"`)
	})
	t.Run("off", func(t *testing.T) {
		h := newHarness(t, Options{APILog: APILogOff})
		s1 := h.newSession(t)
		ev, hello := h.openEvents(t, s1)
		ev.close()
		assert.NotContains(t, hello, "api_log")
		require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, s1, "Say hello!").Status)
		assert.Nil(t, h.srv.apiLog)
		calls, err := h.srv.store.(memory.APILog).APICalls(t.Context(), memory.APICallQuery{})
		require.NoError(t, err)
		assert.Empty(t, calls)
		status, body := getJSON(t, h.client, h.ts.URL+"/api/apilog")
		assert.Equal(t, http.StatusNotFound, status, "%s", body)
		status, body = getJSON(t, h.client, h.ts.URL+"/api/apilog/call?id=1")
		assert.Equal(t, http.StatusNotFound, status, "%s", body)
		status, out := postAs(t, h.client, h.ts.URL, "/api/apilog/delete", `{}`)
		assert.Equal(t, http.StatusNotFound, status, "%v", out)
	})
	t.Run("invalid", func(t *testing.T) {
		_, err := NewServer(Options{APILog: "everything"})
		assert.ErrorContains(t, err, "want full, metadata or off")
	})
}

// TestAPILogFlags: -api-log and -summarize-at are checked.
func TestAPILogFlags(t *testing.T) {
	var stdout, stderr strings.Builder
	assert.Equal(t, 2, run(t.Context(), []string{"-api-log", "all"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), `-api-log "all": want full, metadata or off`)
	assert.Equal(t, 2, run(t.Context(), []string{"-summarize-at", "-1"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-summarize-at must not be negative")
	stderr.Reset()
	assert.Equal(t, 0, run(t.Context(), []string{"-h"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-api-log")
	assert.Contains(t, stderr.String(), "-summarize-at")
}

// TestAPILogKeepsNoSecret runs the program on a model that wants an API
// key, with MCP servers whose configuration takes secrets from the
// environment (${VAR} in a stdio server's env, in an HTTP server's
// Authorization header): after turns with the MCP tools, a summary and a
// refused request, neither the key nor the secrets appear in any record,
// as the endpoints give them or as the SQLite file holds them.
func TestAPILogKeepsNoSecret(t *testing.T) {
	leaktest.Check(t)
	key := "sk-test-" + randomID() + randomID()
	envSecret := "env-secret-" + randomID()
	headerSecret := "header-secret-" + randomID()
	secrets := []string{key, envSecret, headerSecret}

	model := toolModel(t, toolCall{"echo", `{"text":"hello"}`}, toolCall{"lookup", `{}`})
	model.RequireAPIKey(key)
	lookup := server.NewMCPServer("lookup", "1.0.0")
	lookup.AddTool(mcp.NewTool("lookup", mcp.WithDescription("Looks something up.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("found it"), nil
		})
	var authorized atomic.Int64
	streamable := server.NewStreamableHTTPServer(lookup)
	mcpHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+headerSecret {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		streamable.ServeHTTP(w, r)
	}))
	t.Cleanup(mcpHTTP.Close)
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("OPENAI_MODEL", "m")
	t.Setenv("WEBCHAT_TEST_ENV_SECRET", envSecret)
	t.Setenv("WEBCHAT_TEST_HEADER_SECRET", headerSecret)
	file := mcpFile(t, map[string]any{
		"tools":  map[string]any{"command": stdioServer(t), "env": map[string]string{"API_TOKEN": "${WEBCHAT_TEST_ENV_SECRET}"}, "disabledTools": only("echo")},
		"lookup": map[string]any{"url": mcpHTTP.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer ${WEBCHAT_TEST_HEADER_SECRET}"}},
	})
	db := filepath.Join(t.TempDir(), "chat.db")
	p := startProgram(t, "-db", db, "-mcp", file, "-summarize-at", "4")
	base := strings.TrimSuffix(p.URL, "/")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}, Jar: jar}
	defer client.CloseIdleConnections()
	status, _ := getAs(t, client, p.URL) // the owner cookie
	require.Equal(t, http.StatusOK, status)
	session := postSession(t, client, base)

	// Two turns with both MCP tools (the second ends with a summary), then
	// one the model refuses: a wrong key.
	require.Equal(t, "finished", turnAs(t, client, base, session, "Use the tools.").Status)
	require.Equal(t, "finished", turnAs(t, client, base, session, "Use them again.").Status)
	assert.Positive(t, authorized.Load(), "the HTTP MCP server got its header")
	model.RequireAPIKey("sk-another-key")
	require.Equal(t, "error", turnAs(t, client, base, session, "And once more.").Status)

	// What the endpoints give: the list, and every record in full.
	status, raw := getJSON(t, client, base+"/api/apilog")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	seen := []string{string(raw)}
	var list apiLogResponse
	require.NoError(t, json.Unmarshal(raw, &list))
	purposes := map[memory.APICallPurpose]int{}
	for _, c := range list.Calls {
		purposes[c.Purpose]++
		status, raw := getJSON(t, client, base+"/api/apilog/call?id="+strconv.FormatInt(c.ID, 10))
		require.Equal(t, http.StatusOK, status, "%s", raw)
		seen = append(seen, string(raw))
	}
	assert.Equal(t, map[memory.APICallPurpose]int{memory.PurposePlanning: 3, memory.PurposeToolRound: 4, memory.PurposeSummary: 1}, purposes)
	assert.Equal(t, memory.APICallError, list.Calls[0].Status, "the refused request: %+v", list.Calls[0])
	assert.Contains(t, strings.Join(seen, "\n"), "found it", "the records hold the tools' results")
	assert.Contains(t, strings.Join(seen, "\n"), `\"text\":\"hello\"`, "and the model's calls")
	require.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())

	// What the store holds: every record, and the SQLite files' bytes.
	st, err := sqlitestore.Open(t.Context(), db)
	require.NoError(t, err)
	calls, err := st.APICalls(t.Context(), memory.APICallQuery{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Len(t, calls, len(list.Calls))
	for _, c := range calls {
		seen = append(seen, string(mustJSON(c)))
	}
	files, err := filepath.Glob(db + "*")
	require.NoError(t, err)
	var raws strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		raws.Write(b)
	}
	assert.Contains(t, raws.String(), `found it`, "the files are searched as they hold the records")
	seen = append(seen, raws.String())
	for _, text := range seen {
		for _, s := range secrets {
			assert.NotContains(t, text, s)
		}
	}
}

// TestAPILogSubAgent: the researcher's model calls are recorded as
// sub_agent, in the calling run's session (so its browser lists them),
// with content or without as the log's mode says.
func TestAPILogSubAgent(t *testing.T) {
	leaktest.Check(t)
	for _, mode := range []APILogMode{APILogFull, APILogMetadata} {
		t.Run(string(mode), func(t *testing.T) {
			h := newHarness(t, Options{Researcher: true, APILog: mode})
			s1 := h.newSession(t)
			require.Equal(t, "finished", turnAs(t, h.client, h.ts.URL, s1, "Research the weather in Oslo").Status)
			stored := storedCalls(t, h.srv)
			sub := 0
			for _, c := range stored {
				assert.Equal(t, s1, c.SessionID, "%s", c.Purpose)
				if c.Purpose != memory.PurposeSubAgent {
					continue
				}
				sub++
				if mode == APILogFull {
					assert.Contains(t, string(c.Request), "You are a researcher", "the researcher's own request")
				} else {
					assert.Nil(t, c.Request)
					assert.Nil(t, c.Reply)
				}
			}
			assert.GreaterOrEqual(t, sub, 2, "the researcher's rounds: a call and its answer")
			assert.Equal(t, callIDs(stored), callIDs(apiLogOf(t, h.client, h.ts.URL, "").Calls))
		})
	}
}
