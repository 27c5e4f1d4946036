package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// waitLimit bounds every wait of these tests; nothing here should come
// near it.
const waitLimit = 15 * time.Second

// harness is a webchat Server on 127.0.0.1 talking to the demo model, and
// a client that stands for the user's browser.
type harness struct {
	srv   *Server
	ts    *httptest.Server
	model interface{ Close() } // a model server of the test's own; nil for the demo model
	// client is the browser: it loaded the page and holds the owner
	// cookie.
	client *http.Client
	token  string // Options.Token
}

// newHarness starts a Server on the demo model (no delay between deltas).
// Call leaktest.Check before it.
func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	o.BaseURL, o.HTTPClient = demo.BaseURL, demo.Model{}.Client()
	o.Model, o.ModelLabel = demo.ModelName, "built-in demo model"
	if o.Tools == nil {
		o.Tools = demo.Tools()
	}
	srv, err := NewServer(o)
	require.NoError(t, err)
	ts := httptest.NewServer(srv) // 127.0.0.1
	h := &harness{srv: srv, ts: ts, token: o.Token}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h
}

// newBrowser returns a client with a cookie jar of its own that has loaded
// the page (with the token, if the server has one), and so holds an owner
// cookie of its own.
func (h *harness) newBrowser(t *testing.T) *http.Client {
	t.Helper()
	c := h.newClient(t)
	page := h.ts.URL + "/"
	if h.token != "" {
		page += "?token=" + url.QueryEscape(h.token)
	}
	resp, err := c.Get(page)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return c
}

// newClient returns a client with an empty cookie jar: it has not loaded
// the page.
func (h *harness) newClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Transport: h.ts.Client().Transport, Jar: jar}
}

// newSession asks the server for a session of the harness's browser.
func (h *harness) newSession(t *testing.T) string {
	t.Helper()
	status, out := h.post(t, "/api/sessions", `{}`)
	require.Equal(t, http.StatusOK, status, "new session: %v", out)
	id, _ := out["session_id"].(string)
	require.NotEmpty(t, id, "new session: %v", out)
	return id
}

func (h *harness) close() {
	h.srv.Close()
	h.ts.Close()
	if h.model != nil {
		h.model.Close()
	}
}

// post sends body to path and decodes the JSON answer.
func (h *harness) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	return postAs(t, h.client, h.ts.URL, path, body)
}

// postAs sends body to path with client and decodes the JSON answer.
func postAs(t *testing.T, client *http.Client, base, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "POST %s %s", path, body)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), "POST %s %s: the answer is not JSON", path, body)
	return resp.StatusCode, out
}

func (h *harness) chat(t *testing.T, session, message string) {
	t.Helper()
	status, out := h.post(t, "/api/chat", mustString(map[string]string{"session_id": session, "message": message}))
	require.Equal(t, http.StatusAccepted, status, "chat: %v", out)
}

func (h *harness) decide(t *testing.T, session string, call *agent.ToolCall, approved bool) map[string]any {
	t.Helper()
	status, out := h.post(t, "/api/tool-approve", approveBody(session, call, approved, nil))
	require.Equal(t, http.StatusOK, status, "tool-approve: %v", out)
	return out
}

// approveBody returns the body of POST /api/tool-approve that decides the
// approval of call, an approval_required chunk's call, as the page sends
// it: bound to the call's id, tool and arguments digest. extra adds fields
// (reason, arguments, scope).
func approveBody(session string, call *agent.ToolCall, approved bool, extra map[string]any) string {
	body := map[string]any{"session_id": session, "approval_id": call.ApprovalID, "call_id": call.ID,
		"tool": call.Name, "arguments_digest": call.ArgumentsDigest, "approved": approved}
	for k, v := range extra {
		body[k] = v
	}
	return mustString(body)
}

func mustString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sseEvent is one event read from GET /api/events.
type sseEvent struct {
	name string // "" for a chunk
	data string
	id   string // the SSE id: the event's number in the turn log
}

func (e sseEvent) chunk(t *testing.T) agent.Chunk {
	t.Helper()
	require.Empty(t, e.name, "want a chunk, got event %s %s", e.name, e.data)
	var c agent.Chunk
	require.NoError(t, json.Unmarshal([]byte(e.data), &c), "chunk %s", e.data)
	return c
}

// events is an open event stream, read by a goroutine into a channel.
type events struct {
	body io.Closer
	ch   chan sseEvent
	done chan struct{}
}

