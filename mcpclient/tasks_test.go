package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
)

// taskProtocol is the protocol version whose base protocol has tasks.
const taskProtocol = "2025-11-25"

// taskServer is an in-process streamable HTTP test server with the job
// tool (testserver.TaskOptions), stateless so that a task outlives the
// session that created it, as it does on a server that binds tasks to its
// users rather than to sessions. It counts the calls of job and the
// task-augmented tools/call requests.
type taskServer struct {
	cfg     ServerConfig
	hold    chan struct{}
	started atomic.Int32 // calls of job the server ran
	creates atomic.Int32 // task-augmented tools/call requests
	holdOne sync.Once
	// gate, when set before a call, holds each task-augmented tools/call
	// in the front proxy until it is closed.
	gate chan struct{}
}

func newTaskServer(t *testing.T) *taskServer {
	t.Helper()
	ts := &taskServer{hold: make(chan struct{})}
	release := make(chan struct{})
	srv := testserver.New(testserver.Options{Release: release, Tasks: &testserver.TaskOptions{
		Hold:    ts.hold,
		Started: func(string) { ts.started.Add(1) },
	}})
	inner := servertest.NewTestStreamableHTTPServer(srv, server.WithStateLess(true))
	target, err := url.Parse(inner.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"tools/call"`)) && bytes.Contains(body, []byte(`"task":{`)) {
				ts.creates.Add(1)
				if ts.gate != nil {
					<-ts.gate
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.release()
		close(release)
		front.CloseClientConnections()
		front.Close()
		inner.CloseClientConnections()
		inner.Close()
	})
	ts.cfg = ServerConfig{Name: "tasks", Transport: TransportHTTP, URL: front.URL + "/mcp", StartTimeout: 10 * time.Second, ProtocolVersion: taskProtocol}
	return ts
}

// release ends the held jobs.
func (ts *taskServer) release() { ts.holdOne.Do(func() { close(ts.hold) }) }

// fastPoll makes c's servers poll their tasks often.
func fastPoll(c *Client) {
	for _, e := range c.entries {
		e.taskPoll = 10 * time.Millisecond
	}
}

// TestTaskCalls: a tool the server may run as a task is called as one on a
// session of protocol 2025-11-25 (over stdio and streamable HTTP), and its
// result is the call's; with DisableTasks, or on a 2026-07-28 session, the
// same tool is an ordinary call.
func TestTaskCalls(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		leaktest.Check(t)
		cfg := stdioConfig(t, "stdio", "-tasks")
		cfg.ProtocolVersion = taskProtocol
		c := newClient(t, Options{}, cfg)
		fastPoll(c)
		if !c.entries[0].shared.current().taskTool("job") {
			t.Fatal("the job tool of a server with tasks does not go as a task")
		}
		got, err := run(t, tool(t, c, "job"), `{"text":"over stdio"}`, nil)
		if err != nil || got != "job done: over stdio" {
			t.Fatalf("job = %q, %v; want its result", got, err)
		}
	})
	t.Run("http", func(t *testing.T) {
		leaktest.Check(t, closeIdleHTTP)
		ts := newTaskServer(t)
		c := newClient(t, Options{}, ts.cfg)
		fastPoll(c)
		model := agenttest.NewServer()
		t.Cleanup(model.Close)
		model.Enqueue(agenttest.Reply().Call(0, "call_1", "job", `{"text":"over http"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Done.").Finish("stop"))
		a := newAgent(t, c, model, &askingApprover{})
		chunks := collect(t, a, context.Background(), agent.Input{Message: "Run the job"})
		calls := toolChunks(chunks)
		if last := calls[len(calls)-1]; last.State != agent.StateResult || last.Result != "job done: over http" {
			t.Fatalf("last tool chunk = %+v, want the job's result", last)
		}
		reqs := model.Requests()
		msgs := reqs[len(reqs)-1].Messages
		if got := msgs[len(msgs)-1].Content; got != "job done: over http" {
			t.Errorf("the model read %q, want the job's result", got)
		}
		if n := ts.creates.Load(); n != 1 {
			t.Errorf("%d task-augmented tools/call, want 1", n)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		leaktest.Check(t, closeIdleHTTP)
		ts := newTaskServer(t)
		cfg := ts.cfg
		cfg.DisableTasks = true
		c := newClient(t, Options{}, cfg)
		got, err := run(t, tool(t, c, "job"), `{"text":"plain"}`, nil)
		if err != nil || got != "job done: plain" {
			t.Fatalf("job = %q, %v; want its result", got, err)
		}
		if n := ts.creates.Load(); n != 0 {
			t.Errorf("%d task-augmented tools/call with DisableTasks, want 0", n)
		}
	})
	t.Run("modern protocol", func(t *testing.T) {
		leaktest.Check(t, closeIdleHTTP)
		ts := newTaskServer(t)
		cfg := ts.cfg
		cfg.ProtocolVersion = ""
		c := newClient(t, Options{}, cfg)
		got, err := run(t, tool(t, c, "job"), `{"text":"modern"}`, nil)
		if err != nil || got != "job done: modern" {
			t.Fatalf("job = %q, %v; want its result", got, err)
		}
		if n := ts.creates.Load(); n != 0 {
			t.Errorf("%d task-augmented tools/call at protocol %s, want 0", n, c.entries[0].shared.current().protocol)
		}
	})
}

// TestTaskResumedAfterStop: a durable run on a SQLite file calls a job that
// the server runs as a task; the task's id is saved with the call's
// open-call record before the client waits. The process stops while the
// task runs (its host shuts down: the run is suspended, and the task is
// left running); another process, with a new client, agent and store on
// the same file, resumes the turn: it re-attaches to the same task and
// the task's result reaches the model. The server saw exactly one
// tools/call. The same on PostgreSQL.
func TestTaskResumedAfterStop(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "chat.db")
		testTaskResumedAfterStop(t, func() (callLogStore, func()) {
			st, err := sqlitestore.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			return st, func() { st.Close() }
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgtest.Schema(t, url, "planround_tasks_")
		testTaskResumedAfterStop(t, func() (callLogStore, func()) {
			st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			return st, st.Close
		})
	})
}

// callLogStore is a store that keeps open-call records.
type callLogStore interface {
	memory.Store
	memory.CallLog
}

// testTaskResumedAfterStop is TestTaskResumedAfterStop on the stores that
// open opens, each time on the same data.
func testTaskResumedAfterStop(t *testing.T, open func() (callLogStore, func())) {
	leaktest.Check(t, closeIdleHTTP)
	ts := newTaskServer(t)
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(agenttest.Reply().Call(0, "call_1", "job", `{"text":"long","hold":true}`).Finish("tool_calls"))

	// The first process.
	st1, close1 := open()
	c1, err := New(context.Background(), []ServerConfig{ts.cfg}, Options{})
	if err != nil {
		close1()
		t.Fatal(err)
	}
	stop1 := sync.OnceFunc(func() {
		if err := c1.Close(); err != nil {
			t.Error(err)
		}
		close1()
	})
	t.Cleanup(stop1)
	fastPoll(c1)
	a1 := durableAgent(t, c1, model, st1)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// Once the task is saved, the host shuts down.
	saved := make(chan bool, 1)
	go func() {
		defer cancel(fmt.Errorf("shutting down: %w", agent.ErrSuspended))
		for range 1000 {
			recs, err := st1.OpenCalls(context.Background(), "s1")
			if err == nil && len(recs) == 1 && recs[0].State != "" {
				saved <- true
				return
			}
			select {
			case <-ctx.Done():
				saved <- false
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		saved <- false
	}()
	var trace []string
	for c, err := range a1.Run(ctx, agent.Input{SessionID: "s1", Message: "Run the long job"}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		trace = append(trace, string(c.Kind))
	}
	if !<-saved {
		t.Fatalf("the call's task was never saved; the run went %v", trace)
	}
	if trace[len(trace)-1] != string(agent.KindSuspended) {
		t.Fatalf("the first run ended with %v, want suspended", trace)
	}
	recs, err := st1.OpenCalls(context.Background(), "s1")
	if err != nil || len(recs) != 1 || !recs[0].Executing {
		t.Fatalf("open calls = %+v, %v; want the job's, executing", recs, err)
	}
	state, ok := parseTaskState(recs[0].State)
	if !ok || state.Server != "tasks" || state.Tool != "job" {
		t.Fatalf("saved state %q, want the job's task", recs[0].State)
	}
	stop1()

	// The second process: the task ends while nobody waits for it.
	ts.release()
	st2, close2 := open()
	defer close2()
	c2 := newClient(t, Options{}, ts.cfg)
	fastPoll(c2)
	a2 := durableAgent(t, c2, model, st2)
	model.Enqueue(agenttest.Reply().Text("The job is done.").Finish("stop"))
	var calls []agent.ToolCall
	for c, err := range a2.Resume(context.Background(), "s1") {
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if c.Tool != nil {
			calls = append(calls, *c.Tool)
		}
	}
	if len(calls) == 0 || calls[len(calls)-1].Result != "job done: long" {
		t.Fatalf("resumed tool chunks = %+v, want the task's result", calls)
	}
	reqs := model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if got := msgs[len(msgs)-1].Content; got != "job done: long" {
		t.Errorf("the model read %q, want the task's result", got)
	}
	if n, m := ts.creates.Load(), ts.started.Load(); n != 1 || m != 1 {
		t.Errorf("the server saw %d task-augmented tools/call and ran job %d times, want 1 and 1", n, m)
	}
	if open, err := st2.OpenCalls(context.Background(), "s1"); err != nil || len(open) != 0 {
		t.Errorf("open calls after the resumed turn = %+v, %v; want none", open, err)
	}
}

// TestTaskInterruptCancels: an interrupted task call cancels its task
// (tasks/cancel): the server lists it as cancelled.
func TestTaskInterruptCancels(t *testing.T) {
	leaktest.Check(t, closeIdleHTTP)
	ts := newTaskServer(t)
	c := newClient(t, Options{}, ts.cfg)
	fastPoll(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tool(t, c, "job").Execute(ctx, []byte(`{"text":"cut","hold":true}`), nil)
		done <- err
	}()
	waitFor(t, "the job runs", func() bool { return ts.started.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted job: %v, want context.Canceled", err)
	}
	waitFor(t, "the server cancelled the task", func() bool {
		res, err := c.entries[0].shared.current().mc.ListTasks(context.Background(), mcp.ListTasksRequest{})
		return err == nil && len(res.Tasks) == 1 && res.Tasks[0].Status == mcp.TaskStatusCancelled
	})
}

// TestTaskInterruptedWhileCreated: a call interrupted while its task is
// being created still cancels the task, once the server names it (the
// request had reached the server; only its answer says which task to
// cancel).
func TestTaskInterruptedWhileCreated(t *testing.T) {
	leaktest.Check(t, closeIdleHTTP)
	ts := newTaskServer(t)
	ts.gate = make(chan struct{})
	c := newClient(t, Options{}, ts.cfg)
	fastPoll(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tool(t, c, "job").Execute(ctx, []byte(`{"text":"cut","hold":true}`), nil)
		done <- err
	}()
	waitFor(t, "the creation is in flight", func() bool { return ts.creates.Load() == 1 })
	cancel()
	close(ts.gate)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted job: %v, want context.Canceled", err)
	}
	waitFor(t, "the server cancelled the task", func() bool {
		res, err := c.entries[0].shared.current().mc.ListTasks(context.Background(), mcp.ListTasksRequest{})
		return err == nil && len(res.Tasks) == 1 && res.Tasks[0].Status == mcp.TaskStatusCancelled
	})
}

// durableAgent is an agent on the model with c's tools, keeping its turns
// in st.
func durableAgent(t *testing.T, c *Client, model *agenttest.Server, st memory.Store) *agent.Agent {
	t.Helper()
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any", Tools: reg,
		Approver: &askingApprover{}, DisablePlanning: true, Store: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// FuzzParseTaskState: any saved state decodes to a task state or to
// nothing, without a panic; a decoded one encodes back to a state that
// decodes the same.
func FuzzParseTaskState(f *testing.F) {
	f.Add(taskState{V: 1, Server: "s", Tool: "t", Task: "786512e2-9e0d-44bd-8f29-789f320fe840"}.encode())
	f.Add(`{"v":2,"server":"s","tool":"t","task":"x"}`)
	f.Add(`{"v":1,"server":"","tool":"t","task":"x"}`)
	f.Add(`{"v":1}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		st, ok := parseTaskState(s)
		if !ok {
			return
		}
		if st.Task == "" || len(st.Task) > maxTaskID || st.Server == "" || st.Tool == "" {
			t.Fatalf("parseTaskState(%q) = %+v, accepted", s, st)
		}
		again, ok := parseTaskState(st.encode())
		if !ok || again != st {
			t.Fatalf("round trip of %+v = %+v, %v", st, again, ok)
		}
	})
}

// TestEverythingTaskTool: the reference server's simulate-research-query,
// a tool it runs only as a task, over stdio and streamable HTTP at
// protocol 2025-11-25: the call goes as a task, its status messages come as
// partial output, and its report is the result.
func TestEverythingTaskTool(t *testing.T) {
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			cfg := everythingConfig(t, tr)
			cfg.ProtocolVersion = taskProtocol
			c := newClient(t, Options{}, cfg)
			fastPoll(c)
			var progress buffer
			got, err := run(t, tool(t, c, "simulate-research-query"), `{"topic":"planround"}`, &progress)
			if err != nil || !strings.HasPrefix(got, "# Research Report: planround") {
				t.Fatalf("simulate-research-query = %q, %v; want its report", got, err)
			}
			if p := progress.String(); !strings.Contains(p, "...\n") {
				t.Errorf("partial output %q, want the task's status messages", p)
			}
		})
	}
}

// TestTaskResumedStateUnreadable: a resumed call whose saved state names
// no task of its server's tool (another server's, or damaged) is never
// sent: its result is an error the model reads.
func TestTaskResumedStateUnreadable(t *testing.T) {
	leaktest.Check(t, closeIdleHTTP)
	ts := newTaskServer(t)
	c := newClient(t, Options{}, ts.cfg)
	ctx := context.Background()
	st := &memory.MemStore{}
	if _, err := st.CreateSession(ctx, memory.Session{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	stored, err := st.Append(ctx, "s1",
		memory.Message{Role: memory.RoleUser, Content: "Run the job"},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "call_1", Name: "job", Arguments: []byte(`{"text":"x"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	other := taskState{V: taskStateVersion, Server: "elsewhere", Tool: "job", Task: "t-1"}.encode()
	if err := st.SaveCall(ctx, "s1", memory.OpenCall{MessageID: stored[1].ID, CallID: "call_1", Round: 1, Executing: true, State: other}); err != nil {
		t.Fatal(err)
	}
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(agenttest.Reply().Text("Sorry.").Finish("stop"))
	a := durableAgent(t, c, model, st)
	var last agent.ToolCall
	for ch, err := range a.Resume(ctx, "s1") {
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if ch.Tool != nil {
			last = *ch.Tool
		}
	}
	if last.State != agent.StateResult || !strings.Contains(last.Result, "cannot be read") {
		t.Errorf("resumed call = %+v, want an error result", last)
	}
	if n := ts.creates.Load(); n != 0 {
		t.Errorf("%d tools/call sent for a call whose task cannot be found, want 0", n)
	}
}
