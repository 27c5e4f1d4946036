package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/drive"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// keeper is an Approver that keeps its approvals beyond a run, as the
// runner's durable approvals do: one approval per request key, so that a request
// with the key of an earlier one gets that approval back (its decision, or
// pending again with the same id); a pending ticket's Wait returns
// ErrSuspended unless a decision is there, or waits for one when wait is
// set.
type keeper struct {
	mu        sync.Mutex
	next      int
	decisions map[string]*agent.Decision // by approval id; nil: pending
	byKey     map[string]string          // approval ids by request key
	requests  []agent.ApprovalRequest
	cancelled []string
	wait      bool
	decided   chan struct{} // closed by decide when wait is set
}

func newKeeper() *keeper {
	return &keeper{decisions: map[string]*agent.Decision{}, byKey: map[string]string{}, decided: make(chan struct{})}
}

func (k *keeper) Request(_ context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, req)
	id, ok := k.byKey[req.Key]
	switch {
	case !ok || req.Key == "":
		k.next++
		id = fmt.Sprintf("appr-%d", k.next)
		k.decisions[id] = nil
		if req.Key != "" {
			k.byKey[req.Key] = id
		}
	case k.decisions[id] != nil:
		return agent.Decided(*k.decisions[id]), nil
	}
	return agent.Pending(id, func(ctx context.Context) (agent.Decision, error) {
		if k.wait {
			select {
			case <-k.decided:
			case <-ctx.Done():
				return agent.Decision{}, ctx.Err()
			}
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if d := k.decisions[id]; d != nil {
			return *d, nil
		}
		if ctx.Err() != nil {
			return agent.Decision{}, ctx.Err()
		}
		return agent.Decision{}, agent.ErrSuspended
	}), nil
}

func (k *keeper) decide(id string, d agent.Decision) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if d.Approved == false && d.Cause == "" {
		d.Cause = agent.CauseUser
	}
	k.decisions[id] = &d
}

func (k *keeper) CancelApproval(_ context.Context, sessionID, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancelled = append(k.cancelled, id)
	return nil
}

// countingWeather is get_weather counting its runs.
func countingWeather(runs *atomic.Int32) agent.Tool {
	w := weatherTool().(agent.FuncTool)
	fn := w.Fn
	w.Fn = func(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
		runs.Add(1)
		return fn(ctx, args, p)
	}
	return w
}

// openTurn scripts a turn that stops at the approval of get_weather(Lima).
func openTurn(srv *agenttest.Server) {
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"))
}

// TestSuspendThenResume: an approver that says "not now" suspends the run:
// it ends with a suspended chunk and no error, the call stays open in the
// Store with its approval id, and nothing of it is answered. Resume after
// the decision runs the call once, with no new approval card, and finishes
// the turn; the history is valid and whole.
func TestSuspendThenResume(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			openTurn(srv)
			k := newKeeper()
			var runs atomic.Int32
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))

			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
			require.NoError(t, err)
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:get_weather", "tool:approval_required:get_weather", "suspended"}, trace(chunks))
			id := chunks[len(chunks)-2].Tool.ApprovalID
			require.Equal(t, "appr-1", id)
			assert.Zero(t, runs.Load())

			log := st.(memory.CallLog)
			open, err := log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.Equal(t, memory.OpenCall{MessageID: open[0].MessageID, CallID: "call_1", Round: 1, ApprovalID: id, UpdatedAt: open[0].UpdatedAt}, open[0])
			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			assert.Equal(t, []string{"user:Weather in Lima?", "assistant:Let me look that up. <need_tool>", "assistant:"}, contents(msgs), "the call is open, not answered")

			k.decide(id, agent.Decision{Approved: true})
			srv.Enqueue(agenttest.Reply().Text("Sunny in Lima.").Finish("stop"))
			chunks, err = collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:get_weather", "tool:result:get_weather", "round_end:1", "text", "round_end:2"}, trace(chunks))
			assert.Equal(t, int32(1), runs.Load())
			require.Len(t, k.requests, 2)
			assert.Equal(t, fmt.Sprintf("%d/call_1", open[0].MessageID), k.requests[0].Key, "the key names the stored message and the call")
			assert.Equal(t, k.requests[0].Key, k.requests[1].Key, "the resumed turn asks about the call by the same key")

			// The model saw the turn so far, then the result.
			reqs := srv.Requests()
			last := reqs[len(reqs)-1].Messages
			assert.Equal(t, "tool", last[len(last)-1].Role)
			assert.Equal(t, "sunny in Lima", last[len(last)-1].Content)

			msgs, err = st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, []string{"user:Weather in Lima?", "assistant:Let me look that up. <need_tool>", "assistant:", "tool:sunny in Lima", "assistant:Sunny in Lima."}, contents(msgs))
			open, err = log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			assert.Empty(t, open, "an answered call is no longer open")

			_, err = collect(a.Resume(ctx, "s1"))
			assert.ErrorIs(t, err, agent.ErrNothingToResume)
		})
	}
}

