package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// script is the model of the tests: a turn whose message says "weather"
// plans, calls get_weather(Lima) (ask_user_question with askArgs when the
// message also says "ask") and answers with the result; any other message
// gets a plain answer. A message that says "both" (and "weather") calls
// ask_user_question, then get_weather, in one round.
func script(req *agenttest.Request) agenttest.Response {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	continuing := false
	for _, m := range msgs {
		continuing = continuing || (m.Role == "user" && m.Content == "[continue]")
	}
	switch {
	case last.Role == "tool":
		return agenttest.Reply().Text("It is ", last.Content, ".").Finish("stop")
	case len(req.Tools) > 0 && strings.Contains(lastUser(msgs), "both"):
		return agenttest.Reply().Call(0, "call_1", "ask_user_question", askArgs).
			Call(1, "call_2", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	case len(req.Tools) > 0 && strings.Contains(lastUser(msgs), "ask"):
		return agenttest.Reply().Call(0, "call_1", "ask_user_question", askArgs).Finish("tool_calls")
	case len(req.Tools) > 0:
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	case continuing:
		return agenttest.Reply().Text("Done.").Finish("stop")
	case strings.Contains(lastUser(msgs), "weather"):
		return agenttest.Reply().Text("Let me look that up. <need_tool>").Finish("stop")
	}
	return agenttest.Reply().Text("Hello! <no_tool>").Finish("stop")
}

// askArgs are the arguments of the script's ask_user_question call: one
// single choice question, "city".
const askArgs = `{"questions":[{"id":"city","question":"Which city?","kind":"single","options":["Lima","Quito"]}]}`

func lastUser(msgs []agenttest.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && msgs[i].Content != "[continue]" {
			return msgs[i].Content
		}
	}
	return ""
}

// model starts the scripted model server.
func model(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	srv.Respond(script)
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
	})
	return srv
}

// replica is one process of a test: a Runner on the shared store.
type replica struct {
	r *runner.Runner
}

// options of a replica.
type options struct {
	holder       string
	ttl          time.Duration
	sweep        time.Duration
	suspendAfter time.Duration
	// forms adds ask_user_question.
	forms bool
	// weather replaces get_weather (which counts its runs).
	weather agent.Tool
	// policies decide calls without a person.
	policies []approval.Policy
}

// newReplica starts a replica on st. runs counts get_weather's executions.
func newReplica(t *testing.T, st memory.Store, srv *agenttest.Server, runs *atomic.Int32, o options) *replica {
	t.Helper()
	list := []agent.Tool{o.weather}
	if o.weather == nil {
		list[0] = weather(runs)
	}
	if o.forms {
		list = append(list, interact.AskUserQuestion())
	}
	tools, err := agent.NewToolRegistry(list...)
	require.NoError(t, err)
	r, err := runner.New(runner.Config{
		Store: st,
		Agent: agent.Config{
			BaseURL:    srv.URL(),
			APIKey:     "test-key",
			HTTPClient: srv.Client(),
			Model:      "test-model",
			Tools:      tools,
		},
		Policies:      o.policies,
		SuspendAfter:  o.suspendAfter,
		Holder:        o.holder,
		LeaseTTL:      o.ttl,
		SweepInterval: o.sweep,
	})
	require.NoError(t, err)
	rep := &replica{r: r}
	t.Cleanup(rep.close)
	return rep
}

// close stops the replica as a process that shuts down does.
func (p *replica) close() {
	p.r.Close()
}

// weather is get_weather, counting its runs.
func weather(runs *atomic.Int32) agent.Tool {
	type args struct {
		City string `json:"city"`
	}
	return agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in args, _ agent.Progress) (string, error) {
		runs.Add(1)
		return "sunny in " + in.City, nil
	})
}

// testContext is a context that ends with the test, or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// follow collects a session's events from a subscription in the
// background; wait returns them once one matches.
type follow struct {
	t      *testing.T
	events chan runner.Event
	errs   chan error
	seen   []runner.Event
}

func subscribe(ctx context.Context, t *testing.T, r *runner.Runner, session string, after int64) *follow {
	t.Helper()
	f := &follow{t: t, events: make(chan runner.Event, 1024), errs: make(chan error, 1)}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for e, err := range r.Subscribe(ctx, session, after) {
			if err != nil {
				f.errs <- err
				return
			}
			f.events <- e
		}
	}()
	return f
}

// waitFor returns the events up to the first one that matches.
func (f *follow) waitFor(ctx context.Context, what string, match func(runner.Event) bool) runner.Event {
	f.t.Helper()
	for {
		select {
		case e := <-f.events:
			f.seen = append(f.seen, e)
			if match(e) {
				return e
			}
		case err := <-f.errs:
			f.t.Fatalf("waiting for %s: the subscription ended: %v", what, err)
		case <-ctx.Done():
			f.t.Fatalf("waiting for %s: %v; seen %s", what, ctx.Err(), describe(f.seen))
		}
	}
}

func describe(evs []runner.Event) string {
	var parts []string
	for _, e := range evs {
		s := string(e.Kind)
		if e.Chunk != nil {
			s = e.Chunk.Kind.String()
			if e.Chunk.Tool != nil {
				s += ":" + string(e.Chunk.Tool.State)
			}
		}
		if e.Ended != nil {
			s += ":" + string(e.Ended.Status)
		}
		parts = append(parts, s)
	}
	b, _ := json.Marshal(parts)
	return string(b)
}

func isState(s agent.ToolState) func(runner.Event) bool {
	return func(e runner.Event) bool { return e.Chunk != nil && e.Chunk.Tool != nil && e.Chunk.Tool.State == s }
}

func isEnd(s runner.Status) func(runner.Event) bool {
	return func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded && e.Ended.Status == s }
}

// approve is the approval of the call of an approval_required chunk, bound
// to that call as a front end's decision is.
func approve(session string, call *agent.ToolCall) runner.Reply {
	return runner.Reply{SessionID: session, ApprovalID: call.ApprovalID, CallID: call.ID, Tool: call.Name,
		ArgumentsDigest: call.ArgumentsDigest, Decision: agent.Decision{Approved: true}}
}

// startWaiting starts a turn of session s1 that asks about get_weather on
// r, and returns it with its approval_required event, which f (following
// s1) saw.
func startWaiting(ctx context.Context, t *testing.T, r *runner.Runner, f *follow) (*runner.Turn, runner.Event) {
	t.Helper()
	turn, err := r.Start(ctx, agent.Input{SessionID: "s1", Message: "weather in Lima?"})
	require.NoError(t, err)
	return turn, f.waitFor(ctx, "approval_required", isState(agent.StateApprovalRequired))
}
