package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// ended is how one call ended, as its tool message says it.
type ended struct {
	Outcome memory.Outcome
	Cause   string
}

// endings returns how each call of msgs ended, by call id.
func endings(msgs []memory.Message) map[string]ended {
	out := map[string]ended{}
	for _, m := range msgs {
		if m.Role == memory.RoleTool {
			out[m.ToolCallID] = ended{m.Outcome, m.Cause}
		}
	}
	return out
}

// lastStates returns how each call ended in the chunks (its result or
// rejected chunk), in the words of a tool message, by call id.
func lastStates(chunks []agent.Chunk) map[string]ended {
	out := map[string]ended{}
	for _, c := range chunks {
		if c.Tool == nil || c.Depth > 0 {
			continue
		}
		switch {
		case c.Kind == agent.KindToolRejected:
			out[c.Tool.ID] = ended{memory.OutcomeRejected, string(c.Tool.Cause)}
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			out[c.Tool.ID] = ended{memory.OutcomeResult, ""}
		}
	}
	return out
}

// failingWeather is get_weather failing with an error.
func failingWeather() agent.Tool {
	w := weatherTool().(agent.FuncTool)
	w.Fn = func(context.Context, json.RawMessage, agent.Progress) (string, error) {
		return "", errors.New("the weather service is down")
	}
	return w
}

// TestToolMessagesSayHowCallsEnded: every tool message the agent writes says
// how its call ended, as its last chunk said it: a result (a tool error
// included: the tool ran), or a rejection with its cause. The stored
// history, Turn.Messages and History(chunks) agree, so that a host redrawing
// a conversation never shows a refused call as done.
func TestToolMessagesSayHowCallsEnded(t *testing.T) {
	twoCalls := agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Call(1, "call_2", "get_weather", `{"city":"Rome"}`).Finish("tool_calls")
	decide := func(d agent.Decision) func(c *agent.Config, cancel context.CancelFunc) {
		return func(c *agent.Config, _ context.CancelFunc) {
			c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) { return d, nil })
		}
	}
	tests := []struct {
		name  string
		tools []agent.Tool
		reply agenttest.Response
		more  bool // the model answers again after the round
		mut   func(c *agent.Config, cancel context.CancelFunc)
		want  map[string]ended
		// wantParallel, when set, is want with ParallelTools.
		wantParallel map[string]ended
	}{
		{
			name: "approved and run", tools: []agent.Tool{weatherTool()}, reply: twoCalls, more: true,
			want: map[string]ended{"call_1": {memory.OutcomeResult, ""}, "call_2": {memory.OutcomeResult, ""}},
		},
		{
			name: "tool error", tools: []agent.Tool{failingWeather()}, reply: twoCalls, more: true,
			want: map[string]ended{"call_1": {memory.OutcomeResult, ""}, "call_2": {memory.OutcomeResult, ""}},
		},
		{
			name: "rejected by the user", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut:  decide(agent.Decision{Reason: "not now"}),
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "user"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "approval timed out", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut:  decide(agent.Decision{Cause: agent.CauseTimeout}),
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "timeout"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "refused by a policy", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut: func(c *agent.Config, _ context.CancelFunc) {
				c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
					return agent.Decision{}, nil
				})
			},
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "policy"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "approval failed", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut: func(c *agent.Config, _ context.CancelFunc) {
				c.Approver = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
					return agent.Decision{}, errors.New("the approval service is down")
				})
			},
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "approval_failed"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "edited arguments that do not fit", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut:  decide(agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":42}`)}),
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "approval_failed"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "invalid arguments and an unknown tool", tools: []agent.Tool{weatherTool()}, more: true,
			reply: agenttest.Reply().Call(0, "call_1", "get_weather", `{"city": "Par`).Call(1, "call_2", "get_wether", `{}`).
				Call(2, "call_3", "get_weather", `{"city":42}`).Finish("tool_calls").Unsolicited(),
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "invalid_arguments"}, "call_2": {memory.OutcomeRejected, "unknown_tool"},
				"call_3": {memory.OutcomeRejected, "invalid_arguments"}},
		},
		{
			name: "interrupted during approval", tools: []agent.Tool{weatherTool()}, reply: twoCalls,
			mut: func(c *agent.Config, cancel context.CancelFunc) {
				c.Approver = personFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
					cancel()
					<-ctx.Done()
					return agent.Decision{}, ctx.Err()
				})
			},
			want: map[string]ended{"call_1": {memory.OutcomeRejected, "approval_interrupted"}, "call_2": {memory.OutcomeRejected, "not_run"}},
		},
		{
			name: "interrupted while it ran", reply: twoCalls,
			mut: func(c *agent.Config, cancel context.CancelFunc) {
				w := weatherTool().(agent.FuncTool)
				w.Fn = func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
					p.WriteString("half")
					cancel()
					<-ctx.Done()
					return "", ctx.Err()
				}
				reg, err := agent.NewToolRegistry(w)
				if err != nil {
					panic(err)
				}
				c.Tools = reg
			},
			want:         map[string]ended{"call_1": {memory.OutcomeRejected, "interrupted"}, "call_2": {memory.OutcomeRejected, "not_run"}},
			wantParallel: map[string]ended{"call_1": {memory.OutcomeRejected, "interrupted"}, "call_2": {memory.OutcomeRejected, "interrupted"}},
		},
	}
	for _, tt := range tests {
		for _, parallel := range []bool{false, true} {
			for _, store := range []string{"none", "mem", "sqlite"} {
				name := tt.name + "/" + store
				if parallel {
					name += "/parallel"
				}
				t.Run(name, func(t *testing.T) {
					leaktest.Check(t)
					srv := newServer(t)
					srv.Enqueue(planNeedTool(), tt.reply)
					if tt.more {
						srv.Enqueue(agenttest.Reply().Text("Done.").Finish("stop"))
					}
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					var st memory.Store
					if store != "none" {
						st = stores(t)[store](t)
					}
					a := newAgent(t, srv, func(c *agent.Config) {
						c.Store = st
						c.ParallelTools = parallel
						if tt.mut != nil {
							tt.mut(c, cancel)
						}
					}, tt.tools...)
					turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "Weather?"})
					chunks, err := collect(turn.Run(ctx))
					require.NoError(t, err)
					closedCards(t, chunks)

					want := tt.want
					if parallel && tt.wantParallel != nil {
						want = tt.wantParallel
					}
					assert.Equal(t, want, lastStates(chunks), "the chunks: %v", trace(chunks))
					msgs := turn.Messages()
					validHistory(t, msgs)
					assert.Equal(t, want, endings(msgs), "Turn.Messages")
					assert.Equal(t, want, endings(agent.History(chunks)), "History(chunks)")
					if st != nil {
						stored, err := st.Messages(context.Background(), "s1", true)
						require.NoError(t, err)
						assert.Equal(t, want, endings(stored), "the Store")
					}
				})
			}
		}
	}
}

