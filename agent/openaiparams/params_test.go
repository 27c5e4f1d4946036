package openaiparams_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/openaiparams"
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
	got, err := openaiparams.FromParams(openaiparams.ToParams(msgs))
	require.NoError(t, err)
	assert.Equal(t, msgs, got)
}

func TestFromParamsUnsupported(t *testing.T) {
	audio := openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.InputAudioContentPart(openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: "AAAA", Format: "wav"}),
	})
	_, err := openaiparams.FromParams([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("ok"), audio})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1")
	assert.Contains(t, err.Error(), "input_audio")
}

// Images go as content parts after the text, bytes as a data: URL, and
// come back the same.
func TestParamsImages(t *testing.T) {
	msgs := []memory.Message{
		{Role: memory.RoleUser, Content: "what is this?", Images: []memory.Image{
			{MIMEType: "image/png", Data: []byte("\x89PNG")},
			{URL: "https://example.com/cat.jpg"},
		}},
		{Role: memory.RoleUser, Images: []memory.Image{{URL: "https://example.com/only.jpg"}}},
	}
	ps := openaiparams.ToParams(msgs)
	b, err := json.Marshal(ps)
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"role":"user","content":[
			{"type":"text","text":"what is this?"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}},
			{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]},
		{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/only.jpg"}}]}
	]`, string(b))
	got, err := openaiparams.FromParams(ps)
	require.NoError(t, err)
	assert.Equal(t, msgs, got)

	// A data: URL that is not base64 stays a URL.
	got, err = openaiparams.FromParams([]openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png,raw"}),
	})})
	require.NoError(t, err)
	assert.Equal(t, []memory.Image{{URL: "data:image/png,raw"}}, got[0].Images)
}
