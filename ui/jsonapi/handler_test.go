package jsonapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// byUser lets the user of the X-User header act on the sessions whose id
// starts with their name and a dash.
func byUser(r *http.Request, sessionID string) (string, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return "", ui.ErrUnauthenticated
	}
	if !strings.HasPrefix(sessionID, user+"-") {
		return "", errors.New("not your session")
	}
	return "user:" + user, nil
}

// serve serves a handler on b's runner under /api on 127.0.0.1, with the
// callers byUser names, and returns the base URL (.../api).
func serve(t *testing.T, b *uitest.Bench, cfg ui.Config, o Options) string {
	t.Helper()
	cfg.Runner = b.Runner
	if cfg.Authorize == nil {
		cfg.Authorize = byUser
	}
	h, err := NewHandler(cfg, o)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api"
}

// call sends a request as user (none when empty) and returns the status,
// the headers and the body.
func call(t *testing.T, method, u, user, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("X-User", user)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header, string(raw)
}

func post(t *testing.T, u, user string, body any) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	status, _, out := call(t, http.MethodPost, u, user, string(raw))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	return status, m
}

// sseEvent is one event of a stream.
type sseEvent struct {
	name string
	id   int64
	data string
}

// stream is an open GET /events.
type stream struct {
	res *http.Response
	sc  *bufio.Scanner
}

// follow opens the event stream of session as user, after the cursor
// after (none when negative); it is closed when t ends, or by close.
func follow(t *testing.T, api, user, session string, after int64) *stream {
	t.Helper()
	q := url.Values{"session_id": {session}}
	if after >= 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/events?"+q.Encode(), nil)
	require.NoError(t, err)
	req.Header.Set("X-User", user)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	t.Cleanup(func() { res.Body.Close() })
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	return &stream{res: res, sc: sc}
}

func (s *stream) close() { s.res.Body.Close() }

// next returns the stream's next event (comments skipped).
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.data != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(line[4:], 10, 64)
			require.NoError(t, err)
			ev.id = n
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	t.Fatalf("the stream ended: %v", s.sc.Err())
	return ev
}

// until reads events up to the first for which stop is true, and returns
// them all (that one included).
func (s *stream) until(t *testing.T, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	for range 10000 {
		ev := s.next(t)
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
	t.Fatal("no end in 10000 events")
	return nil
}

func named(name string) func(sseEvent) bool {
	return func(e sseEvent) bool { return e.name == name }
}

// approvalAsked is true for the approval_required chunk.
func approvalAsked(e sseEvent) bool {
	var c agent.Chunk
	return e.name == "" && json.Unmarshal([]byte(e.data), &c) == nil &&
		c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateApprovalRequired
}

func chunkOf(t *testing.T, e sseEvent) agent.Chunk {
	t.Helper()
	var c agent.Chunk
	require.NoError(t, json.Unmarshal([]byte(e.data), &c), e.data)
	return c
}

func runDoneOf(t *testing.T, e sseEvent) RunDone {
	t.Helper()
	require.Equal(t, "run_done", e.name)
	var d RunDone
	require.NoError(t, json.Unmarshal([]byte(e.data), &d))
	return d
}

// TestOwner: only the session's owner sends to it, follows it, reads its
// history, decides, answers or stops for it, renames or deletes it; a
// request without a caller is answered 401.
func TestOwner(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{})
	s := "alice-1"
	ev := follow(t, api, "alice", s, -1)
	require.Equal(t, "hello", ev.next(t).name)
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Weather})
	require.Equal(t, http.StatusAccepted, status, out)
	ev.until(t, approvalAsked)
	pending, err := b.PendingApprovals(t.Context(), s)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	p := pending[0]

	decision := map[string]any{"session_id": s, "approval_id": p.ApprovalID, "call_id": p.Call.ID, "tool": p.Call.Name,
		"arguments_digest": p.Call.ArgumentsDigest, "approved": true}
	for _, tc := range []struct {
		path string
		body any
	}{
		{"/chat", map[string]string{"session_id": s, "message": "hi"}},
		{"/tool-approve", decision},
		{"/form-answer", map[string]any{"session_id": s, "form_id": "f1", "answers": map[string]any{"city": "Lima"}}},
		{"/interrupt", map[string]string{"session_id": s}},
		{"/sessions/rename", map[string]string{"session_id": s, "title": "mine"}},
		{"/sessions/delete", map[string]string{"session_id": s}},
	} {
		status, out := post(t, api+tc.path, "mallory", tc.body)
		assert.Equal(t, http.StatusForbidden, status, "%s: %v", tc.path, out)
		status, out = post(t, api+tc.path, "", tc.body)
		assert.Equal(t, http.StatusUnauthorized, status, "%s: %v", tc.path, out)
	}
	for _, path := range []string{"/events", "/history"} {
		status, _, body := call(t, http.MethodGet, api+path+"?session_id="+s, "mallory", "")
		assert.Equal(t, http.StatusForbidden, status, "%s: %s", path, body)
		status, _, body = call(t, http.MethodGet, api+path+"?session_id="+s, "", "")
		assert.Equal(t, http.StatusUnauthorized, status, "%s: %s", path, body)
	}
	// Nothing the others sent was taken: the approval still waits, and
	// its owner decides it.
	pending, err = b.PendingApprovals(t.Context(), s)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	status, out = post(t, api+"/tool-approve", "alice", decision)
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, true, out["success"], out)
	done := runDoneOf(t, last(ev.until(t, named("run_done"))))
	assert.Equal(t, "finished", done.Status)
	assert.EqualValues(t, 1, b.Runs.Load(), "the tool ran once")

	// The audit names the owner as who decided, through this protocol.
	var by []string
	for rec, err := range b.Runner.Decisions(t.Context(), approval.DecisionQuery{SessionID: s}) {
		require.NoError(t, err)
		by = append(by, rec.Decision.By+" via "+rec.Decision.Via)
	}
	assert.Equal(t, []string{"user:alice via " + Via}, by)
}

