package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// toolMessage returns the content of the tool message that answers call id.
func toolMessage(t *testing.T, msgs []memory.Message, id string) string {
	t.Helper()
	for _, m := range msgs {
		if m.Role == memory.RoleTool && m.ToolCallID == id {
			return m.Content
		}
	}
	t.Fatalf("no tool message for %s", id)
	return ""
}

// TestInterruptDuringApprovalSaysWhatHappened: a call whose run is
// interrupted while its Approver is asked records what happened: an approval
// still pending is "interrupted while waiting for approval", an approval
// already given is a call that never ran, a rejection keeps its reason.
func TestInterruptDuringApprovalSaysWhatHappened(t *testing.T) {
	tests := []struct {
		name   string
		decide func(ctx context.Context) (agent.Decision, error)
		want   string
	}{
		{"pending", func(ctx context.Context) (agent.Decision, error) {
			<-ctx.Done()
			return agent.Decision{}, ctx.Err()
		}, agent.CauseApprovalInterrupted.DefaultReason()},
		{"pending, no error", func(ctx context.Context) (agent.Decision, error) {
			<-ctx.Done()
			return agent.Decision{}, nil
		}, agent.CauseApprovalInterrupted.DefaultReason()},
		{"approved", func(context.Context) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}, agent.CauseNotRun.DefaultReason()},
		{"rejected", func(context.Context) (agent.Decision, error) {
			return agent.Decision{Reason: "too risky"}, nil
		}, "too risky"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ran bool
			tool := weatherTool().(agent.FuncTool)
			fn := tool.Fn
			tool.Fn = func(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
				ran = true
				return fn(ctx, args, p)
			}
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Approver = personFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
					cancel() // the user presses stop while the card is shown
					return tt.decide(ctx)
				})
			}, tool)
			turn := a.NewTurn(agent.Input{Message: "go"})
			chunks, err := collect(turn.Run(ctx))
			require.NoError(t, err)
			tr := trace(chunks)
			assert.Equal(t, []string{"rejected:get_weather:" + tt.want, "interrupted"}, tr[len(tr)-2:])
			assert.False(t, ran, "the call never ran")
			msgs := turn.Messages()
			validHistory(t, msgs)
			assert.Equal(t, tt.want, toolMessage(t, msgs, "call_1"))
			assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)))
		})
	}
}

// TestApproveInterruptRace races a browser's decision against the user's
// interrupt (as the web chat's handlers do: cancel the run, then the
// session's approvals) many times, and checks that the stored tool message
// says what happened: a decision the approvals took is what the call records
// (a result, not run, or the rejection's reason), and an approval the
// interrupt cut short is "interrupted while waiting for approval".
func TestApproveInterruptRace(t *testing.T) {
	leaktest.Check(t)
	m, err := person.StartApprovals(person.ApprovalsConfig{})
	require.NoError(t, err)
	srv := newServer(t)
	plan := planNeedTool()
	call := agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls")
	answer := agenttest.Reply().Text("Sunny.").Finish("stop")
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return plan
		case req.LastMessage().Role == "tool":
			return answer
		}
		return call
	})
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = m }, weatherTool())

	const iterations = 300
	deadline := time.Now().Add(15 * time.Second)
	seen := map[string]int{}
	for i := 0; i < iterations && time.Now().Before(deadline); i++ {
		session := fmt.Sprintf("s%d", i)
		d := agent.Decision{Approved: i%2 == 0, Reason: "no"}
		if d.Approved {
			d.Reason = ""
		}
		ctx, cancel := context.WithCancel(context.Background())
		turn := a.NewTurn(agent.Input{SessionID: session, Message: "go"})
		var (
			wg      sync.WaitGroup
			decided bool
			chunks  []agent.Chunk
		)
		for c, err := range turn.Run(ctx) {
			require.NoError(t, err)
			chunks = append(chunks, c)
			if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
				call := *c.Tool
				start := make(chan struct{})
				respond := func() {
					<-start
					spin(rand.IntN(4))
					var err error
					decided, err = m.Respond(context.Background(), replyTo(session, call, d))
					assert.NoError(t, err)
				}
				interrupt := func() {
					<-start
					spin(rand.IntN(4))
					cancel()
					_, _ = m.CancelSession(context.Background(), session)
				}
				// Which goroutine starts first changes which usually wins.
				if i%4 < 2 {
					wg.Go(respond)
					wg.Go(interrupt)
				} else {
					wg.Go(interrupt)
					wg.Go(respond)
				}
				close(start)
			}
		}
		wg.Wait()
		cancel()

		msgs := turn.Messages()
		validHistory(t, msgs)
		got := toolMessage(t, msgs, "call_1")
		var what string
		switch {
		case !decided:
			what = "interrupted"
			assert.Equal(t, agent.CauseApprovalInterrupted.DefaultReason(), got, "iteration %d: the interrupt came first", i)
		case !d.Approved:
			what = "rejected"
			assert.Equal(t, "no", got, "iteration %d: the rejection came first", i)
		case got == agent.CauseNotRun.DefaultReason():
			what = "approved, not run"
		default:
			what = "approved, ran"
			assert.Contains(t, []string{"sunny in Oslo", "sunny in Oslo\n[" + agent.CauseInterrupted.DefaultReason() + "]"}, got,
				"iteration %d: the approval came first", i)
		}
		seen[what]++
		assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)), "iteration %d", i)
		require.Zero(t, m.Len(), "iteration %d: an approval outlived its run", i)
		if t.Failed() {
			break
		}
	}
	t.Logf("outcomes: %v", seen)
}

