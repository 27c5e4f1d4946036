package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// forms backs fill_form, a resumable tool that waits for a person's answer
// as ask_user_question does: one form per call key (per call id without
// one), shown by the call's side message; Execute returns the answer when
// there is one, else suspends the run with the form's id (agent.Suspend),
// or, with block set, writes "waiting" and waits until its context ends,
// returning the context's cause.
type forms struct {
	resumable bool // the tool's Definition says Resumable
	block     bool

	mu      sync.Mutex
	next    int
	byKey   map[string]string // form ids by call key
	answers map[string]string // by form id
	runs    []agent.CallInfo  // the call of each Execute
	sides   []agent.CallInfo  // the call of each SideMessage
}

func newForms() *forms {
	return &forms{resumable: true, byKey: map[string]string{}, answers: map[string]string{}}
}

// form returns the form id of the call info; f.mu is held.
func (f *forms) form(info agent.CallInfo) string {
	key := info.Key
	if key == "" {
		key = "call:" + info.CallID
	}
	id, ok := f.byKey[key]
	if !ok {
		f.next++
		id = fmt.Sprintf("form-%d", f.next)
		f.byKey[key] = id
	}
	return id
}

func (f *forms) answer(id, a string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[id] = a
}

func (f *forms) calls() (runs, sides []agent.CallInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.CallInfo(nil), f.runs...), append([]agent.CallInfo(nil), f.sides...)
}

type formTool struct{ f *forms }

func (t formTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{
		Name:        "fill_form",
		Description: "Ask the user a question in a form",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"question": map[string]any{"type": "string"}},
			"required":   []string{"question"},
		},
		Resumable: t.f.resumable,
	}
}

func (t formTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	info, _ := agent.CallFromContext(ctx)
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.sides = append(t.f.sides, info)
	return map[string]string{"form": t.f.form(info)}, nil
}

func (t formTool) Execute(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
	info, _ := agent.CallFromContext(ctx)
	t.f.mu.Lock()
	t.f.runs = append(t.f.runs, info)
	id := t.f.form(info)
	a, ok := t.f.answers[id]
	t.f.mu.Unlock()
	switch {
	case ok:
		return "answer: " + a, nil
	case t.f.block:
		p.WriteString("waiting")
		<-ctx.Done()
		return "", context.Cause(ctx)
	}
	return "", agent.Suspend(id)
}

// countingApprover approves every call as a person does (a pending ticket
// with the id "appr-<n>", decided when waited for) and counts the requests.
type countingApprover struct {
	asked     atomic.Int32
	mu        sync.Mutex
	cancelled []string
}

func (c *countingApprover) Request(context.Context, agent.ApprovalRequest) (agent.Ticket, error) {
	id := fmt.Sprintf("appr-%d", c.asked.Add(1))
	return agent.Pending(id, func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }), nil
}

func (c *countingApprover) CancelApproval(_ context.Context, _, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = append(c.cancelled, id)
	return nil
}

// formTurn scripts a turn that calls fill_form.
func formTurn(srv *agenttest.Server) {
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "fill_form", `{"question":"Seat?"}`).Finish("tool_calls"))
}