func last(evs []sseEvent) sseEvent { return evs[len(evs)-1] }

// TestBinding: a decision is taken only for the call the approval shows:
// another call id, tool or arguments digest is refused with 409, and the
// approval stays pending.
func TestBinding(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{})
	s := "alice-bind"
	ev := follow(t, api, "alice", s, -1)
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Weather})
	require.Equal(t, http.StatusAccepted, status, out)
	c := chunkOf(t, last(ev.until(t, approvalAsked)))
	good := map[string]any{"session_id": s, "approval_id": c.Tool.ApprovalID, "call_id": c.Tool.ID, "tool": c.Tool.Name,
		"arguments_digest": c.Tool.ArgumentsDigest, "approved": true}
	for field, value := range map[string]string{"call_id": "call_9", "tool": "place_order", "arguments_digest": agent.ArgumentsDigest([]byte(`{"city":"Quito"}`))} {
		bad := make(map[string]any)
		for k, v := range good {
			bad[k] = v
		}
		bad[field] = value
		status, out := post(t, api+"/tool-approve", "alice", bad)
		assert.Equal(t, http.StatusConflict, status, "%s: %v", field, out)
	}
	for _, missing := range []string{"approval_id", "call_id", "tool", "arguments_digest", "approved"} {
		bad := make(map[string]any)
		for k, v := range good {
			if k != missing {
				bad[k] = v
			}
		}
		status, out := post(t, api+"/tool-approve", "alice", bad)
		assert.Equal(t, http.StatusBadRequest, status, "without %s: %v", missing, out)
	}
	pending, err := b.PendingApprovals(t.Context(), s)
	require.NoError(t, err)
	require.Len(t, pending, 1, "still pending")
	assert.Zero(t, b.Runs.Load())

	good["approved"] = false
	good["reason"] = "not today"
	status, out = post(t, api+"/tool-approve", "alice", good)
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, true, out["success"])
	done := runDoneOf(t, last(ev.until(t, named("run_done"))))
	assert.Equal(t, "rejected", done.Status)
	assert.Zero(t, b.Runs.Load(), "a rejected call does not run")
	// A stale card: the approval is no longer pending.
	status, out = post(t, api+"/tool-approve", "alice", good)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, out["success"], out)
}

