package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestCallsWithoutIndex: providers that omit "index" (Mistral) may still
// interleave the fragments of parallel calls, each with its id, or send two
// whole calls with neither index nor id. Each call runs with its own
// arguments.
func TestCallsWithoutIndex(t *testing.T) {
	tests := []struct {
		name  string
		reply agenttest.Response
		want  []string // results in call order
	}{
		{
			name: "interleaved fragments with ids",
			reply: agenttest.Reply().OmitIndex().IDOnEveryFragment().
				Fragment(0, "call_a", "get_weather", "").
				Fragment(0, "call_b", "get_weather", "").
				Fragment(0, "call_a", "", `{"city":`).
				Fragment(0, "call_b", "", `{"city":`).
				Fragment(0, "call_a", "", `"Paris"}`).
				Fragment(0, "call_b", "", `"Rome"}`).
				Finish("tool_calls"),
			want: []string{"sunny in Paris", "sunny in Rome"},
		},
		{
			name: "whole calls with neither index nor id",
			reply: agenttest.Reply().OmitIndex().WholeCalls().
				Call(0, "", "get_weather", `{"city":"Oslo"}`).
				Call(0, "", "get_weather", `{"city":"Lima"}`).
				Finish("tool_calls"),
			want: []string{"sunny in Oslo", "sunny in Lima"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), tt.reply, agenttest.Reply().Text("Done.").Finish("stop"))
			turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "weather?"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)

			msgs := turn.Messages()
			validHistory(t, msgs)
			require.Len(t, msgs, 6, "user, plan, calls, two tool messages, answer")
			calls := msgs[2].ToolCalls
			require.Len(t, calls, len(tt.want), "%v", trace(chunks))
			got := results(chunks)
			for i, want := range tt.want {
				assert.Equal(t, want, got[calls[i].ID], "call %d (%s %s)", i, calls[i].ID, calls[i].Arguments)
				assert.Equal(t, want, msgs[3+i].Content)
			}
			assert.NotEqual(t, calls[0].ID, calls[1].ID)
		})
	}
}

// isObject reports whether s is a JSON object.
func isObject(s string) bool {
	var v map[string]any
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}

// TestMalformedArgumentsNeverReachTheHistory: arguments that are not a JSON
// object (a cut object, an array, a bare string) are stored and sent back
// wrapped in an object, so providers that parse the arguments of earlier
// calls (vLLM, llama.cpp) accept this round's follow-up and every later
// turn; the chunk keeps the raw text.
func TestMalformedArgumentsNeverReachTheHistory(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			srv := newServer(t)
			srv.Enforce(serverChecks() | agenttest.CheckArguments)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().
					Call(0, "call_cut", "get_weather", `{"city": "Par`).
					Call(1, "call_arr", "get_weather", `["Paris"]`).
					Call(2, "call_str", "get_weather", `"Paris"`).
					Finish("tool_calls"),
				agenttest.Reply().Text("Sorry, let me retry.").Finish("stop"),
				planNoTool(),
				agenttest.Reply().Text("Fine.").Finish("stop"),
			)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st }, weatherTool())
			ctx := context.Background()
			turn := a.NewTurn(agent.Input{SessionID: "s", Message: "weather?"})
			chunks, err := collect(turn.Run(ctx))
			require.NoError(t, err, "the follow-up request carries the calls")

			raw := map[string]string{}
			for _, c := range chunks {
				if c.Kind == agent.KindToolRejected {
					assert.Equal(t, agent.CauseInvalidArguments, c.Tool.Cause)
					raw[c.Tool.ID] = c.Tool.ArgumentsRaw
					assert.Nil(t, c.Tool.Arguments)
				}
			}
			assert.Equal(t, map[string]string{"call_cut": `{"city": "Par`, "call_arr": `["Paris"]`, "call_str": `"Paris"`}, raw, "chunks keep the raw text")

			stored, err := st.Messages(ctx, "s", false)
			require.NoError(t, err)
			for _, msgs := range [][]memory.Message{turn.Messages(), stored, agent.History(chunks)} {
				var calls []memory.ToolCall
				for _, m := range msgs {
					calls = append(calls, m.ToolCalls...)
				}
				require.Len(t, calls, 3)
				for _, c := range calls {
					var v struct {
						Invalid string `json:"invalid_arguments"`
					}
					require.NoError(t, json.Unmarshal([]byte(c.Arguments), &v), c.Arguments)
					assert.Equal(t, raw[c.ID], v.Invalid, "the wrapper holds the raw text")
				}
			}

			_, err = collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "and now?"}))
			require.NoError(t, err, "a later turn of the session is accepted too")
			for _, req := range srv.Requests() {
				for _, m := range req.Messages {
					for _, c := range m.ToolCalls {
						assert.True(t, isObject(c.Arguments), "request %d: %s", req.Seq, c.Arguments)
					}
				}
			}
		})
	}
}