// openEvents opens the session's event stream and reads its hello event.
func (h *harness) openEvents(t *testing.T, session string) (*events, map[string]any) {
	t.Helper()
	return openEventsAt(t, h.client, h.ts.URL, session, "")
}

// openEventsAt opens the session's event stream on the server at base as
// client, with the extra query (such as "after=3"), and reads its hello
// event.
func openEventsAt(t *testing.T, client *http.Client, base, session, query string) (*events, map[string]any) {
	t.Helper()
	u := base + "/api/events?session_id=" + session
	if query != "" {
		u += "&" + query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ev := &events{body: resp.Body, ch: make(chan sseEvent, 10000), done: make(chan struct{})}
	go ev.read(resp.Body)
	t.Cleanup(ev.close)
	hello := ev.next(t)
	require.Equal(t, "hello", hello.name)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(hello.data), &info))
	return ev, info
}

func (ev *events) read(r io.Reader) {
	defer close(ev.done)
	defer close(ev.ch)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.name != "" {
				ev.ch <- cur
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"): // a comment (keep-alive)
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

func (ev *events) close() {
	ev.body.Close()
	<-ev.done
}

// next returns the next event; it fails the test when the stream ends or
// nothing comes in time.
func (ev *events) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case e, ok := <-ev.ch:
		require.True(t, ok, "the event stream ended")
		return e
	case <-time.After(waitLimit):
		t.Fatal("no event within the time limit")
	}
	panic("unreachable")
}

// until reads events until one satisfies ok and returns everything read,
// that one last.
func (ev *events) until(t *testing.T, ok func(sseEvent) bool) []sseEvent {
	t.Helper()
	var seen []sseEvent
	for {
		e := ev.next(t)
		seen = append(seen, e)
		if ok(e) {
			return seen
		}
	}
}

// untilState reads until the tool call reaches state and returns that
// chunk's call and every event read.
func (ev *events) untilState(t *testing.T, kind agent.Kind, state agent.ToolState) (*agent.ToolCall, []sseEvent) {
	t.Helper()
	seen := ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			require.NotEqual(t, "run_done", e.name, "the run ended before %s: %s", state, e.data)
			return false
		}
		c := e.chunk(t)
		return c.Kind == kind && c.Tool != nil && c.Tool.State == state
	})
	return seen[len(seen)-1].chunk(t).Tool, seen
}

// runDone reads until run_done and returns it with the chunks before it.
func (ev *events) runDone(t *testing.T) (runDone, []agent.Chunk) {
	t.Helper()
	seen := ev.until(t, func(e sseEvent) bool { return e.name == "run_done" })
	var chunks []agent.Chunk
	for _, e := range seen[:len(seen)-1] {
		if e.name == "" {
			chunks = append(chunks, e.chunk(t))
		}
	}
	var d runDone
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &d))
	// The turn's number is the log's business (TestTurnLog): a run_done
	// names one, and the tests compare the rest.
	assert.Positive(t, d.Turn, "run_done names its turn: %s", seen[len(seen)-1].data)
	d.Turn = 0
	return d, chunks
}

// summary is a compact trace of chunks: kinds, and tool states.
func summary(chunks []agent.Chunk) []string {
	var out []string
	for _, c := range chunks {
		switch c.Kind {
		case agent.KindText, agent.KindReasoning:
			if n := len(out); n > 0 && out[n-1] == c.Kind.String() {
				continue
			}
			out = append(out, c.Kind.String())
		case agent.KindToolCall:
			if c.Tool.State == agent.StateExecuting && c.Tool.PartialResult != "" {
				continue
			}
			out = append(out, string(c.Tool.State)+" "+c.Tool.Name)
		case agent.KindToolRejected:
			out = append(out, "rejected "+c.Tool.Name+": "+c.Tool.Reason)
		default:
			out = append(out, c.Kind.String())
		}
	}
	return out
}

func texts(chunks []agent.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// waitApprovals waits until the Manager holds n entries (an answered
// approval is removed by the run's goroutine, a moment later).
func waitApprovals(t *testing.T, s *Server, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return waiting(t, s, false) == n }, waitLimit, 5*time.Millisecond, "pending approvals: want %d", n)
}