// TestEventsCursor: a client that drops its stream in the middle of a turn
// and follows it again after the last event it has gets every later event
// once, in order: the Seqs of the two streams, joined, are those of one
// stream that followed the whole turn.
func TestEventsCursor(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{})
	s := "alice-long"
	whole := follow(t, api, "alice", s, -1)
	hello := whole.next(t)
	require.Equal(t, "hello", hello.name)
	var h struct {
		Busy   bool  `json:"busy"`
		Seq    int64 `json:"seq"`
		Replay bool  `json:"replay"`
	}
	require.NoError(t, json.Unmarshal([]byte(hello.data), &h))
	assert.Equal(t, struct {
		Busy   bool  `json:"busy"`
		Seq    int64 `json:"seq"`
		Replay bool  `json:"replay"`
	}{false, 0, false}, h)
	first := follow(t, api, "alice", s, -1)
	first.next(t) // hello
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Long})
	require.Equal(t, http.StatusAccepted, status, out)

	all := whole.until(t, named("run_done"))
	part := first.until(t, func(e sseEvent) bool { return e.name == "" && strings.Contains(e.data, "word5 ") })
	first.close()
	cursor := last(part).id
	second := follow(t, api, "alice", s, cursor)
	hello = second.next(t)
	require.Equal(t, "hello", hello.name)
	assert.Contains(t, hello.data, `"replay":true`)
	rest := second.until(t, named("run_done"))

	seqs := func(evs []sseEvent) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.id)
		}
		return out
	}
	assert.Equal(t, seqs(all), append(seqs(part), seqs(rest)...), "no duplicate, no gap")

	// An EventSource that reconnects by itself names its cursor in the
	// Last-Event-ID header.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, api+"/events?session_id="+s, nil)
	require.NoError(t, err)
	req.Header.Set("X-User", "alice")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(cursor, 10))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	third := &stream{res: res, sc: bufio.NewScanner(res.Body)}
	t.Cleanup(third.close)
	assert.Contains(t, third.next(t).data, `"replay":true`)
	assert.Equal(t, seqs(rest), seqs(third.until(t, named("run_done"))), "the same events after the header's cursor")
	for i, e := range all {
		assert.EqualValues(t, i+1, e.id, "numbered from 1 without a gap")
	}
	assert.Equal(t, "run_started", all[0].name)
	assert.Equal(t, "finished", runDoneOf(t, last(all)).Status)

	// A cursor at the log's end brings nothing but what comes next; one
	// beyond it (another log's) is taken as none.
	status, hd, _ := call(t, http.MethodGet, api+"/history?session_id="+s, "alice", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, strconv.FormatInt(last(all).id, 10), hd.Get(HeaderSeq))
	assert.Empty(t, hd.Get(HeaderRunning))
	beyond := follow(t, api, "alice", s, last(all).id+100)
	hello = beyond.next(t)
	assert.Contains(t, hello.data, `"replay":false`)
}

