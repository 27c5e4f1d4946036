package agent

import (
	"context"
	"io"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/memory"
)

// model is the one adapter between the agent and openai-go. openai-go builds
// and sends the request (marshalling, auth, retries before the response,
// HTTP errors as *openai.Error); the streamed body is decoded by
// internal/wire, which is several times cheaper per chunk than openai-go's
// reflective decoder and yields the SDK's own stream.Delta.
type model struct {
	client openai.Client
	name   string
}

func newModel(cfg Config) *model {
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	opts = append(opts, cfg.RequestOptions...)
	// A bare Client (not openai.NewClient) so that OPENAI_* environment
	// variables are not read behind the host's back.
	return &model{client: openai.Client{Options: opts}, name: cfg.Model}
}

// request is one chat-completions request in the SDK's vocabulary.
type request struct {
	messages []memory.Message
	tools    []openai.ChatCompletionToolUnionParam
}

// open sends the request and returns the decoder over the streamed body and
// the body to close.
func (m *model) open(ctx context.Context, req request) (*wire.Reader, io.Closer, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.name),
		Messages:      memory.ToParams(req.messages),
		Tools:         req.tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	var resp *http.Response
	err := m.client.Post(ctx, "chat/completions", params, &resp, option.WithJSONSet("stream", true))
	if err != nil {
		return nil, nil, err
	}
	return wire.NewReader(resp.Body), resp.Body, nil
}

// toolParams converts tool definitions to request tools.
func toolParams(defs []ToolDefinition) []openai.ChatCompletionToolUnionParam {
	if len(defs) == 0 {
		return nil
	}
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(defs))
	for _, d := range defs {
		params := d.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fn := shared.FunctionDefinitionParam{
			Name:       d.Name,
			Parameters: shared.FunctionParameters(params),
		}
		if d.Description != "" {
			fn.Description = openai.String(d.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out
}
