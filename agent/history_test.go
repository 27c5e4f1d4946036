package agent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// TestHistoryFromChunksMatchesTurnMessages runs scenarios that end in every
// way and checks that History(chunks) rebuilds exactly what the run recorded.
func TestHistoryFromChunksMatchesTurnMessages(t *testing.T) {
	reject := personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Reason: "no"}, nil
	})
	tests := []struct {
		name    string
		script  []agenttest.Response
		mut     func(*agent.Config)
		wantErr bool
	}{
		{"no tool", []agenttest.Response{planNoTool(), agenttest.Reply().Text("Fine.").Finish("stop")}, nil, false},
		{"tool loop", []agenttest.Response{
			planNeedTool(),
			agenttest.Reply().Text("Looking.").Call(0, "c1", "get_weather", `{"city": "Oslo"}`).Call(1, "c2", "nope", `{}`).Call(2, "c3", "get_weather", `{"city":`).Finish("tool_calls").Unsolicited(),
			agenttest.Reply().Text("Done.").Finish("stop"),
		}, nil, false},
		{"rejected ends run", []agenttest.Response{
			planNeedTool(),
			agenttest.Reply().Call(0, "c1", "get_weather", `{"city":"Oslo"}`).Call(1, "c2", "get_weather", `{"city":"Rome"}`).Finish("tool_calls"),
		}, func(c *agent.Config) { c.Approver = reject }, false},
		{"cut mid call", []agenttest.Response{
			planNeedTool(),
			agenttest.Reply().Text("Calling").Call(0, "c1", "get_weather", `{"ci`, `ty":"Oslo"}`).Finish("tool_calls").CutAfter(3),
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			srv.Enqueue(tt.script...)
			turn := newAgent(t, srv, tt.mut, weatherTool()).NewTurn(agent.Input{Message: "go"})
			chunks, err := collect(turn.Run(context.Background()))
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			want := strip(turn.Messages()[1:])
			got := agent.History(chunks)
			assert.Equal(t, want, strip(got))
			validHistory(t, got)
		})
	}
}