// TestResumeUndecidedShowsTheSameApproval: a resumed call whose approval
// is still undecided is approval_required again with the same approval id,
// and a rejection then closes the turn as in Run.
func TestResumeUndecidedShowsTheSameApproval(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	var runs atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)

	chunks, err := collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"tool:approval_required:get_weather", "suspended"}, trace(chunks))
	assert.Equal(t, "appr-1", chunks[0].Tool.ApprovalID)
	assert.JSONEq(t, `{"city":"Lima"}`, string(chunks[0].Tool.Arguments))

	k.decide("appr-1", agent.Decision{Approved: false, Reason: "not today"})
	chunks, err = collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"rejected:get_weather:not today", "interrupted"}, trace(chunks), "a rejection ends the run by default")
	assert.Equal(t, agent.CauseUser, chunks[0].Tool.Cause)
	assert.Zero(t, runs.Load())
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
	assert.Equal(t, "tool:not today", contents(msgs)[len(msgs)-1])
}

// TestResumeNeverRerunsAnExecutingCall: a call found executing (its process
// stopped while the tool ran) is rejected with CauseStopped and the output
// it had saved; the tool does not run again, and the turn goes on.
func TestResumeNeverRerunsAnExecutingCall(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			log := st.(memory.CallLog)
			_, err := st.CreateSession(ctx, memory.Session{ID: "s1"})
			require.NoError(t, err)
			stored, err := st.Append(ctx, "s1",
				memory.Message{Role: memory.RoleUser, Content: "Weather in Lima?"},
				memory.Message{Role: memory.RoleAssistant, Content: "Looking. <need_tool>"},
				memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lima"}`)}}})
			require.NoError(t, err)
			require.NoError(t, log.SaveCall(ctx, "s1", memory.OpenCall{MessageID: stored[2].ID, CallID: "call_1", Round: 1, ApprovalID: "appr-9", Executing: true, Partial: "half way"}))

			srv := newServer(t)
			srv.Enqueue(agenttest.Reply().Text("The lookup was cut.").Finish("stop"))
			var runs atomic.Int32
			k := newKeeper()
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))
			chunks, err := collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"rejected:get_weather:" + agent.CauseStopped.DefaultReason(), "round_end:1", "text", "round_end:2"}, trace(chunks))
			assert.Equal(t, agent.CauseStopped, chunks[0].Tool.Cause)
			assert.Equal(t, "half way", chunks[0].Tool.PartialResult)
			assert.Zero(t, runs.Load(), "never run again")
			assert.Empty(t, k.requests, "nobody is asked about it")

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, "tool:half way\n["+agent.CauseStopped.DefaultReason()+"]", contents(msgs)[3])
			assert.Equal(t, ended{memory.OutcomeRejected, "stopped"}, endings(msgs)["call_1"], "the history says the call was cut by the stop")
		})
	}
}