// TestResumableToolSuspendsAndRunsAgain: a resumable tool that waits for a
// person suspends the run (agent.Suspend): the call's executing and side
// chunks, then suspended, no tool message, and the call's open record stays
// executing and names the form. Each resumed turn runs the call again with
// the same key, without asking the Approver again: still unanswered, it
// suspends again; answered, its result reaches the model and the turn ends.
func TestResumableToolSuspendsAndRunsAgain(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			log := st.(memory.CallLog)
			srv := newServer(t)
			formTurn(srv)
			f := newForms()
			ap := &countingApprover{}
			rec := newRecording(t)
			a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Store = st; c.Approver = ap }, formTool{f})

			turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "Book me a seat"})
			chunks, err := collect(turn.Run(ctx))
			require.NoError(t, err)
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:fill_form", "tool:approval_required:fill_form",
				"tool:executing:fill_form", "side", "suspended"}, trace(chunks))
			validHistory(t, agent.History(chunks))
			assert.Equal(t, []string{"user:Book me a seat", "assistant:Let me look that up. <need_tool>", "assistant:"}, contents(turn.Messages()),
				"the waiting call has no tool message")
			assert.Equal(t, "suspended", attrs(rec.one(t, "execute_tool fill_form"))["planround.outcome"])
			assert.Equal(t, "suspended", attrs(rec.one(t, "invoke_agent"))["planround.outcome"])
			open, err := log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.True(t, open[0].Executing)
			assert.Equal(t, "form-1", open[0].ApprovalID, "the record names what the call waits for")
			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			assert.Equal(t, []string{"user:Book me a seat", "assistant:Let me look that up. <need_tool>", "assistant:"}, contents(msgs))

			// Not answered yet: the resumed turn runs the call again, and
			// it suspends again on the same form.
			chunks, err = collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:fill_form", "side", "suspended"}, trace(chunks))
			assert.Equal(t, map[string]string{"form": "form-1"}, chunks[1].Side)
			open, err = log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.True(t, open[0].Executing)
			assert.Equal(t, "form-1", open[0].ApprovalID)

			f.answer("form-1", "window")
			srv.Enqueue(agenttest.Reply().Text("Window seat it is.").Finish("stop"))
			chunks, err = collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:fill_form", "side", "tool:result:fill_form", "round_end:1", "text", "round_end:2"}, trace(chunks))
			assert.Equal(t, int32(1), ap.asked.Load(), "approved once, before the call first started")
			runs, sides := f.calls()
			require.Len(t, runs, 3)
			require.Len(t, sides, 3)
			key := fmt.Sprintf("%d/call_1", open[0].MessageID)
			for i, info := range append(runs, sides...) {
				assert.Equal(t, key, info.Key, "call %d runs under the call's key", i)
				assert.Equal(t, "call_1", info.CallID)
			}
			assert.Equal(t, "appr-1", runs[0].ApprovalID)
			assert.Empty(t, runs[2].ApprovalID, "a call run again was not waited for")

			reqs := srv.Requests()
			last := reqs[len(reqs)-1].Messages
			assert.Equal(t, "answer: window", last[len(last)-1].Content, "the model reads the answer")
			msgs, err = st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, []string{"user:Book me a seat", "assistant:Let me look that up. <need_tool>", "assistant:", "tool:answer: window", "assistant:Window seat it is."}, contents(msgs))
			open, err = log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			assert.Empty(t, open)
		})
	}
}

// TestResumableToolSuspendedByHost: a host that shuts down (the run's
// context cancelled with the cause ErrSuspended) while a resumable tool
// waits suspends the run: the call stays open, executing, with the output
// it wrote and the approval id its record had (the tool named no wait);
// the resumed turn runs it again. A tool that is not resumable is
// interrupted as before, and its call is closed.
func TestResumableToolSuspendedByHost(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			log := st.(memory.CallLog)
			srv := newServer(t)
			formTurn(srv)
			f := newForms()
			f.block = true
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = &countingApprover{} }, formTool{f})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var chunks []agent.Chunk
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Book me a seat"}) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.PartialResult == "waiting" {
					cancel(fmt.Errorf("shutting down: %w", agent.ErrSuspended))
				}
			}
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:fill_form", "tool:approval_required:fill_form",
				"tool:executing:fill_form", "side", "tool:progress:fill_form", "suspended"}, trace(chunks))
			open, err := log.OpenCalls(context.Background(), "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.True(t, open[0].Executing)
			assert.Equal(t, "appr-1", open[0].ApprovalID, "kept as it was: the tool named no wait")
			assert.Equal(t, "waiting", open[0].Partial)

			f.block = false
			f.answer("form-1", "aisle")
			srv.Enqueue(agenttest.Reply().Text("Aisle.").Finish("stop"))
			chunks, err = collect(a.Resume(context.Background(), "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:fill_form", "side", "tool:result:fill_form", "round_end:1", "text", "round_end:2"}, trace(chunks))
			msgs, err := st.Messages(context.Background(), "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, "tool:answer: aisle", contents(msgs)[3])
		})
	}

	t.Run("not resumable", func(t *testing.T) {
		leaktest.Check(t)
		st := &memory.MemStore{}
		srv := newServer(t)
		formTurn(srv)
		f := newForms()
		f.block, f.resumable = true, false
		a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = &countingApprover{} }, formTool{f})
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var chunks []agent.Chunk
		for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Book me a seat"}) {
			require.NoError(t, err)
			chunks = append(chunks, c)
			if c.Kind == agent.KindToolCall && c.Tool.PartialResult == "waiting" {
				cancel(fmt.Errorf("shutting down: %w", agent.ErrSuspended))
			}
		}
		assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:fill_form", "tool:approval_required:fill_form",
			"tool:executing:fill_form", "side", "tool:progress:fill_form", "rejected:fill_form:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, trace(chunks))
		open, err := st.OpenCalls(context.Background(), "s1")
		require.NoError(t, err)
		assert.Empty(t, open)
		msgs, err := st.Messages(context.Background(), "s1", false)
		require.NoError(t, err)
		validHistory(t, msgs)
	})
}