// spin yields the processor n times.
func spin(n int) {
	for range n {
		runtime.Gosched()
	}
}

// TestManagerWithoutSessionFailsAtOnce: the runner's approvals
// (person.Approvals) are answered per session, so a run without
// Input.SessionID cannot be answered through its handlers. The call is
// rejected at once with a reason that says so, instead of waiting for the
// approvals' timeout.
func TestManagerWithoutSessionFailsAtOnce(t *testing.T) {
	leaktest.Check(t)
	m, err := person.StartApprovals(person.ApprovalsConfig{Timeout: time.Minute})
	require.NoError(t, err)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = m }, weatherTool())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the run waited for a decision nobody can give")
	tr := trace(chunks)
	require.GreaterOrEqual(t, len(tr), 2)
	assert.Equal(t, "interrupted", tr[len(tr)-1])
	var reason string
	for _, c := range chunks {
		if c.Kind == agent.KindToolRejected {
			reason = c.Tool.Reason
		}
	}
	assert.Contains(t, reason, approval.ErrNoSession.Error())
	assert.Contains(t, reason, "SessionID")
	assert.Zero(t, m.Len())
	validHistory(t, turn.Messages())
}

func TestParallelCallsAndSkipApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().
			Call(0, "call_a", "get_weather", `{"city":`, `"Rome"}`).
			Call(1, "call_b", "show_card", `{}`).
			Finish("tool_calls"),
		agenttest.Reply().Text("Rome is sunny.").Finish("stop"),
	)
	var asked []string
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = personFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			asked = append(asked, r.Call.Name)
			return agent.Decision{Approved: true}, nil
		})
	}, weatherTool(), cardTool())
	turn := a.NewTurn(agent.Input{Message: "weather in Rome and a card"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:show_card",
		"tool:approval_required:get_weather", "tool:executing:get_weather", "tool:result:get_weather",
		"tool:executing:show_card", "tool:result:show_card",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, []string{"get_weather"}, asked, "skip-approval tools are never asked for")
	validHistory(t, turn.Messages())
}

func TestRejectionEndsRunByDefault(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Call(1, "call_2", "get_weather", `{"city":"Bergen"}`).Finish("tool_calls"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: false, Reason: "not now"}, nil
		})
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:get_weather",
		"tool:approval_required:get_weather", "rejected:get_weather:not now",
		"rejected:get_weather:" + agent.CauseNotRun.DefaultReason(), "interrupted",
	}, trace(chunks))
	assert.Len(t, srv.Requests(), 2)
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, "not now", msgs[len(msgs)-2].Content)
}

func TestRejectionContinueTellsModel(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Understood.").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.OnReject = agent.RejectContinue
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{}, nil
		})
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:approval_required:get_weather", "rejected:get_weather:" + agent.CauseUser.DefaultReason(),
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	req := srv.Requests()[2]
	assert.Equal(t, agent.CauseUser.DefaultReason(), req.LastMessage().Content)
}

