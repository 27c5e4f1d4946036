package agent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/scripted"
)

// results returns the result of every call that ran, by call id.
func results(chunks []agent.Chunk) map[string]string {
	out := map[string]string{}
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			out[c.Tool.ID] = c.Tool.Result
		}
	}
	return out
}

// TestCallsWithoutIndex: providers that omit "index" (Mistral) may still
// interleave the fragments of parallel calls, each with its id, or send two
// whole calls with neither index nor id. Each call runs with its own
// arguments.
func TestCallsWithoutIndex(t *testing.T) {
	tests := []struct {
		name  string
		reply scripted.Response
		want  []string // results in call order
	}{
		{
			name: "interleaved fragments with ids",
			reply: scripted.Reply().OmitIndex().IDOnEveryFragment().
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
			reply: scripted.Reply().OmitIndex().WholeCalls().
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
			srv.Enqueue(planNeedTool(), tt.reply, scripted.Reply().Text("Done.").Finish("stop"))
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