// TestHistoryOpenCalls, on a memory store and on a SQLite file: while a
// suspended turn's call waits for its approval, the history shows it with
// what a decision names, and a client that follows the session without a
// cursor gets its approval_required chunk again; the decision resumes the
// turn.
func TestHistoryOpenCalls(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
			o := uitest.Options{SuspendAfter: 200 * time.Millisecond}
			if name == "sqlite" {
				st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "chat.db"))
				require.NoError(t, err)
				t.Cleanup(func() { st.Close() })
				o.Store = st
			}
			b := uitest.New(t, o)
			api := serve(t, b, ui.Config{}, Options{})
			s := "alice-hist"
			ev := follow(t, api, "alice", s, -1)
			status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Weather})
			require.Equal(t, http.StatusAccepted, status, out)
			asked := chunkOf(t, last(ev.until(t, approvalAsked)))
			doneEv := last(ev.until(t, named("run_done")))
			done := runDoneOf(t, doneEv)
			require.Equal(t, "suspended", done.Status)

			status, hd, body := call(t, http.MethodGet, api+"/history?session_id="+s, "alice", "")
			require.Equal(t, http.StatusOK, status, body)
			var hist []HistoryEntry
			require.NoError(t, json.Unmarshal([]byte(body), &hist))
			var open []OpenCall
			for _, e := range hist {
				open = append(open, e.OpenCalls...)
			}
			require.Len(t, open, 1, body)
			assert.Equal(t, OpenCall{CallID: asked.Tool.ID, State: "approval", ApprovalID: asked.Tool.ApprovalID,
				Tool: asked.Tool.Name, ArgumentsDigest: asked.Tool.ArgumentsDigest}, open[0])
			assert.Empty(t, hd.Get(HeaderRunning), "suspended: no turn runs")
			assert.Equal(t, strconv.FormatInt(doneEv.id, 10), hd.Get(HeaderSeq), "the history ends at the suspension")

			// A new client without a cursor: what waits is drawn again.
			again := follow(t, api, "alice", s, -1)
			require.Equal(t, "hello", again.next(t).name)
			redraw := chunkOf(t, again.next(t))
			require.NotNil(t, redraw.Tool)
			assert.Equal(t, agent.StateApprovalRequired, redraw.Tool.State)
			assert.Equal(t, asked.Tool.ApprovalID, redraw.Tool.ApprovalID)
			assert.Equal(t, asked.Tool.ArgumentsDigest, redraw.Tool.ArgumentsDigest)

			status, out = post(t, api+"/tool-approve", "alice", map[string]any{"session_id": s, "approval_id": redraw.Tool.ApprovalID,
				"call_id": redraw.Tool.ID, "tool": redraw.Tool.Name, "arguments_digest": redraw.Tool.ArgumentsDigest, "approved": true})
			require.Equal(t, http.StatusOK, status, out)
			require.Equal(t, true, out["success"], out)
			evs := again.until(t, named("run_done"))
			assert.Equal(t, "run_started", evs[0].name)
			assert.Contains(t, evs[0].data, `"resumed":true`)
			assert.Equal(t, "finished", runDoneOf(t, last(evs)).Status)
			assert.EqualValues(t, 1, b.Runs.Load())
		})
	}
}

// TestStop: a stop while a call waits for its approval cancels the
// approval and ends the turn; a stop of an idle session says nothing was
// active.
func TestStop(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{})
	s := "alice-stop"
	ev := follow(t, api, "alice", s, -1)
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Weather})
	require.Equal(t, http.StatusAccepted, status, out)
	ev.until(t, approvalAsked)
	status, out = post(t, api+"/interrupt", "alice", map[string]string{"session_id": s})
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, true, out["success"], out)
	assert.Equal(t, true, out["was_active"], out)
	done := runDoneOf(t, last(ev.until(t, named("run_done"))))
	assert.Contains(t, []string{"interrupted", "rejected"}, done.Status)
	pending, err := b.PendingApprovals(t.Context(), s)
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.Zero(t, b.Runs.Load())

	status, out = post(t, api+"/interrupt", "alice", map[string]string{"session_id": s})
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, map[string]any{"success": true, "was_active": false, "cancelled": 0.0}, out)
	// The session takes the next message.
	status, out = post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Hello})
	require.Equal(t, http.StatusAccepted, status, out)
	assert.Equal(t, "finished", runDoneOf(t, last(ev.until(t, named("run_done")))).Status)
}

