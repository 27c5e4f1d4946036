package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// ends renders the round_end and warning chunks of a run compactly:
// "round_end:1:tool_calls", "warning:1:length".
func ends(chunks []agent.Chunk) []string {
	var out []string
	for _, c := range chunks {
		switch c.Kind {
		case agent.KindRoundEnd:
			out = append(out, fmt.Sprintf("round_end:%d:%s", c.Round, c.FinishReason))
		case agent.KindWarning:
			out = append(out, fmt.Sprintf("warning:%d:%s", c.Round, c.Code))
		}
	}
	return out
}

// TestRoundEndCarriesFinishReason: every round_end says why the model's
// response ended, as the provider said it.
func TestRoundEndCarriesFinishReason(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny.").Finish("stop"),
	)
	chunks, err := collect(newAgent(t, srv, nil, weatherTool()).Run(context.Background(), agent.Input{Message: "Paris?"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"round_end:0:stop", "round_end:1:tool_calls", "round_end:2:stop"}, ends(chunks))
}

// TestLengthAndContentFilterAreWarnings: a response the token limit or the
// provider's content filter cut short is followed by a warning chunk with
// a code, right before its round_end; the run goes on as it would have.
func TestLengthAndContentFilterAreWarnings(t *testing.T) {
	tests := []struct {
		name   string
		script []agenttest.Response
		want   []string
	}{
		{
			name: "planning round cut at the token limit",
			script: []agenttest.Response{
				agenttest.Reply().Text("Let me think about th").Finish("length"),
				agenttest.Reply().Text("Done.").Finish("stop"),
			},
			want: []string{"warning:0:length", "round_end:0:length", "round_end:1:stop"},
		},
		{
			name: "tool call cut at the token limit",
			script: []agenttest.Response{
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"ci`).Finish("length"),
				agenttest.Reply().Text("Sorry.").Finish("stop"),
			},
			want: []string{"round_end:0:stop", "warning:1:length", "round_end:1:length", "round_end:2:stop"},
		},
		{
			name: "final answer filtered",
			script: []agenttest.Response{
				planNoTool(),
				agenttest.Reply().Text("I can").Finish("content_filter"),
			},
			want: []string{"round_end:0:stop", "warning:1:content_filter", "round_end:1:content_filter"},
		},
		{
			name: "tool loop answer filtered",
			script: []agenttest.Response{
				planNeedTool(),
				agenttest.Reply().Text("Here").Finish("content_filter"),
			},
			want: []string{"round_end:0:stop", "warning:1:content_filter", "round_end:1:content_filter"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.script...)
			turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "go"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)
			assert.Equal(t, tt.want, ends(chunks))
			assert.Zero(t, srv.Pending(), "the run went on to the end of the script")
			for _, c := range chunks {
				if c.Kind == agent.KindWarning {
					assert.NotEmpty(t, c.Text, "a warning also says what happened in words")
				}
			}
			validHistory(t, turn.Messages())
			assert.Equal(t, agent.History(chunks), strip(turn.Messages()[1:]), "warnings are not history")
		})
	}
}

// TestStopAtWarningKeepsTheReply: a host that acts on a warning by leaving
// the loop keeps the reply that was cut: it is recorded before the warning.
func TestStopAtWarningKeepsTheReply(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("The answer is").Finish("length"))
	turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "go"})
	var warned bool
	for c, err := range turn.Run(context.Background()) {
		require.NoError(t, err)
		if c.Kind == agent.KindWarning {
			assert.Equal(t, agent.WarnLength, c.Code)
			warned = true
			break
		}
	}
	assert.True(t, warned, "the cut answer was followed by a warning")
	msgs := turn.Messages()
	require.NotEmpty(t, msgs)
	assert.Equal(t, "The answer is", msgs[len(msgs)-1].Content)
}

func TestWarningChunkJSON(t *testing.T) {
	tests := []struct {
		chunk agent.Chunk
		want  string
	}{
		{agent.Chunk{Kind: agent.KindRoundEnd, Round: 1, FinishReason: agent.FinishLength}, `{"kind":"round_end","round":1,"finish_reason":"length"}`},
		{agent.Chunk{Kind: agent.KindWarning, Round: 1, Code: agent.WarnLength, Text: "cut"}, `{"kind":"warning","round":1,"code":"length","text":"cut"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.chunk)
		require.NoError(t, err)
		assert.JSONEq(t, tt.want, string(b))
		var back agent.Chunk
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, tt.chunk, back)
	}
}