// TestEditedArgumentsAreStored: the history says what ran. An approver's
// edit is in the stored assistant message with a durable store (which
// stores the message before it asks) as without one, the other call of the
// message keeps the model's arguments, and a turn resumed after a decision
// with an edit stores the edit too.
func TestEditedArgumentsAreStored(t *testing.T) {
	edit := func(req agent.ApprovalRequest) agent.Decision {
		if req.Call.ID == "call_1" {
			return agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":"Rome"}`)}
		}
		return agent.Decision{Approved: true}
	}
	check := func(t *testing.T, msgs []memory.Message) {
		t.Helper()
		validHistory(t, msgs)
		var calls []memory.ToolCall
		for _, m := range msgs {
			calls = append(calls, m.ToolCalls...)
		}
		require.Len(t, calls, 2)
		assert.JSONEq(t, `{"city":"Rome"}`, string(calls[0].Arguments), "the edited call")
		assert.JSONEq(t, `{"city":"Oslo"}`, string(calls[1].Arguments), "the other call")
		assert.Equal(t, map[string]ended{"call_1": {memory.OutcomeResult, ""}, "call_2": {memory.OutcomeResult, ""}}, endings(msgs))
		for _, m := range msgs {
			if m.Role == memory.RoleTool && m.ToolCallID == "call_1" {
				assert.Equal(t, "sunny in Rome", m.Content)
			}
		}
	}
	script := func(srv *agenttest.Server) {
		srv.Enqueue(planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Call(1, "call_2", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny in Rome.").Finish("stop"))
	}
	for _, store := range []string{"none", "mem", "sqlite"} {
		for _, parallel := range []bool{false, true} {
			name := store
			if parallel {
				name += "/parallel"
			}
			t.Run(name, func(t *testing.T) {
				leaktest.Check(t)
				srv := newServer(t)
				script(srv)
				var st memory.Store
				if store != "none" {
					st = stores(t)[store](t)
				}
				a := newAgent(t, srv, func(c *agent.Config) {
					c.Store = st
					c.ParallelTools = parallel
					c.Approver = personFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) { return edit(req), nil })
				}, weatherTool())
				turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "Weather?"})
				chunks, err := collect(turn.Run(context.Background()))
				require.NoError(t, err)
				assert.Equal(t, "sunny in Rome", results(chunks)["call_1"], "the tool ran with the edit")
				check(t, turn.Messages())
				check(t, append([]memory.Message{{Role: memory.RoleUser}}, agent.History(chunks)...))
				if st != nil {
					stored, err := st.Messages(context.Background(), "s1", true)
					require.NoError(t, err)
					check(t, stored)
				}
			})
		}
	}
	for name, newStore := range stores(t) {
		t.Run("resumed/"+name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := newStore(t)
			srv := newServer(t)
			script(srv)
			k := newKeeper()
			var runs atomic.Int32
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, countingWeather(&runs))
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather?"}))
			require.NoError(t, err)
			require.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
			// The decisions come while no process runs the turn; the
			// second call is asked about only once the first is decided.
			var all []agent.Chunk
			for i := range 2 {
				id := chunks[len(chunks)-2].Tool.ApprovalID
				require.Equal(t, fmt.Sprintf("appr-%d", i+1), id, "%v", trace(chunks))
				k.decide(id, edit(agent.ApprovalRequest{Call: *chunks[len(chunks)-2].Tool}))
				chunks, err = collect(a.Resume(ctx, "s1"))
				require.NoError(t, err)
				all = append(all, chunks...)
				if chunks[len(chunks)-1].Kind != agent.KindSuspended {
					break
				}
			}
			assert.Equal(t, "sunny in Rome", results(all)["call_1"], "%v", trace(all))
			assert.Equal(t, int32(2), runs.Load())
			stored, err := st.Messages(ctx, "s1", true)
			require.NoError(t, err)
			check(t, stored)
		})
	}
}