func TestWeatherTurnOverSSE(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, hello := h.openEvents(t, s1)
	assert.Equal(t, false, hello["busy"])
	assert.Equal(t, "planround-demo", hello["model"])
	assert.Equal(t, "built-in demo model", hello["model_label"])

	h.chat(t, s1, "What's the weather in Paris?")
	require.Equal(t, "run_started", ev.next(t).name)

	call, seen := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.NotEmpty(t, call.ApprovalID, "the approval_required chunk carries the approval id")
	assert.JSONEq(t, `{"city":"Paris"}`, string(call.Arguments))
	var before []agent.Chunk
	for _, e := range seen {
		before = append(before, e.chunk(t))
	}
	assert.Equal(t, []string{"text", "round_end", "reasoning", "text", "start get_weather", "approval_required get_weather"}, summary(before))
	assert.Equal(t, 1, waiting(t, h.srv, false))

	assert.Equal(t, true, h.decide(t, s1, call, true)["success"])

	done, after := ev.runDone(t)
	assert.Equal(t, runDone{Status: "finished"}, done)
	assert.Equal(t, []string{"executing get_weather", "result get_weather", "round_end", "text", "round_end"}, summary(after))
	for _, c := range after {
		if c.Kind == agent.KindToolCall {
			assert.Equal(t, call.ID, c.Tool.ID, "one call id through the states")
		}
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			assert.Contains(t, c.Tool.Result, "Paris")
		}
	}
	assert.Contains(t, texts(after), "Here is what I found")
	assert.Equal(t, 0, waiting(t, h.srv, false))

	// The history a reloaded page draws.
	resp, err := h.client.Get(h.ts.URL + "/api/history?session_id=" + s1)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var hist []historyEntry
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&hist))
	var roles []memory.Role
	for _, m := range hist {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []memory.Role{"user", "assistant", "assistant", "tool", "assistant"}, roles)
	assert.Equal(t, "What's the weather in Paris?", hist[0].Content)
	assert.Contains(t, hist[1].Content, "<need_tool>", "stored text keeps its tags")
	assert.NotContains(t, hist[1].Text, "<need_tool>", "shown text has none")
	assert.Contains(t, hist[1].Text, "weather in Paris")
	require.Len(t, hist[2].ToolCalls, 1)
	assert.Equal(t, call.ID, hist[2].ToolCalls[0].ID)
	assert.Equal(t, call.ID, hist[3].ToolCallID)
	assert.Contains(t, hist[4].Text, "Here is what I found")
}

func TestRejectEndsTheRun(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)

	assert.Equal(t, true, h.decide(t, s1, call, false)["success"])
	done, chunks := ev.runDone(t)
	assert.Equal(t, runDone{Status: "rejected", Reason: agent.CauseUser.DefaultReason(), Cause: agent.CauseUser}, done)
	assert.Equal(t, []string{"rejected get_weather: " + agent.CauseUser.DefaultReason(), "interrupted"}, summary(chunks))
	assert.Equal(t, 0, waiting(t, h.srv, false))
}

func TestInterruptDuringApproval(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "What's the weather in Paris?")
	ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, 1, waiting(t, h.srv, false))

	status, out := h.post(t, "/api/interrupt", `{"session_id":"`+s1+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, true, out["success"])
	assert.Equal(t, true, out["was_active"])

	done, chunks := ev.runDone(t)
	assert.Equal(t, runDone{Status: "interrupted"}, done)
	assert.Equal(t, []string{"rejected get_weather: " + agent.CauseApprovalInterrupted.DefaultReason(), "interrupted"}, summary(chunks))
	assert.Equal(t, 0, waiting(t, h.srv, false))
	assert.False(t, h.srv.busy(s1))

	// Nothing left to interrupt: the page finishes at once.
	status, out = h.post(t, "/api/interrupt", `{"session_id":"`+s1+`"}`)
	assert.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, map[string]any{"success": true, "was_active": false, "cancelled": float64(0)}, out)
}

func TestInterruptDuringExecutionKeepsPartialOutput(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "Please run `echo started; sleep 30`")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, "run_command", call.Name)
	h.decide(t, s1, call, true)

	// The executing chunks carry the output as it comes.
	ev.until(t, func(e sseEvent) bool {
		c := e.chunk(t)
		return c.Kind == agent.KindToolCall && c.Tool.State == agent.StateExecuting && strings.Contains(c.Tool.PartialResult, "started")
	})
	status, out := h.post(t, "/api/interrupt", `{"session_id":"`+s1+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)

	done, chunks := ev.runDone(t)
	assert.Equal(t, runDone{Status: "interrupted"}, done)
	require.NotEmpty(t, chunks)
	rej := chunks[len(chunks)-2]
	require.Equal(t, agent.KindToolRejected, rej.Kind, "%v", summary(chunks))
	assert.Equal(t, agent.CauseInterrupted.DefaultReason(), rej.Tool.Reason)
	assert.Equal(t, "started\n", rej.Tool.PartialResult)
	assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
}