// TestSessions: a new id, a session stored and titled by its first
// message, listed for its owner only, renamed, and deleted (not while a
// turn runs in it; its streams get session_deleted).
func TestSessions(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	var deleted []string
	api := serve(t, b, ui.Config{}, Options{
		NewSessionID: func(r *http.Request) (string, error) {
			user := r.Header.Get("X-User")
			if user == "" {
				return "", ui.ErrUnauthenticated
			}
			return user + "-" + randomID(), nil
		},
		Deleted: func(_ context.Context, id string) { deleted = append(deleted, id) },
	})
	status, out := post(t, api+"/sessions", "", struct{}{})
	assert.Equal(t, http.StatusUnauthorized, status, out)
	status, out = post(t, api+"/sessions", "alice", struct{}{})
	require.Equal(t, http.StatusOK, status, out)
	s, _ := out["session_id"].(string)
	require.True(t, strings.HasPrefix(s, "alice-"), s)
	require.NoError(t, CheckSessionID(s))

	list := func(user string) []SessionEntry {
		t.Helper()
		status, _, body := call(t, http.MethodGet, api+"/sessions", user, "")
		require.Equal(t, http.StatusOK, status, body)
		var l []SessionEntry
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		return l
	}
	assert.Empty(t, list("alice"), "not stored before its first message")

	ev := follow(t, api, "alice", s, -1)
	status, out = post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": "  what is\n the weather in Lima  "})
	require.Equal(t, http.StatusAccepted, status, out)
	ev.until(t, approvalAsked)
	l := list("alice")
	require.Len(t, l, 1)
	assert.Equal(t, s, l[0].ID)
	assert.Equal(t, "what is the weather in Lima", l[0].Title)
	assert.True(t, l[0].Busy)
	assert.Empty(t, list("bob"))
	status, out = post(t, api+"/sessions/delete", "alice", map[string]string{"session_id": s})
	assert.Equal(t, http.StatusConflict, status, out)
	status, out = post(t, api+"/interrupt", "alice", map[string]string{"session_id": s})
	require.Equal(t, http.StatusOK, status, out)
	ev.until(t, named("run_done"))

	status, out = post(t, api+"/sessions/rename", "alice", map[string]string{"session_id": s, "title": " \u202eLima\ttrip "})
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, "Lima trip", list("alice")[0].Title)
	status, out = post(t, api+"/sessions/rename", "alice", map[string]string{"session_id": s, "title": " \n "})
	assert.Equal(t, http.StatusBadRequest, status, out)
	status, out = post(t, api+"/sessions/rename", "alice", map[string]string{"session_id": "alice-never", "title": "x"})
	assert.Equal(t, http.StatusNotFound, status, out)

	status, out = post(t, api+"/sessions/delete", "alice", map[string]string{"session_id": s})
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, "session_deleted", ev.next(t).name)
	assert.Empty(t, list("alice"))
	assert.Equal(t, []string{s}, deleted)
	status, out = post(t, api+"/sessions/delete", "alice", map[string]string{"session_id": s})
	assert.Equal(t, http.StatusNotFound, status, out)
}

