package mcpclient

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// askingApprover asks "a person" for every call (a pending ticket, so the
// agent shows the approval card) and approves; it records what it was asked.
type askingApprover struct {
	mu    sync.Mutex
	asked []string
}

func (a *askingApprover) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req.Call.Name)
	a.mu.Unlock()
	return agent.Pending("ap-"+req.Call.ID, func(ctx context.Context) (agent.Decision, error) {
		return agent.Decision{Approved: true}, nil
	}), nil
}

func (a *askingApprover) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

// newAgent is an agent on a scripted model with the client's tools.
func newAgent(t *testing.T, c *Client, model *agenttest.Server, approver agent.Approver) *agent.Agent {
	t.Helper()
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:         model.URL(),
		HTTPClient:      model.Client(),
		Model:           "any",
		Tools:           reg,
		Approver:        approver,
		DisablePlanning: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// toolChunks are the tool-call chunks of a run.
func toolChunks(chunks []agent.Chunk) []agent.ToolCall {
	var out []agent.ToolCall
	for _, c := range chunks {
		if c.Tool != nil && (c.Kind == agent.KindToolCall || c.Kind == agent.KindToolRejected) {
			out = append(out, *c.Tool)
		}
	}
	return out
}

func collect(t *testing.T, a *agent.Agent, ctx context.Context, in agent.Input) []agent.Chunk {
	t.Helper()
	var chunks []agent.Chunk
	for c, err := range a.Run(ctx, in) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		chunks = append(chunks, c)
	}
	return chunks
}

// An MCP tool in an agent run: the approver is asked, the server's progress
// comes as executing chunks with partial output, the result goes to the
// model.
func TestAgentRunsMCPTool(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := newClient(t, Options{}, stdioConfig(t, "test"))
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(
		agenttest.Reply().Call(0, "call_1", "progress", `{"steps":3,"messages":false}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	approver := &askingApprover{}
	a := newAgent(t, c, model, approver)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := toolChunks(collect(t, a, ctx, agent.Input{Message: "copy the files"}))

	var states []agent.ToolState
	var partial strings.Builder
	for _, tc := range calls {
		states = append(states, tc.State)
		if tc.State == agent.StateExecuting {
			partial.WriteString(tc.PartialResult)
		}
	}
	states = slices.Compact(states)
	want := []agent.ToolState{agent.StateStart, agent.StateApprovalRequired, agent.StateExecuting, agent.StateResult}
	if !slices.Equal(states, want) {
		t.Errorf("states = %v, want %v", states, want)
	}
	if got, want := partial.String(), "step 1/3\nstep 2/3\nstep 3/3\n"; got != want {
		t.Errorf("partial output = %q, want %q", got, want)
	}
	if last := calls[len(calls)-1]; last.Result != "progress: done 3 steps" {
		t.Errorf("result = %q", last.Result)
	}
	if got := approver.names(); !slices.Equal(got, []string{"progress"}) {
		t.Errorf("the approver was asked about %v, want [progress]", got)
	}
	reqs := model.Requests()
	if msg := reqs[len(reqs)-1].LastMessage(); msg.Role != "tool" || msg.Content != "progress: done 3 steps" {
		t.Errorf("the model read %+v, want the tool's result", msg)
	}
}

// Interrupting a run during an MCP call ends the call at once and keeps
// what the server reported so far.
func TestAgentInterruptMCPCall(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	f := newFixture(t, TransportStdio)
	c := newClient(t, Options{}, f.cfg)
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(agenttest.Reply().Call(0, "call_1", "progress", `{"steps":2,"hold":true,"messages":false}`).Finish("tool_calls"))
	a := newAgent(t, c, model, &askingApprover{})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, stop := context.WithCancel(ctx)
	defer stop()
	var partial string
	var last agent.Chunk
	for ch, err := range a.Run(run, agent.Input{Message: "copy the files"}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		last = ch
		if ch.Tool != nil && ch.Tool.State == agent.StateExecuting {
			partial += ch.Tool.PartialResult
			if strings.Contains(partial, "step 2/2") {
				stop() // the tool holds on now
			}
		}
		if ch.Kind == agent.KindToolRejected {
			if ch.Tool.Cause != agent.CauseInterrupted || ch.Tool.PartialResult != "step 1/2\nstep 2/2\n" {
				t.Errorf("rejected call = %+v, want interrupted with the progress so far", ch.Tool)
			}
		}
	}
	if last.Kind != agent.KindInterrupted {
		t.Errorf("last chunk = %+v, want interrupted", last)
	}
}

// Arguments that do not fit the server's schema never reach the approver;
// configured tools skip approval; disabled tools are not offered.
func TestAgentSchemaApprovalConfig(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	f := newFixture(t, TransportHTTP)
	f.cfg.SkipApprovalTools = []string{"echo"}
	f.cfg.DisabledTools = []string{"spawn", "crash"}
	c := newClient(t, Options{}, f.cfg)
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(
		agenttest.Reply().Call(0, "call_1", "progress", `{"steps":"many"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_2", "echo", `{"text":"hi"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_3", "counter", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	approver := &askingApprover{}
	a := newAgent(t, c, model, approver)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := toolChunks(collect(t, a, ctx, agent.Input{Message: "go"}))

	if got := approver.names(); !slices.Equal(got, []string{"counter"}) {
		t.Errorf("the approver was asked about %v, want only the valid counter call", got)
	}
	var ends []string
	for _, tc := range calls {
		switch tc.State {
		case agent.StateResult:
			ends = append(ends, tc.ID+" result "+tc.Result)
		case agent.StateRejected:
			ends = append(ends, tc.ID+" rejected "+string(tc.Cause))
		case agent.StateApprovalRequired:
			if tc.Name == "echo" {
				t.Errorf("echo skips approval, but got %+v", tc)
			}
		}
	}
	want := []string{"call_1 rejected invalid_arguments", "call_2 result hi", "call_3 result 1"}
	if !slices.Equal(ends, want) {
		t.Errorf("calls ended %v, want %v", ends, want)
	}
	offered := model.Requests()[0].ToolNames()
	if slices.Contains(offered, "spawn") || slices.Contains(offered, "crash") || !slices.Contains(offered, "echo") {
		t.Errorf("offered tools %v, want echo and no disabled tool", offered)
	}
}