func TestApprovalTimeout(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{ApprovalTimeout: 50 * time.Millisecond})
	s1 := h.newSession(t)
	ev, hello := h.openEvents(t, s1)
	assert.Equal(t, 0.05, hello["approval_timeout"])
	h.chat(t, s1, "What's the weather in Paris?")

	done, chunks := ev.runDone(t)
	assert.Equal(t, "rejected", done.Status)
	assert.Equal(t, agent.CauseTimeout, done.Cause, "%+v", done)
	assert.Equal(t, "approval timed out after 50ms", done.Reason)
	assert.Equal(t, []string{"text", "round_end", "reasoning", "text", "start get_weather", "approval_required get_weather",
		"rejected get_weather: " + done.Reason, "interrupted"}, summary(chunks))
	assert.Equal(t, 0, waiting(t, h.srv, false))
}

func TestStaleApproval(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)

	// An id nobody knows.
	out := h.decide(t, s1, &agent.ToolCall{ID: "call_1", Name: "get_weather", ApprovalID: "0123456789abcdef", ArgumentsDigest: "sha256:00"}, true)
	assert.Equal(t, false, out["success"])
	assert.NotEmpty(t, out["error"])

	// A restart: the card came from one server, the decision goes to the
	// next, whose approvals start empty.
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)

	restarted := newHarness(t, Options{})
	restarted.client = h.client // the same browser, its cookie
	out = restarted.decide(t, s1, call, true)
	assert.Equal(t, false, out["success"], "approving a card of the server before the restart")
	assert.Equal(t, 1, waiting(t, h.srv, false), "the first server still waits")

	// The first server shuts down: its run ends, its page is told.
	h.srv.Close()
	done, _ := ev.runDone(t)
	assert.Equal(t, runDone{Status: "interrupted", Reason: reasonShutdown}, done)
	assert.Equal(t, 0, waiting(t, h.srv, false))
}

func TestSecondChatInBusySessionIs409(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1, s2 := h.newSession(t), h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "What's the weather in Paris?")
	ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)

	status, out := h.post(t, "/api/chat", `{"session_id":"`+s1+`","message":"and in Rome?"}`)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, false, out["success"])
	assert.NotEmpty(t, out["error"])

	// Another session is not busy.
	ev2, _ := h.openEvents(t, s2)
	h.chat(t, s2, "Hello!")
	done, _ := ev2.runDone(t)
	assert.Equal(t, "finished", done.Status)

	// A reconnecting page of s1 learns the run is busy and gets its pending
	// card again.
	ev3, hello := h.openEvents(t, s1)
	assert.Equal(t, true, hello["busy"])
	redraw := ev3.next(t).chunk(t)
	require.Equal(t, agent.KindToolCall, redraw.Kind)
	assert.Equal(t, agent.StateApprovalRequired, redraw.Tool.State)
	assert.Equal(t, pendingOf(t, h.srv, s1)[0].ApprovalID, redraw.Tool.ApprovalID)
	assert.JSONEq(t, `{"city":"Paris"}`, string(redraw.Tool.Arguments))

	status, _ = h.post(t, "/api/interrupt", `{"session_id":"`+s1+`"}`)
	require.Equal(t, http.StatusOK, status)
	for _, e := range []*events{ev, ev3} {
		done, _ := e.runDone(t)
		assert.Equal(t, "interrupted", done.Status)
	}
	// Free again.
	h.chat(t, s1, "Hello!")
	done, _ = ev.runDone(t)
	assert.Equal(t, "finished", done.Status)
}