// TestNewMessageClosesOpenCalls: a new user message on a session whose
// last turn has open calls rejects them first (CauseMovedOn, and the
// approver's CancelApproval), so the history stays valid for the model.
func TestNewMessageClosesOpenCalls(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	var runs atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)

	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hello.").Finish("stop"))
	chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Never mind."}))
	require.NoError(t, err)
	assert.Equal(t, []string{"rejected:get_weather:" + agent.CauseMovedOn.DefaultReason(), "text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
	assert.Equal(t, agent.CauseMovedOn, chunks[0].Tool.Cause)
	assert.Equal(t, 1, chunks[0].Round)
	assert.Equal(t, []string{"appr-1"}, k.cancelled)
	assert.Zero(t, runs.Load())

	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
	assert.Equal(t, []string{"user:Weather in Lima?", "assistant:Let me look that up. <need_tool>", "assistant:", "tool:" + agent.CauseMovedOn.DefaultReason(),
		"user:Never mind.", "assistant:Hello! I can answer that.<no_tool>", "assistant:Hello."}, contents(msgs))
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	assert.Empty(t, open)
	_, err = collect(a.Resume(ctx, "s1"))
	assert.ErrorIs(t, err, agent.ErrNothingToResume)
}

// TestNewMessageClosesOpenCallsByState: a new user message closes each open
// call of the last turn by the state it was left in, as Resume would: a call
// cut while it ran keeps its partial output (CauseStopped), a decided
// rejection keeps its cause and reason, an approved call that never ran is
// not_run, and only the undecided one is moved on (its approval cancelled).
func TestNewMessageClosesOpenCallsByState(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			log, approvals := st.(memory.CallLog), st.(memory.ApprovalStore)
			_, err := st.CreateSession(ctx, memory.Session{ID: "s1"})
			require.NoError(t, err)
			var calls []memory.ToolCall
			for _, id := range []string{"run", "no", "yes", "wait", "keyed", "keyed-no"} {
				calls = append(calls, memory.ToolCall{ID: id, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lima"}`)})
			}
			stored, err := log.AppendCalls(ctx, "s1", []memory.OpenCall{
				{CallID: "run", Round: 1, ApprovalID: "ap-run", Executing: true, Partial: "half way"},
				{CallID: "no", Round: 1, ApprovalID: "ap-no"},
				{CallID: "yes", Round: 1, ApprovalID: "ap-yes"},
				{CallID: "wait", Round: 1, ApprovalID: "ap-wait"},
				// The process stopped after the Approver registered these
				// approvals and before their ids were saved in the records:
				// the Store has them under the calls' keys only.
				{CallID: "keyed", Round: 1},
				{CallID: "keyed-no", Round: 1},
			}, memory.Message{Role: memory.RoleUser, Content: "Weather in Lima?"},
				memory.Message{Role: memory.RoleAssistant, Content: "Looking. <need_tool>", ToolCalls: calls})
			require.NoError(t, err)
			require.Len(t, stored, 2)
			for _, c := range []string{"no", "yes", "wait"} {
				require.NoError(t, approvals.CreateApproval(ctx, memory.Approval{ID: "ap-" + c, SessionID: "s1", CallID: c, Tool: "get_weather", Round: 1}))
			}
			for _, c := range []string{"keyed", "keyed-no"} {
				require.NoError(t, approvals.CreateApproval(ctx, memory.Approval{ID: "ap-" + c, SessionID: "s1", CallID: c, Tool: "get_weather", Round: 1,
					Key: fmt.Sprintf("%d/%s", stored[1].ID, c)}))
			}
			_, err = approvals.DecideApproval(ctx, "s1", "ap-no", memory.ApprovalDecision{Reason: "not Lima", Cause: string(agent.CauseUser)})
			require.NoError(t, err)
			_, err = approvals.DecideApproval(ctx, "s1", "ap-keyed-no", memory.ApprovalDecision{Reason: "not there", Cause: string(agent.CauseUser)})
			require.NoError(t, err)
			_, err = approvals.DecideApproval(ctx, "s1", "ap-yes", memory.ApprovalDecision{Approved: true})
			require.NoError(t, err)

			srv := newServer(t)
			srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hello.").Finish("stop"))
			k := newKeeper()
			var runs atomic.Int32
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Never mind."}))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(chunks), 6)
			type closed struct {
				id      string
				cause   agent.Cause
				reason  string
				partial string
			}
			var got []closed
			for _, c := range chunks[:6] {
				require.Equal(t, agent.KindToolRejected, c.Kind)
				got = append(got, closed{c.Tool.ID, c.Tool.Cause, c.Tool.Reason, c.Tool.PartialResult})
			}
			assert.Equal(t, []closed{
				{"run", agent.CauseStopped, agent.CauseStopped.DefaultReason(), "half way"},
				{"no", agent.CauseUser, "not Lima", ""},
				{"yes", agent.CauseNotRun, agent.CauseNotRun.DefaultReason(), ""},
				{"wait", agent.CauseMovedOn, agent.CauseMovedOn.DefaultReason(), ""},
				{"keyed", agent.CauseMovedOn, agent.CauseMovedOn.DefaultReason(), ""},
				{"keyed-no", agent.CauseUser, "not there", ""},
			}, got)
			assert.Equal(t, []string{"ap-wait", "ap-keyed"}, k.cancelled, "only the undecided approvals are cancelled, also one found by its call's key")
			assert.Zero(t, runs.Load())

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, []string{"user:Weather in Lima?", "assistant:Looking. <need_tool>",
				"tool:half way\n[" + agent.CauseStopped.DefaultReason() + "]", "tool:not Lima", "tool:" + agent.CauseNotRun.DefaultReason(), "tool:" + agent.CauseMovedOn.DefaultReason(),
				"tool:" + agent.CauseMovedOn.DefaultReason(), "tool:not there",
				"user:Never mind.", "assistant:Hello! I can answer that.<no_tool>", "assistant:Hello."}, contents(msgs))
			assert.Equal(t, map[string]ended{
				"run":      {memory.OutcomeRejected, "stopped"},
				"no":       {memory.OutcomeRejected, "user"},
				"yes":      {memory.OutcomeRejected, "not_run"},
				"wait":     {memory.OutcomeRejected, "moved_on"},
				"keyed":    {memory.OutcomeRejected, "moved_on"},
				"keyed-no": {memory.OutcomeRejected, "user"},
			}, endings(msgs), "the history says how each open call was closed")
		})
	}
}