// TestRequests: bodies the handler refuses before it acts.
func TestRequests(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{MaxBodyBytes: 256}, Options{})
	big := `{"session_id":"alice-1","message":"` + strings.Repeat("x", 300) + `"}`
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/chat", big, http.StatusRequestEntityTooLarge},
		{"/chat", ``, http.StatusBadRequest},
		{"/chat", `{`, http.StatusBadRequest},
		{"/chat", `[]`, http.StatusBadRequest},
		{"/chat", `{"session_id":"alice-1"}`, http.StatusBadRequest},
		{"/chat", `{"session_id":"alice-1","message":" \n"}`, http.StatusBadRequest},
		{"/chat", `{"message":"hi"}`, http.StatusBadRequest},
		{"/chat", `{"session_id":"alice 1","message":"hi"}`, http.StatusBadRequest},
		{"/chat", `{"session_id":"alice-1","message":"hi"} {}`, http.StatusBadRequest},
		{"/chat", `{"session_id":1,"message":"hi"}`, http.StatusBadRequest},
		{"/tool-approve", `{"session_id":"alice-1","approval_id":"a","call_id":"c","tool":"t","arguments_digest":"d","approved":true,"scope":"forever"}`, http.StatusBadRequest},
		{"/form-answer", `{"session_id":"alice-1","form_id":"f"}`, http.StatusBadRequest},
		{"/form-answer", `{"session_id":"alice-1","answers":{}}`, http.StatusBadRequest},
		{"/interrupt", `{}`, http.StatusBadRequest},
	} {
		status, hd, body := call(t, http.MethodPost, api+tc.path, "alice", tc.body)
		assert.Equal(t, tc.status, status, "%s %s: %s", tc.path, tc.body, body)
		assert.Equal(t, "application/json", hd.Get("Content-Type"))
		var m response
		assert.NoError(t, json.Unmarshal([]byte(body), &m), body)
		assert.NotEmpty(t, m.Error)
	}
	status, _, body := call(t, http.MethodGet, api+"/chat", "alice", "")
	assert.Equal(t, http.StatusMethodNotAllowed, status, body)
	req, err := http.NewRequest(http.MethodPost, api+"/chat", strings.NewReader(`{"session_id":"alice-1","message":"hi"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-User", "alice")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode)
	assert.Empty(t, b.Model.Requests(), "no turn started")
}

// TestOptions: a host's hooks see and change a message before its turn,
// refuse one with their status, and add to the hello event.
func TestOptions(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{
		Hello: map[string]string{"model": "test-model"},
		Prepare: func(ctx context.Context, req ChatRequest, in *agent.Input) (context.Context, error) {
			var extra struct {
				Note string `json:"note"`
			}
			if err := json.Unmarshal(req.Body, &extra); err != nil {
				return nil, err
			}
			if extra.Note == "refuse" {
				return nil, &Error{Status: http.StatusTooManyRequests, Message: "too many"}
			}
			in.Message += " (" + extra.Note + " from " + req.Principal + ")"
			return ctx, nil
		},
		Title: func(string) string { return "" },
	})
	s := "alice-opt"
	ev := follow(t, api, "alice", s, -1)
	hello := ev.next(t)
	assert.JSONEq(t, `{"busy":false,"seq":0,"replay":false,"model":"test-model"}`, hello.data)
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": "hello", "note": "refuse"})
	assert.Equal(t, http.StatusTooManyRequests, status, out)
	status, out = post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": "hello", "note": "a note"})
	require.Equal(t, http.StatusAccepted, status, out)
	ev.until(t, named("run_done"))
	msgs, err := b.Store.Messages(t.Context(), s, true)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	assert.Equal(t, "hello (a note from user:alice)", msgs[0].Content)
	sess, err := b.Store.Session(t.Context(), s)
	require.NoError(t, err)
	assert.Empty(t, sess.Title, "Title said none")

	_, err = NewHandler(ui.Config{Runner: b.Runner, Authorize: byUser}, Options{Hello: []int{1}})
	assert.Error(t, err)
	_, err = NewHandler(ui.Config{Runner: b.Runner}, Options{})
	assert.Error(t, err)
}

// TestNestedRedraw: a client that follows a session without a cursor while
// a sub-agent's call waits for its approval gets the approval_required
// chunk marked as the sub-agent's (its Agent, Depth and Parent), as the
// turn showed it, so that it draws the card where it was.
func TestNestedRedraw(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serve(t, b, ui.Config{}, Options{})
	s := "alice-nested"
	ev := follow(t, api, "alice", s, -1)
	status, out := post(t, api+"/chat", "alice", map[string]string{"session_id": s, "message": uitest.Research})
	require.Equal(t, http.StatusAccepted, status, out)
	asked := chunkOf(t, last(ev.until(t, approvalAsked)))
	require.Equal(t, 1, asked.Depth, "the sub-agent's approval")

	again := follow(t, api, "alice", s, -1)
	hello := again.next(t)
	assert.Contains(t, hello.data, `"busy":true`)
	redraw := chunkOf(t, again.next(t))
	require.NotNil(t, redraw.Tool)
	assert.Equal(t, asked.Tool.ApprovalID, redraw.Tool.ApprovalID)
	assert.Equal(t, [3]any{asked.Agent, asked.Depth, asked.Parent}, [3]any{redraw.Agent, redraw.Depth, redraw.Parent})
	assert.Equal(t, "research", redraw.Agent)
	assert.Equal(t, "call_r", redraw.Parent)

	status, out = post(t, api+"/interrupt", "alice", map[string]string{"session_id": s})
	require.Equal(t, http.StatusOK, status, out)
	ev.until(t, named("run_done"))
}