// TestHistoryOutcomes: History gives each tool message the outcome of its
// call's last chunk; a call left open (a suspended run's) is rejected as
// not run, and a call whose arguments never finished is left out.
func TestHistoryOutcomes(t *testing.T) {
	call := func(kind agent.Kind, id string, state agent.ToolState, mod func(*agent.ToolCall)) agent.Chunk {
		tc := &agent.ToolCall{ID: id, Name: "run_command", State: state, Arguments: json.RawMessage(`{"command":"ls"}`)}
		if mod != nil {
			mod(tc)
		}
		return agent.Chunk{Kind: kind, Round: 1, Tool: tc}
	}
	chunks := []agent.Chunk{
		call(agent.KindToolCall, "ok", agent.StateStart, nil),
		call(agent.KindToolCall, "ok", agent.StateResult, func(c *agent.ToolCall) { c.Result = "a.txt" }),
		call(agent.KindToolRejected, "cut", agent.StateRejected, func(c *agent.ToolCall) {
			c.Cause, c.Reason, c.PartialResult = agent.CauseTimeout, "approval timed out", ""
		}),
		call(agent.KindToolRejected, "ran", agent.StateRejected, func(c *agent.ToolCall) {
			c.Cause, c.Reason, c.PartialResult = agent.CauseInterrupted, agent.CauseInterrupted.DefaultReason(), "half"
		}),
		call(agent.KindToolCall, "open", agent.StateApprovalRequired, nil),
		call(agent.KindToolRejected, "partial", agent.StateRejected, func(c *agent.ToolCall) { c.Cause = agent.CauseIncomplete }),
		{Kind: agent.KindSuspended, Round: 1},
	}
	msgs := agent.History(chunks)
	validHistory(t, msgs)
	assert.Equal(t, map[string]ended{
		"ok":   {memory.OutcomeResult, ""},
		"cut":  {memory.OutcomeRejected, "timeout"},
		"ran":  {memory.OutcomeRejected, "interrupted"},
		"open": {memory.OutcomeRejected, "not_run"},
	}, endings(msgs))
	assert.Equal(t, "half\n["+agent.CauseInterrupted.DefaultReason()+"]", msgs[3].Content)
}