// TestSuspendByContextCause: cancelling a run that waits for an approval
// with the cause ErrSuspended (a host that shuts down) suspends it instead
// of interrupting it: the approval stays open for a resumed turn.
func TestSuspendByContextCause(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	k.wait = true
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, weatherTool())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var chunks []agent.Chunk
	for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			cancel(fmt.Errorf("shutting down: %w", agent.ErrSuspended))
		}
	}
	assert.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)
	open, err := st.OpenCalls(context.Background(), "s1")
	require.NoError(t, err)
	require.Len(t, open, 1)
	assert.Equal(t, "appr-1", open[0].ApprovalID)
	assert.False(t, open[0].Executing)

	// A plain cancel interrupts as before: the call is closed.
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_2", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	for c, err := range a.Run(ctx2, agent.Input{SessionID: "s1", Message: "Oslo then?"}) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			cancel2()
		}
	}
	open, err = st.OpenCalls(context.Background(), "s1")
	require.NoError(t, err)
	assert.Empty(t, open)
	msgs, err := st.Messages(context.Background(), "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
}

// TestApprovalIDRecordedAfterTheTicket: with a CallLog, nothing is written
// to a call's open record before the Approver is asked (the record, stored
// with the round, names no approval then); the ticket's id is recorded once
// the Approver registered it, before the card that shows it. The request
// names the call by its durable key, "<stored message id>/<call id>"; the
// in-memory runs, without a CallLog, have no key.
func TestApprovalIDRecordedAfterTheTicket(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			openTurn(srv)
			log := st.(memory.CallLog)
			var asked []agent.ApprovalRequest
			var atRequest []memory.OpenCall
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Store = st
				c.Approver = approverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
					asked = append(asked, req)
					open, err := log.OpenCalls(ctx, req.SessionID)
					if err != nil {
						return agent.Ticket{}, err
					}
					atRequest = append(atRequest, open...)
					return agent.Pending("ticket-7", func(context.Context) (agent.Decision, error) {
						return agent.Decision{}, agent.ErrSuspended
					}), nil
				})
			}, weatherTool())

			var chunks []agent.Chunk
			var atCard []memory.OpenCall
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
					atCard, err = log.OpenCalls(ctx, "s1")
					require.NoError(t, err)
				}
			}
			assert.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)
			require.Len(t, asked, 1)
			require.Len(t, atRequest, 1)
			assert.Empty(t, atRequest[0].ApprovalID, "no approval id is written before the Approver is asked")
			assert.Equal(t, fmt.Sprintf("%d/call_1", atRequest[0].MessageID), asked[0].Key)
			assert.Regexp(t, `^[1-9][0-9]*/call_1$`, asked[0].Key)
			require.Len(t, atCard, 1)
			assert.Equal(t, "ticket-7", atCard[0].ApprovalID, "the ticket's id is recorded before its card is shown")
			assert.Equal(t, "ticket-7", chunks[len(chunks)-2].Tool.ApprovalID)
			open, err := log.OpenCalls(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.Equal(t, "ticket-7", open[0].ApprovalID)
		})
	}

	leaktest.Check(t)
	srv := newServer(t)
	openTurn(srv)
	var got agent.ApprovalRequest
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = approverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
			got = req
			return agent.Decided(agent.Decision{Reason: "no"}), nil
		})
	}, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)
	assert.Equal(t, "call_1", got.Call.ID)
	assert.Empty(t, got.Key, "without a CallLog a call has no durable key")
}

