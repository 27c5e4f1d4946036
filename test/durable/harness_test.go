package durable

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/historytest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/internal/procgroup"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/ui/jsonapi"
)

// transport carries every request of the tests to the replicas. Its idle
// connections are closed before a test looks for leaked goroutines.
var transport = &http.Transport{MaxIdleConnsPerHost: 64}

var client = &http.Client{Transport: transport}

// checkLeaks is leaktest.Check with the transport's idle connections closed
// first.
func checkLeaks(t testing.TB) {
	t.Helper()
	leaktest.Check(t, transport.CloseIdleConnections)
}

// testContext bounds a test.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// backend is the store the replicas of a test share.
type backend struct {
	name string
	args []string // -sqlite PATH, or -postgres URL -schema NAME
}

// sqliteBackend is a fresh SQLite file.
func sqliteBackend(t testing.TB) backend {
	return backend{name: "sqlite", args: []string{"-sqlite", filepath.Join(t.TempDir(), "store.db")}}
}

// postgresBackend is a fresh schema on the test server, dropped when t
// ends; it skips t without a server (fails it under PLANROUND_REQUIRE_ALL=1).
func postgresBackend(t testing.TB) backend {
	url := pgtest.URL(t)
	return backend{name: "postgres", args: []string{"-postgres", url, "-schema", pgtest.Schema(t, url, "planround_durable_")}}
}