func TestMalformedRequests(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/api/chat", ``, http.StatusBadRequest},
		{"/api/chat", `{`, http.StatusBadRequest},
		{"/api/chat", `[]`, http.StatusBadRequest},
		{"/api/chat", `{"session_id":"` + s1 + `"}`, http.StatusBadRequest},
		{"/api/chat", `{"message":"hi"}`, http.StatusBadRequest},
		{"/api/chat", `{"session_id":"no spaces","message":"hi"}`, http.StatusBadRequest},
		{"/api/chat", `{"session_id":"` + s1 + `","message":"hi"} {}`, http.StatusBadRequest},
		{"/api/chat", `{"session_id":1,"message":"hi"}`, http.StatusBadRequest},
		{"/api/tool-approve", `{`, http.StatusBadRequest},
		{"/api/tool-approve", `{}`, http.StatusBadRequest},
		{"/api/tool-approve", `{"session_id":"` + s1 + `","approval_id":"x"}`, http.StatusBadRequest},
		{"/api/interrupt", `{`, http.StatusBadRequest},
		{"/api/interrupt", `{}`, http.StatusBadRequest},
		{"/api/chat", `{"session_id":"` + s1 + `","message":"` + strings.Repeat("x", maxBody) + `"}`, http.StatusRequestEntityTooLarge},
		// Over the limit after a complete object: too large, not malformed.
		{"/api/chat", `{"session_id":"` + s1 + `","message":"hi"} "` + strings.Repeat("x", maxBody) + `"`, http.StatusRequestEntityTooLarge},
	} {
		status, out := h.post(t, tc.path, tc.body)
		name := tc.body
		if len(name) > 60 {
			name = name[:60] + "..."
		}
		assert.Equal(t, tc.status, status, "POST %s %s", tc.path, name)
		assert.Equal(t, false, out["success"], "POST %s %s", tc.path, name)
		assert.NotEmpty(t, out["error"], "POST %s %s", tc.path, name)
	}

	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/api/chat", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/tool-approve", http.StatusMethodNotAllowed},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/history", http.StatusBadRequest},
		{http.MethodGet, "/api/events?session_id=a/b", http.StatusBadRequest},
	} {
		req, err := http.NewRequest(tc.method, h.ts.URL+tc.path, nil)
		require.NoError(t, err)
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		var out map[string]any
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s", tc.method, tc.path)
		assert.NoError(t, err, "%s %s: the answer is JSON", tc.method, tc.path)
		assert.Equal(t, false, out["success"], "%s %s", tc.method, tc.path)
	}
	assert.False(t, h.srv.busy(s1), "no malformed request started a run")
}

func TestPageSkillsAndEmptyHistory(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	get := func(path string) (*http.Response, string) {
		resp, err := h.client.Get(h.ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := get("/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	assert.Contains(t, body, `<script src="app.js"`)
	for _, f := range []string{"/app.js", "/style.css"} {
		resp, _ := get(f)
		assert.Equal(t, http.StatusOK, resp.StatusCode, f)
	}
	_, body = get("/api/skills")
	assert.JSONEq(t, `[]`, body)
	_, body = get("/api/history?session_id=" + h.newSession(t))
	assert.JSONEq(t, `[]`, body)
}

func TestCloseEndsRunsAndStreams(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "Please run `sleep 30`")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	h.decide(t, s1, call, true)
	ev.untilState(t, agent.KindToolCall, agent.StateExecuting)

	var wg sync.WaitGroup
	wg.Go(func() { h.srv.Close() }) // ends the running command too
	done, _ := ev.runDone(t)
	assert.Equal(t, runDone{Status: "interrupted", Reason: reasonShutdown}, done)
	wg.Wait()
	_, ok := <-ev.ch
	assert.False(t, ok, "the event stream ends after Close")

	status, out := h.post(t, "/api/chat", `{"session_id":"`+s1+`","message":"hi"}`)
	assert.Equal(t, http.StatusServiceUnavailable, status, "%v", out)
	assert.Equal(t, 0, waiting(t, h.srv, false))
}

func TestMainServesAndShutsDown(t *testing.T) {
	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"} {
		t.Setenv(k, "")
	}
	db := filepath.Join(t.TempDir(), "chat.db")
	p := startProgram(t, "-db", db)
	url := p.URL
	assert.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	assert.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())
	assert.Contains(t, p.stdout.String(), "listening on "+url)
	assert.Contains(t, p.stderr.String(), "built-in demo model")
	_, err = os.Stat(db)
	assert.NoError(t, err, "-db opened the SQLite file")
}