func TestEditedArguments(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":"Tromsø"}`)}, nil
		})
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Equal(t, "sunny in Tromsø", result)
}

// TestEditedArgumentsAreChecked: arguments an approver edits are held to
// the tool's schema like the model's: a person's edit that does not fit
// rejects the call instead of running the tool with it.
func TestEditedArgumentsAreChecked(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	var ran atomic.Int32
	weather := weatherTool().(agent.FuncTool)
	fn := weather.Fn
	weather.Fn = func(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
		ran.Add(1)
		return fn(ctx, args, p)
	}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.OnReject = agent.RejectContinue
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":42}`)}, nil
		})
	}, weather)
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	rej := rejection(t, chunks, "call_1")
	assert.Equal(t, agent.CauseApprovalFailed, rej.Cause)
	assert.Contains(t, rej.Reason, "edited arguments do not fit the parameters of get_weather")
	assert.Zero(t, ran.Load(), "the tool never ran with arguments its schema refuses")
}

// TestRequestComesBeforeTheChunk: a person's approval is registered
// (Request) before its approval_required chunk is yielded, the chunk carries
// the ticket's id, and the ticket is waited for once.
func TestRequestComesBeforeTheChunk(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"), agenttest.Reply().Text("ok").Finish("stop"))
	p := &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			assert.Equal(t, int32(1), p.requested.Load(), "registered before the chunk is yielded")
			assert.Equal(t, "key-1", c.Tool.ApprovalID)
			assert.True(t, c.Tool.ApprovalRequired)
		}
	}
	assert.Equal(t, int32(1), p.waited.Load())
}

// TestBreakAfterApprovalRequiredReleasesThePendingApproval: a consumer that
// stops at the card leaves a ticket nobody waits for; the agent still calls
// its Wait once, with a cancelled context, so the approver releases it.
func TestBreakAfterApprovalRequiredReleasesThePendingApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	p := &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = p }, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	for c, err := range turn.Run(context.Background()) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			break
		}
	}
	assert.Equal(t, int32(1), p.waited.Load(), "Wait is called exactly once after Request")
	assert.Equal(t, int32(1), p.released.Load(), "with a cancelled context")
	validHistory(t, turn.Messages())
}

// TestInterruptDuringRequestShowsNoCard: a run interrupted while the
// Approver registered the call shows no card for it; the ticket is still
// waited for once (the release), and the call is rejected as interrupted.
func TestInterruptDuringRequestShowsNoCard(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = approverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
			t, err := p.Request(ctx, req)
			cancel() // the user presses stop while the call is registered
			return t, err
		})
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(ctx))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.NotContains(t, tr, "tool:approval_required:get_weather")
	assert.Equal(t, []string{"rejected:get_weather:" + agent.CauseApprovalInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	assert.Equal(t, agent.CauseApprovalInterrupted, rejection(t, chunks, "call_1").Cause)
	assert.Equal(t, int32(1), p.waited.Load(), "the ticket is waited for once")
	assert.Equal(t, int32(1), p.released.Load(), "with a cancelled context")
	validHistory(t, turn.Messages())
}

// logging is a wrapper as a host writes one: it logs every request and
// passes the ticket of the approver it wraps through.
type logging struct {
	next agent.Approver
	log  []string
}

func (l *logging) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	t, err := l.next.Request(ctx, req)
	l.log = append(l.log, req.Call.ID+" "+t.ApprovalID())
	return t, err
}

// metrics is a wrapper that looks at decisions: it returns a ticket of its
// own that waits with the wrapped one's.
type metrics struct {
	next     agent.Approver
	approved atomic.Int32
}

func (m *metrics) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	t, err := m.next.Request(ctx, req)
	if _, decided := t.Decision(); err != nil || decided {
		return t, err
	}
	return agent.Pending(t.ApprovalID(), func(ctx context.Context) (agent.Decision, error) {
		d, err := t.Wait(ctx)
		if err == nil && d.Approved {
			m.approved.Add(1)
		}
		return d, err
	}), nil
}

