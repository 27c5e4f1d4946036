package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

func TestFromParamsRoundTrip(t *testing.T) {
	msgs := []memory.Message{
		{Role: memory.RoleSystem, Content: "sys"},
		{Role: memory.RoleUser, Content: "hi"},
		{Role: memory.RoleAssistant, Content: "let me look", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c1", Content: "result"},
		{Role: memory.RoleAssistant, Content: "done"},
	}
	got, err := agent.FromParams(agent.ToParams(msgs))
	require.NoError(t, err)
	assert.Equal(t, msgs, got)
}

func TestFromParamsUnsupported(t *testing.T) {
	img := openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png"}),
	})
	_, err := agent.FromParams([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("ok"), img})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1")
	assert.Contains(t, err.Error(), "image_url")
}
