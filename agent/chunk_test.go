package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

func TestReasoningIsNeverText(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Reasoning("let me think").Text("Hi.<no_tool>").Finish("stop"),
		agenttest.Reply().Text("Hello!").Finish("stop"),
	)
	turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, "reasoning", chunks[0].Kind.String())
	assert.Equal(t, "let me think", chunks[0].Text)
	for _, m := range turn.Messages() {
		assert.NotContains(t, m.Content, "let me think", "reasoning is not persisted")
	}
}

func TestChunkJSONSchema(t *testing.T) {
	tests := []struct {
		chunk agent.Chunk
		want  string
	}{
		{agent.Chunk{Kind: agent.KindText, Text: "Hello! ", Raw: "<voice>Hello! ", Voice: true}, `{"kind":"text","round":0,"text":"Hello! ","raw":"<voice>Hello! ","voice":true}`},
		{agent.Chunk{Kind: agent.KindRoundEnd, Intent: agent.IntentNeedTool}, `{"kind":"round_end","round":0,"intent":"need_tool"}`},
		{agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: &agent.ToolCall{ID: "call_1", Name: "get_weather", State: agent.StateApprovalRequired, Arguments: json.RawMessage(`{"city":"Paris"}`)}},
			`{"kind":"tool_call","round":1,"tool":{"id":"call_1","name":"get_weather","state":"approval_required","arguments":{"city":"Paris"}}}`},
		{agent.Chunk{Kind: agent.KindToolRejected, Round: 2, Tool: &agent.ToolCall{ID: "call_3", Name: "run_command", State: agent.StateRejected, Arguments: json.RawMessage(`{"command":"ls"}`), Reason: "tool call interrupted", PartialResult: "a.txt\n"}},
			`{"kind":"tool_rejected","round":2,"tool":{"id":"call_3","name":"run_command","state":"rejected","arguments":{"command":"ls"},"reason":"tool call interrupted","partial_result":"a.txt\n"}}`},
		{agent.Chunk{Kind: agent.KindInterrupted, Round: 2}, `{"kind":"interrupted","round":2}`},
		{agent.Chunk{Kind: agent.KindWarning, Round: 8, Code: agent.WarnMaxToolRounds, Text: "maximum tool rounds reached"}, `{"kind":"warning","round":8,"code":"max_tool_rounds","text":"maximum tool rounds reached"}`},
		{agent.Chunk{Kind: agent.KindRoundEnd, Round: 1, FinishReason: agent.FinishStop}, `{"kind":"round_end","round":1,"finish_reason":"stop"}`},
		{agent.Chunk{Kind: agent.KindSide, Round: 1, Tool: &agent.ToolCall{ID: "call_2", Name: "ask_user_question"}, Side: map[string]any{"type": "form_request", "form_id": "f1", "questions": []any{}}},
			`{"kind":"side","round":1,"tool":{"id":"call_2","name":"ask_user_question"},"side":{"type":"form_request","form_id":"f1","questions":[]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.chunk.Kind.String(), func(t *testing.T) {
			b, err := json.Marshal(tt.chunk)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(b))
			var back agent.Chunk
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.chunk.Kind, back.Kind)
		})
	}
	_, err := json.Marshal(agent.Chunk{})
	assert.Error(t, err, "a zero chunk does not marshal as valid")
}
