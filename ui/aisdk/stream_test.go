package aisdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/runner"
)

// A call's tool part carries its arguments as the model wrote them in
// toolMetadata.planround.arguments_text, live as in the history: a number
// JSON.parse would round and a hidden character reach the page as written.
func TestToolInputArgumentsText(t *testing.T) {
	args := `{"cmd":"rm -rf /tmp/x\u202e","n":12345678901234567890}`
	var out bytes.Buffer
	w := NewWriter(&out, nil)
	w.Event(runner.Event{Seq: 1, Turn: 1, Kind: runner.EventTurnStarted, Started: &runner.TurnStarted{}})
	w.Event(runner.Event{Seq: 2, Turn: 1, Kind: runner.EventChunk, Chunk: &agent.Chunk{
		Kind: agent.KindToolCall, Round: 1,
		Tool: &agent.ToolCall{ID: "call_1", Name: "shell", State: agent.StateApprovalRequired, Arguments: json.RawMessage(args), ApprovalID: "ap_1"},
	}})
	require.NoError(t, w.Err())
	var part struct {
		Type  string          `json:"type"`
		Input json.RawMessage `json:"input"`
		Meta  struct {
			Planround struct {
				ArgumentsText string `json:"arguments_text"`
			} `json:"planround"`
		} `json:"toolMetadata"`
	}
	sc := bufio.NewScanner(&out)
	found := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || !strings.Contains(data, `"tool-input-available"`) {
			continue
		}
		require.NoError(t, json.Unmarshal([]byte(data), &part))
		found = true
	}
	require.True(t, found, "no tool-input-available in %s", out.String())
	require.Equal(t, args, part.Meta.Planround.ArgumentsText)
	require.JSONEq(t, args, string(part.Input))
}
