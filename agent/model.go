package agent

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/agent/openaiparams"
	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/memory"
)

// model is the one adapter between the agent and openai-go. openai-go builds
// and sends the request (marshalling, auth, HTTP errors as *openai.Error,
// which open turns into a *ProviderError that carries the provider's
// message); the agent's own middleware retries it (retryRequests); the
// streamed body is decoded by
// internal/wire, which is several times cheaper per chunk than openai-go's
// reflective decoder and yields the SDK's own stream.Delta.
type model struct {
	client openai.Client
	name   string
}

// defaultMaxRetries is the retries of a Config whose MaxRetries is zero:
// openai-go's default.
const defaultMaxRetries = 2

func newModel(cfg Config) *model {
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = defaultClient()
	}
	retries := cfg.MaxRetries
	if retries == 0 {
		retries = defaultMaxRetries
	}
	opts := []option.RequestOption{
		// The first middleware: the others run once per attempt.
		option.WithMiddleware(retryRequests(max(retries, 0))),
		// The agent retries, not openai-go, which sends again a request
		// whose connection broke after it was written.
		option.WithMaxRetries(0),
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	opts = append(opts, cfg.RequestOptions...)
	opts = append(opts, option.WithMiddleware(releaseBody)) // the last one: next to the transport
	// A bare Client (not openai.NewClient) so that OPENAI_* environment
	// variables are not read behind the host's back.
	return &model{client: openai.Client{Options: opts}, name: cfg.Model}
}

// request is one chat-completions request in the SDK's vocabulary.
type request struct {
	messages []memory.Message
	tools    []openai.ChatCompletionToolUnionParam
	settings ModelSettings
}

// open sends the request and returns the decoder over the streamed body and
// the response, whose body the caller closes with closeBody. An HTTP error
// status is a *ProviderError.
func (m *model) open(ctx context.Context, req request) (*wire.Reader, *http.Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.name),
		Messages:      openaiparams.ToParams(req.messages),
		Tools:         req.tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	req.settings.apply(&params, len(req.tools) > 0)
	var resp *http.Response
	err := m.client.Post(ctx, "chat/completions", params, &resp, option.WithJSONSet("stream", true))
	if err != nil {
		return nil, nil, requestError(err, resp)
	}
	return wire.NewReader(resp.Body), resp, nil
}

// What closeBody reads of a body after the end of the response, at most.
const (
	drainLimit = 4 << 10
	drainTime  = 50 * time.Millisecond
)

// closeBody closes the body of a response. After a complete response
// ([DONE] or the end of the body was read) it first reads what is left, up
// to drainLimit bytes and for at most drainTime: the end of the chunked
// body usually comes just after [DONE], and net/http reuses a connection
// only when its body was read to the end, so this saves a new TCP (and TLS)
// connection per request. A server that keeps the body open after [DONE]
// costs at most drainTime, then the body is closed under the read.
func closeBody(body io.ReadCloser, complete bool) {
	if complete {
		closed := make(chan struct{})
		t := time.AfterFunc(drainTime, func() {
			body.Close()
			close(closed)
		})
		_, _ = io.CopyN(io.Discard, body, drainLimit)
		if !t.Stop() {
			<-closed // the timer's Close has returned: nothing outlives the call
		}
	}
	body.Close()
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