// TestSuspendedErrorIsAToolError: ErrSuspended from a tool that is not
// resumable, or from a resumable one in a run without open-call records,
// is an ordinary tool error: the model reads it and the run goes on.
func TestSuspendedErrorIsAToolError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resumable bool
		store     bool
	}{
		{"not resumable, with a CallLog", false, true},
		{"resumable, without a CallLog", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			srv := newServer(t)
			formTurn(srv)
			srv.Enqueue(agenttest.Reply().Text("The form did not work.").Finish("stop"))
			f := newForms()
			f.resumable = tc.resumable
			st := &memory.MemStore{}
			a := newAgent(t, srv, func(c *agent.Config) {
				if tc.store {
					c.Store = st
				}
			}, formTool{f})
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Book me a seat"}))
			require.NoError(t, err)
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:fill_form", "tool:approval_required:fill_form",
				"tool:executing:fill_form", "side", "tool:result:fill_form", "round_end:1", "text", "round_end:2"}, trace(chunks))
			result := results(chunks)["call_1"]
			assert.Equal(t, "error: "+agent.Suspend("form-1").Error(), result)
			reqs := srv.Requests()
			last := reqs[len(reqs)-1].Messages
			assert.Equal(t, result, last[len(last)-1].Content, "the model reads the error")
			if tc.store {
				open, err := st.OpenCalls(ctx, "s1")
				require.NoError(t, err)
				assert.Empty(t, open)
			}
		})
	}
}

// TestNewMessageCancelsResumableWait: a new user message on a session whose
// resumable call waits closes the call as stopped, as any call found
// executing, and cancels the form its record names through the Approver,
// so that nobody can answer it; the tool never runs again.
func TestNewMessageCancelsResumableWait(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			formTurn(srv)
			f := newForms()
			ap := &countingApprover{}
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = ap }, formTool{f})
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Book me a seat"}))
			require.NoError(t, err)
			require.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)

			srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hello.").Finish("stop"))
			chunks, err = collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Never mind."}))
			require.NoError(t, err)
			assert.Equal(t, []string{"rejected:fill_form:" + agent.CauseStopped.DefaultReason(), "text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
			assert.Equal(t, agent.CauseStopped, chunks[0].Tool.Cause)
			assert.Equal(t, []string{"form-1"}, ap.cancelled, "the form stops being answerable")
			runs, _ := f.calls()
			assert.Len(t, runs, 1, "never run again")

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, ended{memory.OutcomeRejected, "stopped"}, endings(msgs)["call_1"])
			open, err := st.(memory.CallLog).OpenCalls(ctx, "s1")
			require.NoError(t, err)
			assert.Empty(t, open)
		})
	}
}

// TestParallelResumableSuspendKeepsResults: with ParallelTools, a resumable
// call that suspends waits for the round's other calls: a call that
// returned meanwhile keeps its result (chunk and tool message, out of call
// order), the suspended chunk comes last, and only the waiting call stays
// open. The resumed turn runs it alone.
func TestParallelResumableSuspendKeepsResults(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), agenttest.Reply().
				Call(0, "call_1", "fill_form", `{"question":"Seat?"}`).
				Call(1, "call_2", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"))
			f := newForms()
			var weather atomic.Int32
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.ParallelTools = true }, formTool{f}, countingWeather(&weather))
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Seat and weather?"}))
			require.NoError(t, err)
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:fill_form", "tool:start:get_weather",
				"tool:approval_required:fill_form", "tool:approval_required:get_weather", "tool:executing:fill_form", "side",
				"tool:executing:get_weather", "tool:result:get_weather", "suspended"}, trace(chunks))
			assert.Equal(t, map[string]string{"call_2": "sunny in Lima"}, results(chunks))
			assert.Equal(t, int32(1), weather.Load())
			open, err := st.(memory.CallLog).OpenCalls(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.Equal(t, "call_1", open[0].CallID)
			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			assert.Equal(t, []string{"user:Seat and weather?", "assistant:Let me look that up. <need_tool>", "assistant:", "tool:sunny in Lima"}, contents(msgs))

			f.answer("form-1", "window")
			srv.Enqueue(agenttest.Reply().Text("Window, and sunny.").Finish("stop"))
			chunks, err = collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:fill_form", "side", "tool:result:fill_form", "round_end:1", "text", "round_end:2"}, trace(chunks))
			assert.Equal(t, int32(1), weather.Load(), "the call that had returned never runs again")
			msgs, err = st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, map[string]ended{"call_1": {memory.OutcomeResult, ""}, "call_2": {memory.OutcomeResult, ""}}, endings(msgs))
		})
	}
}