// TestOldMalformedArgumentsAreWrapped: history saved before arguments were
// wrapped, passed in Input.History, is made acceptable when it is loaded.
func TestOldMalformedArgumentsAreWrapped(t *testing.T) {
	old := []memory.Message{
		{Role: memory.RoleUser, Content: "weather?"},
		{Role: memory.RoleAssistant, Content: "Checking.", ToolCalls: []memory.ToolCall{
			{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Par`)},
			{ID: "c2", Name: "get_weather", Arguments: json.RawMessage("  ")},
			{ID: "c3", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
		}},
		{Role: memory.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: "error"},
		{Role: memory.RoleTool, ToolCallID: "c2", Name: "get_weather", Content: "error"},
		{Role: memory.RoleTool, ToolCallID: "c3", Name: "get_weather", Content: "sunny"},
		{Role: memory.RoleAssistant, Content: "Done."},
	}
	check := func(t *testing.T, srv *agenttest.Server) {
		t.Helper()
		for _, req := range srv.Requests() {
			for _, m := range req.Messages {
				for _, c := range m.ToolCalls {
					assert.True(t, isObject(c.Arguments), "request %d: %s", req.Seq, c.Arguments)
				}
			}
		}
	}
	t.Run("Input.History", func(t *testing.T) {
		srv := newServer(t)
		srv.Enforce(serverChecks() | agenttest.CheckArguments)
		srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
		_, err := collect(newAgent(t, srv, nil).Run(context.Background(), agent.Input{History: old, Message: "again"}))
		require.NoError(t, err)
		check(t, srv)
	})
	// Stores refuse such arguments (memory.ValidateMessages), and the
	// SQLite store wraps those of older databases when it opens them.
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			_, err := st.CreateSession(t.Context(), memory.Session{ID: "s"})
			require.NoError(t, err)
			_, err = st.Append(t.Context(), "s", old...)
			require.ErrorContains(t, err, "not a JSON object")
		})
	}
}

// TestInvalidArgumentsAndUnknownToolAreRejected: a call with arguments that
// are not a JSON object, or of a tool the agent does not have, never reaches
// the Approver: it is rejected with its cause, the model reads why, and the
// run goes on (also with the default OnReject, which ends the run on other
// rejections).
func TestInvalidArgumentsAndUnknownToolAreRejected(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().
			Call(0, "call_bad", "get_weather", `{"city": "Par`).
			Call(1, "call_unknown", "launch_rockets", `{}`).
			Finish("tool_calls").Unsolicited(), // launch_rockets is not offered
		agenttest.Reply().Text("Sorry.").Finish("stop"),
	)
	var asked atomic.Int32
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			asked.Add(1)
			return agent.Decision{Approved: true}, nil
		})
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Zero(t, asked.Load(), "invalid calls never reach the Approver")
	tr := trace(chunks)
	assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:get_weather", "tool:start:launch_rockets"}, tr[:4])
	assert.Equal(t, []string{"round_end:1", "text", "round_end:2"}, tr[6:])
	rejected := map[string]*agent.ToolCall{}
	for _, c := range chunks {
		if c.Kind == agent.KindToolRejected {
			rejected[c.Tool.ID] = c.Tool
		}
	}
	require.Len(t, rejected, 2)
	bad, unknown := rejected["call_bad"], rejected["call_unknown"]
	assert.Equal(t, agent.CauseInvalidArguments, bad.Cause)
	assert.Equal(t, `{"city": "Par`, bad.ArgumentsRaw)
	assert.Contains(t, bad.Reason, "not valid JSON")
	assert.Equal(t, agent.CauseUnknownTool, unknown.Cause)
	assert.Contains(t, unknown.Reason, `unknown tool "launch_rockets"`)

	tools := srv.Requests()[2].Messages
	n := len(tools)
	assert.Equal(t, bad.Reason, tools[n-2].Content, "the model reads why")
	assert.Equal(t, unknown.Reason, tools[n-1].Content)
}

// TestCallWithoutNameIsDropped: argument fragments that never got a function
// name (a provider that numbered a continuation as a new call) are not a
// call: no chunk, no history, and the next request stays valid (the API
// refuses an empty function name).
func TestCallWithoutNameIsDropped(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Fragment(1, "", "", `{"x":1}`).Finish("tool_calls"),
		agenttest.Reply().Text("done").Finish("stop"),
	)
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	for _, c := range chunks {
		if c.Tool != nil {
			assert.NotEmpty(t, c.Tool.Name, "%v", trace(chunks))
		}
	}
	msgs := turn.Messages()
	validHistory(t, msgs)
	for _, m := range append(msgs, agent.History(chunks)...) {
		for _, c := range m.ToolCalls {
			assert.NotEmpty(t, c.Name)
		}
	}
	for _, m := range srv.Requests()[2].Messages {
		for _, c := range m.ToolCalls {
			assert.NotEmpty(t, c.Name, "no nameless call in the next request")
		}
	}
}

// TestToolCallArgumentsOneType: a call's arguments are the same value, of
// the same type, in its chunks, in the turn's history, in a store and in
// the JSON of either, so a host moves them between the two without
// converting.
func TestToolCallArgumentsOneType(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "c1", "get_weather", `{"city": "Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	st := new(memory.MemStore)
	turn := newAgent(t, srv, func(c *agent.Config) { c.Store = st }, weatherTool()).NewTurn(agent.Input{SessionID: "s", Message: "go"})
	chunks, err := collect(turn.Run(t.Context()))
	require.NoError(t, err)
	var shown *agent.ToolCall
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			shown = c.Tool
		}
	}
	require.NotNil(t, shown)
	stored, err := st.Messages(t.Context(), "s", false)
	require.NoError(t, err)
	for _, msgs := range [][]memory.Message{turn.Messages(), agent.History(chunks), stored} {
		var call *memory.ToolCall
		for _, m := range msgs {
			if len(m.ToolCalls) > 0 {
				call = &m.ToolCalls[0]
			}
		}
		require.NotNil(t, call)
		assert.Equal(t, shown.Arguments, call.Arguments)

		// Both marshal the arguments as the object itself.
		a, err := json.Marshal(shown)
		require.NoError(t, err)
		b, err := json.Marshal(call)
		require.NoError(t, err)
		var x, y struct{ Arguments any }
		require.NoError(t, json.Unmarshal(a, &x))
		require.NoError(t, json.Unmarshal(b, &y))
		assert.Equal(t, map[string]any{"city": "Oslo"}, x.Arguments)
		assert.Equal(t, x, y)
	}
}