// TestSuspendWithoutCallLogIsARejection: without a Store that keeps open
// calls a run cannot be resumed, so "not now" is a failed approval.
func TestSuspendWithoutCallLogIsARejection(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	openTurn(srv)
	srv.Enqueue(agenttest.Reply().Text("ok").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = newKeeper()
		c.OnReject = agent.RejectContinue
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Lima?"}))
	require.NoError(t, err)
	var rej *agent.ToolCall
	for _, c := range chunks {
		if c.Kind == agent.KindToolRejected {
			rej = c.Tool
		}
	}
	require.NotNil(t, rej)
	assert.Equal(t, agent.CauseApprovalFailed, rej.Cause)
	assert.Contains(t, rej.Reason, "suspended")
}

// TestParallelSuspendKeepsApprovedCalls: with ParallelTools, a suspension
// at the second call leaves the first (approved, not run yet) open too; the
// resumed turn runs both once.
func TestParallelSuspendKeepsApprovedCalls(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().
		Call(0, "call_1", "get_weather", `{"city":"Lima"}`).
		Call(1, "call_2", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	k := newKeeper()
	k.decisions["appr-1"] = nil
	k.next = 1
	// The first call's approval is decided as soon as it is asked.
	first := &agent.Decision{Approved: true}
	var runs atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.ParallelTools = true
		c.Approver = approverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
			t, err := k.Request(ctx, req)
			if t.ApprovalID() == "appr-2" {
				k.mu.Lock()
				k.decisions["appr-2"] = first
				k.mu.Unlock()
			}
			return t, err
		})
	}, countingWeather(&runs))
	chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Lima and Oslo?"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:get_weather", "tool:start:get_weather",
		"tool:approval_required:get_weather", "tool:approval_required:get_weather", "suspended"}, trace(chunks))
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, open, 2)
	assert.Equal(t, []string{"appr-2", "appr-3"}, []string{open[0].ApprovalID, open[1].ApprovalID})

	k.decide("appr-3", agent.Decision{Approved: true})
	srv.Enqueue(agenttest.Reply().Text("Sunny in both.").Finish("stop"))
	chunks, err = collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"tool:executing:get_weather", "tool:executing:get_weather", "tool:result:get_weather", "tool:result:get_weather", "round_end:1", "text", "round_end:2"}, trace(chunks))
	assert.Equal(t, int32(2), runs.Load())
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
}

// TestOneDriverPerSession: a session that a run of an Agent drives is
// refused to a second run or a Resume of the same Agent (ErrBusy), with no
// option set, until the first ends; another session is not.
func TestOneDriverPerSession(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	k.wait = true
	var runs atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))

	done := make(chan error, 1)
	waiting := make(chan struct{})
	go func() {
		var err error
		for c, e := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}) {
			if e != nil {
				err = e
			}
			if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
				close(waiting)
			}
		}
		done <- err
	}()
	<-waiting
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "again"}))
	assert.ErrorIs(t, err, agent.ErrBusy, "a second run")
	_, err = collect(a.Resume(ctx, "s1"))
	assert.ErrorIs(t, err, agent.ErrBusy, "a Resume while the run waits")
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hi.").Finish("stop"))
	_, err = collect(a.Run(ctx, agent.Input{SessionID: "s2", Message: "hello"}))
	assert.NoError(t, err, "another session")

	srv.Enqueue(agenttest.Reply().Text("Sunny.").Finish("stop"))
	k.decide("appr-1", agent.Decision{Approved: true})
	close(k.decided)
	require.NoError(t, <-done)
	assert.Equal(t, int32(1), runs.Load())
	_, err = collect(a.Resume(ctx, "s1"))
	assert.ErrorIs(t, err, agent.ErrNothingToResume, "free again once the run ended")
}

