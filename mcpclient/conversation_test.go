package mcpclient

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// callAs runs a turn of the conversation (session) in which the model calls
// the tool once, and returns the call's last chunk.
func callAs(t *testing.T, c *Client, session, name, args string) agent.ToolCall {
	t.Helper()
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		if req.LastMessage().Role == "tool" {
			return agenttest.Reply().Text("ok").Finish("stop")
		}
		return agenttest.Reply().Call(0, "call_1", name, args).Finish("tool_calls")
	})
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:         "http://model.invalid/v1",
		HTTPClient:      &http.Client{Transport: model},
		Model:           "any",
		Tools:           reg,
		DisablePlanning: true,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := toolChunks(collect(t, a, ctx, agent.Input{SessionID: session, Message: "go"}))
	if len(calls) == 0 {
		t.Fatal("no tool call")
	}
	return calls[len(calls)-1]
}

// Each conversation gets its own instance of a per_conversation server:
// state in one is invisible to the other, and ending a conversation ends
// its process.
func TestPerConversationInstances(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "sandboxed", "server")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)
	if st := c.Servers()[0]; st.State != StateOnDemand || len(st.Tools) != len(testTools) || st.PID != 0 {
		t.Errorf("status = %+v, want on demand with the probed tools", st)
	}

	for _, step := range []struct{ session, want string }{{"a", "1"}, {"a", "2"}, {"b", "1"}, {"a", "3"}} {
		if got := callAs(t, c, step.session, "count", `{}`); got.Result != step.want {
			t.Errorf("count in %s = %q, want %q", step.session, got.Result, step.want)
		}
	}
	pa, _ := strconv.Atoi(callAs(t, c, "a", "pid", `{}`).Result)
	pb, _ := strconv.Atoi(callAs(t, c, "b", "pid", `{}`).Result)
	if pa == 0 || pb == 0 || pa == pb {
		t.Fatalf("pids %d and %d, want two processes", pa, pb)
	}
	if n := c.Servers()[0].Instances; n != 2 {
		t.Errorf("instances = %d, want 2", n)
	}

	c.CloseConversation("a")
	waitFor(t, "the ended conversation's process is gone", func() bool { return processGone(pa) })
	if processGone(pb) {
		t.Error("the other conversation's process is gone too")
	}
	if got := callAs(t, c, "a", "count", `{}`); got.Result != "1" {
		t.Errorf("count after the conversation was closed = %q, want a fresh instance", got.Result)
	}

	got := callAs(t, c, "", "count", `{}`)
	if !strings.Contains(got.Result, "belongs to none") {
		t.Errorf("a call without a session: %+v, want an error for the model", got)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pb) {
		t.Error("Close left a conversation's process running")
	}
}

// A conversation whose instance crashed gets a fresh one on its next call.
func TestPerConversationCrash(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "sandboxed", "server")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)

	callAs(t, c, "a", "count", `{}`)
	if got := callAs(t, c, "a", "crash", `{}`); !strings.Contains(got.Result, "exit status 3") {
		t.Errorf("crash: %+v, want the exit in the error", got)
	}
	if got := callAs(t, c, "a", "count", `{}`); got.Result != "1" {
		t.Errorf("count after the crash = %q, want a fresh instance", got.Result)
	}
}