// TestWrappedManagerKeepsEarlyDecision: an approver that wraps a Manager
// (to log, to count, with ready wrappers around it) keeps the Manager's
// registration, so a decision sent the moment the card shows (here from the
// range loop, before the agent waits) is taken, and the chunk carries the
// Manager's approval id.
func TestWrappedManagerKeepsEarlyDecision(t *testing.T) {
	m, err := person.StartApprovals(person.ApprovalsConfig{Timeout: time.Minute})
	require.NoError(t, err)
	log := &logging{next: m}
	count := &metrics{next: log}
	wrappers := map[string]agent.Approver{
		"logging":             log,
		"metrics":             count,
		"in ready wrappers":   approval.WithTimeout(approval.Chain(count, approval.DenyTools("", "rm")), time.Minute),
		"around ready ones":   &logging{next: approval.NewAllowList().Wrap(m)},
		"in a wrapper's wait": &metrics{next: approval.WithTimeout(m, time.Minute)},
	}
	for name, ap := range wrappers {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"), agenttest.Reply().Text("ok").Finish("stop"))
			a := newAgent(t, srv, func(c *agent.Config) { c.Approver = ap }, weatherTool())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var chunks []agent.Chunk
			responded := false
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "go"}) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
					responded, err = m.Respond(context.Background(), replyTo("s1", *c.Tool, agent.Decision{Approved: true}))
					require.NoError(t, err)
				}
			}
			assert.True(t, responded, "the decision sent as the card showed found its approval")
			assert.Equal(t, "sunny in Oslo", results(chunks)["call_1"])
			assert.Zero(t, m.Len())
		})
	}
	assert.NotEmpty(t, log.log)
	assert.Equal(t, int32(2), count.approved.Load(), "the metrics wrapper saw its decisions")
}

// TestApproverErrorIsARejection: an Approver's error, from Request or from
// Wait, rejects the call with the cause approval_failed and the error's text
// as reason (a default one when the text is empty); the run does not fail.
func TestApproverErrorIsARejection(t *testing.T) {
	approvers := map[string]func(err error) agent.Approver{
		"Wait": func(err error) agent.Approver {
			return personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Approved: true}, err
			})
		},
		"Request": func(err error) agent.Approver {
			return approverFunc(func(context.Context, agent.ApprovalRequest) (agent.Ticket, error) {
				return agent.Decided(agent.Decision{Approved: true}), err
			})
		},
		"a Pending ticket without a wait": func(error) agent.Approver {
			return approverFunc(func(context.Context, agent.ApprovalRequest) (agent.Ticket, error) {
				return agent.Pending("id", nil), nil
			})
		},
	}
	for _, msg := range []string{"approval service down", ""} {
		for from, approver := range approvers {
			t.Run(fmt.Sprintf("%s/%q", from, msg), func(t *testing.T) {
				srv := newServer(t)
				srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"), agenttest.Reply().Text("ok").Finish("stop"))
				a := newAgent(t, srv, func(c *agent.Config) {
					c.OnReject = agent.RejectContinue
					c.Approver = approver(errors.New(msg))
				}, weatherTool())
				turn := a.NewTurn(agent.Input{Message: "go"})
				chunks, err := collect(turn.Run(context.Background()))
				require.NoError(t, err)
				rej := rejection(t, chunks, "call_1")
				assert.Equal(t, agent.CauseApprovalFailed, rej.Cause)
				if from != "a Pending ticket without a wait" {
					assert.Contains(t, rej.Reason, msg)
				}
				assert.NotEmpty(t, rej.Reason)
				msgs := turn.Messages()
				validHistory(t, msgs)
				assert.Equal(t, rej.Reason, msgs[len(msgs)-2].Content)
			})
		}
	}
}

// approverFunc adapts a function to agent.Approver.
type approverFunc func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error)

func (f approverFunc) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	return f(ctx, req)
}

// rejection returns the rejected chunk's call of call id.
func rejection(t *testing.T, chunks []agent.Chunk, id string) *agent.ToolCall {
	t.Helper()
	for _, c := range chunks {
		if c.Kind == agent.KindToolRejected && c.Tool.ID == id {
			return c.Tool
		}
	}
	t.Fatalf("no rejected chunk for %s: %v", id, trace(chunks))
	return nil
}

// replyTo returns the reply that gives d to the approval of call, as shown
// on its approval_required chunk.
func replyTo(session string, call agent.ToolCall, d agent.Decision) person.Reply {
	return person.Reply{SessionID: session, ApprovalID: call.ApprovalID, CallID: call.ID, Tool: call.Name,
		ArgumentsDigest: call.ArgumentsDigest, Decision: d}
}
