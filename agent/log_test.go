package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

func TestOneLogRecordPerModelCall(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Usage(7, 2).Finish("stop"))
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	a := newAgent(t, srv, func(c *agent.Config) { c.Logger = logger })
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s9", Message: "hi"}))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var rec struct {
		Msg              string
		Round            int
		Outcome          string
		Session          string
		Latency          int64
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &rec))
	assert.Equal(t, "model call", rec.Msg)
	assert.Equal(t, 1, rec.Round)
	assert.Equal(t, "ok", rec.Outcome)
	assert.Equal(t, "s9", rec.Session)
	assert.Positive(t, rec.Latency)
	assert.Equal(t, int64(7), rec.PromptTokens)
	assert.Equal(t, int64(2), rec.CompletionTokens)
}
