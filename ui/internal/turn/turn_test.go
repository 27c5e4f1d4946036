package turn

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

// TestAsksPerson: a form asks a person whether its payload is typed or
// decoded from another process's event log; a card does not.
func TestAsksPerson(t *testing.T) {
	form := interact.FormRequest{Type: interact.TypeFormRequest, FormID: "f1"}
	raw, err := json.Marshal(form)
	require.NoError(t, err)
	var decoded map[string]any
	require.NoError(t, json.Unmarshal(raw, &decoded))
	for _, side := range []any{form, &form, decoded, json.RawMessage(raw)} {
		require.True(t, AsksPerson(&agent.Chunk{Kind: agent.KindSide, Side: side}), "%T", side)
		require.Equal(t, "f1", FormID(side), "%T", side)
	}
	card := map[string]any{"type": interact.TypeCard, "title": "x"}
	require.False(t, AsksPerson(&agent.Chunk{Kind: agent.KindSide, Side: card}))
	require.Empty(t, FormID(card))
	require.True(t, AsksPerson(&agent.Chunk{Kind: agent.KindToolCall, Tool: &agent.ToolCall{State: agent.StateApprovalRequired}}))
	require.False(t, AsksPerson(&agent.Chunk{Kind: agent.KindToolCall, Tool: &agent.ToolCall{State: agent.StateExecuting}}))
	require.False(t, AsksPerson(&agent.Chunk{Kind: agent.KindText, Text: "x"}))
}

func TestCheckSessionID(t *testing.T) {
	for _, id := range []string{"chat-1", "4f1c0d", "s/with/slashes", "émoji😀"} {
		require.Nil(t, CheckSessionID(id), id)
	}
	for _, id := range []string{"", "a\x00b", "tab\there", "\xff", string(make([]byte, MaxSessionID+1))} {
		require.NotNil(t, CheckSessionID(id), "%q", id)
	}
}