// replica is one running replica process.
type replica struct {
	t      testing.TB
	name   string
	args   []string
	group  *procgroup.Group
	base   string        // http://addr
	exited chan struct{} // closed once the process was waited for
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer for a process's stderr, read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startReplica starts the replica program with args in a process group of
// its own, and waits until it listens. It is killed (SIGKILL, the whole
// group) when t ends; its stderr is logged when t failed.
func startReplica(t testing.TB, name string, args ...string) *replica {
	t.Helper()
	r, err := launch(t, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// launch is startReplica for any goroutine: it returns its error.
func launch(t testing.TB, name string, args ...string) (*replica, error) {
	if buildErr != nil {
		return nil, buildErr
	}
	r := &replica{t: t, name: name, args: args, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd := exec.Command(replicaBin, args...)
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.group, err = procgroup.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start replica %s: %w", name, err)
	}
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("stderr of replica %s:\n%s", name, r.stderr.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		defer close(r.exited)
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, br)
		cmd.Wait()
	}()
	select {
	case a := <-addr:
		if a == "" {
			<-r.exited
			return nil, fmt.Errorf("replica %s ended before it listened:\n%s", name, r.stderr.String())
		}
		r.base = "http://" + a
	case <-time.After(60 * time.Second):
		r.kill()
		return nil, fmt.Errorf("replica %s did not print its address within 60s:\n%s", name, r.stderr.String())
	}
	return r, nil
}

// kill ends the replica with SIGKILL (its whole group) and waits for it.
func (r *replica) kill() {
	r.group.Kill()
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.t.Errorf("replica %s still runs 30s after SIGKILL", r.name)
	}
}

// restart starts a new process with the replica's arguments.
func (r *replica) restart(t testing.TB) *replica {
	return startReplica(t, r.name+"'", r.args...)
}

// event is a chunk of a run, or its end, as a stream of the session's
// events (GET /api/events) shows it: Run is "turn" for a turn a message
// started, "resume" for one continued from the store.
type event struct {
	Session string       `json:"session"`
	Run     string       `json:"run"`
	Chunk   *agent.Chunk `json:"chunk,omitempty"`
	End     bool         `json:"end,omitempty"`
	Error   string       `json:"error,omitempty"`
}

func (e event) String() string {
	switch {
	case e.End:
		return fmt.Sprintf("%s %s end %q", e.Session, e.Run, e.Error)
	case e.Chunk == nil:
		return fmt.Sprintf("%s %s ?", e.Session, e.Run)
	case e.Chunk.Tool != nil:
		return fmt.Sprintf("%s %s %s %s %s %s", e.Session, e.Run, e.Chunk.Kind, e.Chunk.Tool.Name, e.Chunk.Tool.State, e.Chunk.Tool.Cause)
	}
	return fmt.Sprintf("%s %s %s %q", e.Session, e.Run, e.Chunk.Kind, e.Chunk.Text)
}

// tool returns the event's tool call, nil when it has none.
func (e event) tool() *agent.ToolCall {
	if e.Chunk == nil {
		return nil
	}
	return e.Chunk.Tool
}

// isState matches the chunk of a tool call in state s.
func isState(s agent.ToolState) func(event) bool {
	return func(e event) bool { return e.tool() != nil && e.tool().State == s }
}

// resumed matches what match does in a turn continued from the store.
func resumed(match func(event) bool) func(event) bool {
	return func(e event) bool { return e.Run == "resume" && match(e) }
}

// isEnd matches the end of a run of kind run ("turn", "resume") that
// ended without error.
func isEnd(run string) func(event) bool {
	return func(e event) bool { return e.End && e.Run == run && e.Error == "" }
}

// stream is a session's event stream (GET /api/events) being read.
type stream struct {
	what   string
	events chan event // closed at the end of the body
	seen   []event    // the events taken so far, for failure messages
	cancel context.CancelFunc
	done   chan struct{} // closed when the reader ended
}

// follow opens the event stream of session after the event with Seq after
// and reads it in a goroutine until the body ends, ctx ends or t ends.
// With message, it passes only the chunks and the end of the first turn
// that this message started (as the answer of a front end's message), and
// ends there.
func (r *replica) follow(ctx context.Context, t testing.TB, session string, after int64, message string) (*stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{what: r.name + " events of " + session, events: make(chan event, 1024), cancel: cancel, done: make(chan struct{})}
	u := r.base + "/api/events?session_id=" + neturl.QueryEscape(session) + "&after=" + strconv.FormatInt(after, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("the events of %s on %s: %w", session, r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("the events of %s on %s: %s: %s", session, r.name, resp.Status, b)
	}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		send := func(e event) bool {
			select {
			case s.events <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}
		var (
			name, data string
			id         int64
			run        string // the kind of the turn in progress
			mine       int64  // with message: the Seq of its turn's run_started
		)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
				continue
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
				continue
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseInt(line[len("id: "):], 10, 64)
				continue
			case line != "" || data == "":
				continue
			}
			ev, raw, seq := name, []byte(data), id
			name, data, id = "", "", 0
			switch ev {
			case "run_started":
				var st struct {
					Message string `json:"message"`
					Resumed bool   `json:"resumed"`
				}
				if err := json.Unmarshal(raw, &st); err != nil {
					send(event{Session: session, End: true, Error: fmt.Sprintf("bad run_started %q: %v", raw, err)})
					return
				}
				run = "turn"
				if st.Resumed {
					run = "resume"
				}
				if message != "" && mine == 0 && !st.Resumed && st.Message == message {
					mine = seq
				}
			case "":
				if message != "" && mine == 0 {
					continue
				}
				var c agent.Chunk
				if err := json.Unmarshal(raw, &c); err != nil {
					send(event{Session: session, End: true, Error: fmt.Sprintf("bad chunk %q: %v", raw, err)})
					return
				}
				if !send(event{Session: session, Run: run, Chunk: &c}) {
					return
				}
			case "run_done":
				var d struct {
					Status string `json:"status"`
					Error  string `json:"error"`
					Turn   int64  `json:"turn"`
				}
				if err := json.Unmarshal(raw, &d); err != nil {
					send(event{Session: session, End: true, Error: fmt.Sprintf("bad run_done %q: %v", raw, err)})
					return
				}
				if message != "" && (mine == 0 || d.Turn != mine) {
					continue
				}
				e := event{Session: session, Run: run, End: true}
				if d.Status == "error" {
					e.Error = d.Error
				}
				if !send(e) || message != "" {
					return
				}
			case "reload":
				send(event{Session: session, Run: run, End: true, Error: "events lost"})
				return
			case "session_deleted":
				return
			}
		}
	}()
	t.Cleanup(s.close)
	return s, nil
}