// TestLostSessionRunsNothing: a run whose driver no longer holds the
// session (the runner's guard in its context says so: another process took
// the lease) does not run its approved call: it suspends, and the call
// stays open for the new driver, which runs it once.
func TestLostSessionRunsNothing(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	var runs atomic.Int32
	var held atomic.Bool
	held.Store(true)
	lost := personFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		held.Store(false) // while A waits, another process takes the session
		return agent.Decision{Approved: true}, nil
	})
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = lost }, countingWeather(&runs))
	guarded := drive.WithGuard(ctx, func(context.Context) bool { return held.Load() })
	chunks, err := collect(a.Run(guarded, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)
	assert.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)
	assert.Zero(t, runs.Load())
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, open, 1)
	assert.False(t, open[0].Executing)

	srv.Enqueue(agenttest.Reply().Text("Sunny.").Finish("stop"))
	b := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = approveAll }, countingWeather(&runs))
	_, err = collect(b.Resume(ctx, "s1"))
	require.NoError(t, err)
	assert.Equal(t, int32(1), runs.Load())
}

// TestRefusedEditIsNotStored: an approver's edit that does not fit the
// tool's schema rejects the call (CauseApprovalFailed) in a durable run as
// in any other: the tool never runs, and the stored call keeps the model's
// arguments.
func TestRefusedEditIsNotStored(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			openTurn(srv)
			srv.Enqueue(agenttest.Reply().Text("No weather then.").Finish("stop"))
			var runs atomic.Int32
			edit := personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":42}`)}, nil
			})
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = edit; c.OnReject = agent.RejectContinue }, countingWeather(&runs))
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
			require.NoError(t, err)
			rej := rejection(t, chunks, "call_1")
			assert.Equal(t, agent.CauseApprovalFailed, rej.Cause)
			assert.Contains(t, rej.Reason, "edited arguments do not fit the parameters of get_weather")
			assert.JSONEq(t, `{"city":"Lima"}`, string(rej.Arguments), "the card shows the arguments asked about")
			assert.Zero(t, runs.Load(), "the tool never runs with arguments its schema refuses")

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			require.Len(t, msgs[2].ToolCalls, 1)
			assert.JSONEq(t, `{"city":"Lima"}`, string(msgs[2].ToolCalls[0].Arguments), "the stored call keeps the model's arguments")
			assert.Equal(t, ended{memory.OutcomeRejected, "approval_failed"}, endings(msgs)["call_1"])
		})
	}
}

// TestResumedTurnAsTheModelSeesIt: a resumed turn sends the turn as
// stored, without its intent tags and without a [continue] message, then
// what it adds itself; a hook at AfterToolResults sees the stored call
// and the result the resumed run recorded, and the assistant message of
// the turn's record keeps its raw text.
func TestResumedTurnAsTheModelSeesIt(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	var got agent.HookState
	h := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, s agent.HookState) ([]agent.Injection, error) {
		if at == agent.AfterToolResults {
			got = s
		}
		return nil, nil
	})
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k; c.Hooks = []agent.Hook{h} }, weatherTool())
	chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)
	require.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:get_weather", "tool:approval_required:get_weather", "suspended"}, trace(chunks))
	k.decide(chunks[len(chunks)-2].Tool.ApprovalID, agent.Decision{Approved: true})

	srv.Enqueue(agenttest.Reply().Text("Sunny in Lima.").Finish("stop"))
	_, err = collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)

	var calls, results []string
	for _, c := range got.Calls {
		calls = append(calls, c.ID+":"+c.Name)
	}
	for _, m := range got.Results {
		results = append(results, m.ToolCallID+":"+m.Content)
	}
	assert.Equal(t, []string{"call_1:get_weather"}, calls, "the stored call")
	assert.Equal(t, []string{"call_1:sunny in Lima"}, results, "the resumed run's result")

	reqs := srv.Requests()
	var sent []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role != "system" {
			sent = append(sent, m.Role+":"+m.Content)
		}
	}
	want := []string{"user:Weather in Lima?", "assistant:Let me look that up.", "assistant:", "tool:sunny in Lima"}
	if strict { // two assistant messages in a row get a user message between them
		want = slices.Insert(want, 2, "user:"+intent.ContinueMessage)
	}
	assert.Equal(t, want, sent)
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	assert.Equal(t, "Let me look that up. <need_tool>", msgs[1].Content, "the stored reply keeps its tag")
}