func TestFlags(t *testing.T) {
	var stdout, stderr strings.Builder
	assert.Equal(t, 2, run(context.Background(), []string{"-nope"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"extra"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"-db", "x.db", "-postgres", "postgres://127.0.0.1:1/x"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-db, -postgres and -memory exclude each other")
	assert.Equal(t, 2, run(context.Background(), []string{"-db", "x.db", "-memory"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"-lease-ttl", "0s"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"-suspend-after", "-1s"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"-max-runs", "0"}, &stdout, &stderr, nil))
	assert.Equal(t, 2, run(context.Background(), []string{"-max-streams", "-1"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-max-runs, -max-streams and -max-imports must be positive")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_MODEL", "")
	assert.Equal(t, 2, run(context.Background(), nil, &stdout, &stderr, nil), "a real API needs a model name")
}

// TestMaxStreamsFlag checks that -max-streams reaches the server: with 1,
// a second event stream is refused while the first is open.
func TestMaxStreamsFlag(t *testing.T) {
	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "WEBCHAT_TOKEN"} {
		t.Setenv(k, "")
	}
	p := startProgram(t, "-max-streams", "1", "-max-runs", "64")
	u := p.URL
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}, Jar: jar}
	defer client.CloseIdleConnections()
	st, _ := getAs(t, client, u) // the owner cookie
	require.Equal(t, http.StatusOK, st)
	open := func() *http.Response {
		st, out := postAs(t, client, strings.TrimSuffix(u, "/"), "/api/sessions", `{}`)
		require.Equal(t, http.StatusOK, st, "new session: %v", out)
		resp, err := client.Get(u + "api/events?session_id=" + out["session_id"].(string))
		require.NoError(t, err)
		return resp
	}
	first := open()
	assert.Equal(t, http.StatusOK, first.StatusCode)
	second := open()
	second.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, second.StatusCode, "a second stream beyond -max-streams 1")
	p.cancel() // the server ends the first stream
	io.Copy(io.Discard, first.Body)
	first.Body.Close()
	assert.Equal(t, 0, p.wait(t), "stderr: %s", p.stderr.String())
}

func TestCrossSiteRequestsAreRefused(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		host   string
		status int
	}{
		{"cross-site POST", http.MethodPost, map[string]string{"Sec-Fetch-Site": "cross-site"}, "", http.StatusForbidden},
		{"foreign Origin", http.MethodPost, map[string]string{"Origin": "http://evil.example"}, "", http.StatusForbidden},
		{"same-origin POST", http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-origin"}, "", http.StatusBadRequest},
		{"rebound Host", http.MethodGet, nil, "evil.example:8080", http.StatusMisdirectedRequest},
		{"localhost", http.MethodGet, nil, "localhost:8080", http.StatusOK},
	} {
		path := "/api/chat"
		if tc.method == http.MethodGet {
			path = "/api/skills"
		}
		req, err := http.NewRequest(tc.method, h.ts.URL+path, strings.NewReader(`{"session_id":"`+s1+`"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		var out any
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode, tc.name)
		assert.NoError(t, err, "%s: the answer is JSON", tc.name)
	}
	assert.False(t, h.srv.busy(s1))
}

// program is the command (run) a test started on 127.0.0.1 with a free
// port.
type program struct {
	URL            string // the address it printed
	cancel         context.CancelFunc
	status         chan int
	stdout, stderr strings.Builder // read them once it has ended
}

// startProgram runs the command with args after "-addr 127.0.0.1:0" and
// returns once it listens; it fails t when the command ends first or does
// not listen within waitLimit. The program is cancelled when t ends.
func startProgram(t *testing.T, args ...string) *program {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &program{cancel: cancel, status: make(chan int, 1)}
	ready := make(chan string, 1)
	go func() {
		p.status <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), &p.stdout, &p.stderr, ready)
	}()
	select {
	case p.URL = <-ready:
	case code := <-p.status:
		t.Fatalf("run ended with %d: %s", code, p.stderr.String())
	case <-time.After(waitLimit):
		t.Fatal("the server did not start")
	}
	return p
}

// stop ends the program as SIGINT or SIGTERM would and returns its exit
// status.
func (p *program) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	return p.wait(t)
}

// wait returns the program's exit status once it has ended; it fails t
// when that takes longer than waitLimit.
func (p *program) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.status:
		return code
	case <-time.After(waitLimit):
		t.Fatal("the server did not shut down")
		return -1
	}
}

// pendingOf returns the pending approvals of session.
func pendingOf(t *testing.T, s *Server, session string) []approval.PendingApproval {
	t.Helper()
	list, _, err := s.pending(t.Context(), session)
	require.NoError(t, err)
	return list
}

// waiting counts what waits for a person in the Server's store, in every
// session: its pending approvals, or with forms its open forms.
func waiting(t *testing.T, s *Server, forms bool) int {
	t.Helper()
	sessions, err := s.store.Sessions(t.Context())
	require.NoError(t, err)
	n := 0
	for _, ss := range sessions {
		approvals, open, err := s.pending(t.Context(), ss.ID)
		require.NoError(t, err)
		if forms {
			n += len(open)
		} else {
			n += len(approvals)
		}
	}
	return n
}