// logEnd returns the Seq of the session's last event, where a front end
// that shows the history follows the events from (X-Session-Seq).
func (r *replica) logEnd(ctx context.Context, session string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/api/history?session_id="+neturl.QueryEscape(session), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the header counts
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /api/history on %s: %s", r.name, resp.Status)
	}
	return strconv.ParseInt(resp.Header.Get(jsonapi.HeaderSeq), 10, 64)
}

// startTurn sends message to the session as a front end does (it follows
// the session's events from the log's end, then posts the message), and
// returns the stream of that turn; any goroutine may call it.
func (r *replica) startTurn(ctx context.Context, t testing.TB, session, message string) (*stream, error) {
	after, err := r.logEnd(ctx, session)
	if err != nil {
		return nil, err
	}
	s, err := r.follow(ctx, t, session, after, message)
	if err != nil {
		return nil, err
	}
	status, body, err := r.post(ctx, "/api/chat", map[string]string{"session_id": session, "message": message})
	if err != nil || status != http.StatusAccepted {
		s.close()
		return nil, fmt.Errorf("POST /api/chat on %s: %d %s %v", r.name, status, body, err)
	}
	s.what = r.name + " turn " + message + " of " + session
	return s, nil
}

// close stops reading the stream and waits for its reader.
func (s *stream) close() {
	s.cancel()
	<-s.done
}

// turn starts a turn on the replica.
func (r *replica) turn(ctx context.Context, t testing.TB, session, message string) *stream {
	t.Helper()
	s, err := r.startTurn(ctx, t, session, message)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// events follows the events of the session's runs, on any replica, from
// the first of its log: a restarted replica may resume a run before the
// test subscribes. A turn continued from the store has the Run "resume".
func (r *replica) events(ctx context.Context, t testing.TB, session string) *stream {
	t.Helper()
	s, err := r.follow(ctx, t, session, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// next returns the next event; false when the stream ended.
func (s *stream) next(ctx context.Context) (event, bool, error) {
	select {
	case e, ok := <-s.events:
		if ok {
			s.seen = append(s.seen, e)
		}
		return e, ok, nil
	case <-ctx.Done():
		return event{}, false, ctx.Err()
	}
}

// waitFor returns the first event that matches, failing t when the stream
// or ctx ends first.
func (s *stream) waitFor(ctx context.Context, t testing.TB, what string, match func(event) bool) event {
	t.Helper()
	e, err := s.find(ctx, match)
	if err != nil {
		t.Fatalf("%s: waiting for %s: %v; events so far:\n%s", s.what, what, err, s.history())
	}
	return e
}

// find returns the first event that matches, or why none came.
func (s *stream) find(ctx context.Context, match func(event) bool) (event, error) {
	for {
		e, ok, err := s.next(ctx)
		switch {
		case err != nil:
			return event{}, err
		case !ok:
			return event{}, errors.New("the stream ended")
		case match(e):
			return e, nil
		}
	}
}

// buffered returns the events that have arrived and were not taken yet,
// without waiting.
func (s *stream) buffered() []event {
	var out []event
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				return out
			}
			s.seen = append(s.seen, e)
			out = append(out, e)
		default:
			return out
		}
	}
}

func (s *stream) history() string {
	var b strings.Builder
	for _, e := range s.seen {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// decision is the body of a POST /api/tool-approve: a decision bound to the call
// the person saw, as a front end sends it.
type decision struct {
	SessionID       string `json:"session_id"`
	ApprovalID      string `json:"approval_id"`
	CallID          string `json:"call_id"`
	Tool            string `json:"tool"`
	ArgumentsDigest string `json:"arguments_digest"`
	Approved        bool   `json:"approved"`
}

// decisionFor is the decision on the call of an approval_required chunk.
func decisionFor(session string, call *agent.ToolCall, approved bool) decision {
	return decision{SessionID: session, ApprovalID: call.ApprovalID, CallID: call.ID, Tool: call.Name,
		ArgumentsDigest: call.ArgumentsDigest, Approved: approved}
}

// decisionOn is the decision on a pending approval found in the store
// (/approvals), as a front end that draws the card again sends it.
func decisionOn(a memory.Approval, approved bool) decision {
	return decision{SessionID: a.SessionID, ApprovalID: a.ID, CallID: a.CallID, Tool: a.Tool,
		ArgumentsDigest: a.Digest, Approved: approved}
}

// approve posts a decision; it returns the status and the body: 200
// {"success":true} when it was taken, {"success":false} when the
// approval was no longer pending.
func (r *replica) approve(ctx context.Context, d decision) (int, string, error) {
	return r.post(ctx, "/api/tool-approve", d)
}

// taken reports whether the answer of a decision says it was taken.
func taken(status int, body string) bool {
	return status == http.StatusOK && strings.Contains(body, `"success":true`)
}

// answerForm posts the answers to a form; it returns the status and the
// body.
func (r *replica) answerForm(ctx context.Context, session, formID string, answers map[string]any) (int, string, error) {
	return r.post(ctx, "/api/form-answer", map[string]any{"session_id": session, "form_id": formID, "answers": answers})
}

// post posts body as JSON to path; it returns the status and the answer.
func (r *replica) post(ctx context.Context, path string, body any) (int, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer), err
}

// interrupt posts an interrupt of the session.
func (r *replica) interrupt(ctx context.Context, session string) (int, string, error) {
	return r.post(ctx, "/api/interrupt", map[string]any{"session_id": session})
}

// mustApprove posts a decision that must be taken (200).
func (r *replica) mustApprove(ctx context.Context, t testing.TB, d decision) {
	t.Helper()
	status, body, err := r.approve(ctx, d)
	if err != nil || !taken(status, body) {
		t.Fatalf("approve %s on %s: %d %s %v", d.ApprovalID, r.name, status, body, err)
	}
}

// get decodes the JSON answer of a GET.
func (r *replica) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s on %s: %s: %s", path, r.name, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// history returns the session's stored messages.
func (r *replica) history(ctx context.Context, t testing.TB, session string) []memory.Message {
	t.Helper()
	var msgs []memory.Message
	if err := r.get(ctx, "/api/history?session_id="+neturl.QueryEscape(session), &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// openCalls returns the session's open call records.
func (r *replica) openCalls(ctx context.Context, session string) ([]memory.OpenCall, error) {
	var calls []memory.OpenCall
	err := r.get(ctx, "/calls?session="+neturl.QueryEscape(session), &calls)
	return calls, err
}

// sweeps returns how many sweeps the replica has done.
func (r *replica) sweeps(ctx context.Context, t testing.TB) int64 {
	t.Helper()
	var h struct {
		Sweeps int64 `json:"sweeps"`
	}
	if err := r.get(ctx, "/healthz", &h); err != nil {
		t.Fatal(err)
	}
	return h.Sweeps
}

// effectLine is one line of the effects file (the replica's type).
type effectLine struct {
	Tool   string `json:"tool"`
	Key    string `json:"key"`
	Holder string `json:"holder"`
	PID    int    `json:"pid"`
}

// readEffects returns the executions recorded in the effects file.
func readEffects(t testing.TB, path string) []effectLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []effectLine
	for line := range strings.Lines(string(b)) {
		var e effectLine
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("effects file %s: line %q: %v", path, line, err)
		}
		out = append(out, e)
	}
	return out
}

// executions returns the recorded executions of key.
func executions(t testing.TB, path, key string) []effectLine {
	t.Helper()
	var out []effectLine
	for _, e := range readEffects(t, path) {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// checkHistory fails t when msgs is not a valid history.
func checkHistory(t testing.TB, msgs []memory.Message) {
	t.Helper()
	if err := historytest.Check(msgs); err != nil {
		t.Errorf("invalid history: %v\n%s", err, dump(msgs))
	}
}

func dump(msgs []memory.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "  %d %s %q", m.ID, m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call %s %s %s", c.ID, c.Name, c.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " answers %s", m.ToolCallID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// poll calls cond every 20 ms until it holds, for state that lives in
// another process's store and has no signal to wait for; it fails t after
// d.
func poll(ctx context.Context, t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if ok, err := within(ctx, d, cond); !ok {
		t.Fatalf("waited %v for %s (last error: %v)", d, what, err)
	}
}

// within calls cond every 20 ms until it holds, for at most d; it reports
// whether it held, and cond's last error.
func within(ctx context.Context, d time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if ok {
			return true, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
