package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/agent/openaiparams"
	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/stream"
)

// chatCompletions is the [modelAPI] of OpenAI chat completions (POST
// /chat/completions, streamed), the agent's model API. openai-go builds
// and sends the request (marshalling, auth, HTTP errors as *openai.Error,
// which open turns into a *ProviderError that carries the provider's
// message); the agent's own middleware retries it (retryRequests); the
// streamed body is decoded by internal/wire, which is several times
// cheaper per chunk than openai-go's reflective decoder.
type chatCompletions struct {
	client openai.Client
	name   string
}

// defaultMaxRetries is the retries of a Config whose MaxRetries is zero:
// openai-go's default.
const defaultMaxRetries = 2

func newChatCompletions(cfg Config) *chatCompletions {
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
	return &chatCompletions{client: openai.Client{Options: opts}, name: cfg.Model}
}

// open sends req as a chat-completions request and returns the stream of
// its response. An HTTP error status is a *ProviderError.
func (m *chatCompletions) open(ctx context.Context, req request) (modelStream, error) {
	tools := toolParams(req.tools)
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.name),
		Messages:      openaiparams.ToParams(req.messages),
		Tools:         tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	req.settings.apply(&params, len(tools) > 0)
	var resp *http.Response
	err := m.client.Post(ctx, "chat/completions", params, &resp, option.WithJSONSet("stream", true))
	if err != nil {
		return nil, requestError(err, resp)
	}
	// One allocation holds the decoder and the response, as the decoder
	// alone did before the seam.
	return &chatStream{rd: *wire.NewReader(resp.Body), resp: resp}, nil
}

// chatStream is the [modelStream] of a chat-completions response: the
// internal/wire decoder over its body.
type chatStream struct {
	rd   wire.Reader
	resp *http.Response
}

// next returns the decoder's next delta; its errors are turned into what
// the run reports (see streamError).
func (s *chatStream) next() (*stream.Delta, error) {
	d, err := s.rd.Next()
	if err != nil && err != io.EOF {
		err = streamError(err, s.resp)
	}
	return d, err
}

// close closes the body (see closeBody) and hands back the decoder's
// borrowed memory.
func (s *chatStream) close(complete bool) {
	closeBody(s.resp.Body, complete)
	s.rd.Release()
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

// apply sets s on params. With tools false (a request without tools),
// ParallelToolCalls is left out.
func (s *ModelSettings) apply(params *openai.ChatCompletionNewParams, tools bool) {
	if s.Temperature != nil {
		params.Temperature = openai.Float(*s.Temperature)
	}
	if s.TopP != nil {
		params.TopP = openai.Float(*s.TopP)
	}
	if s.MaxCompletionTokens != nil {
		params.MaxCompletionTokens = openai.Int(int64(*s.MaxCompletionTokens))
	}
	if s.MaxTokens != nil {
		params.MaxTokens = openai.Int(int64(*s.MaxTokens))
	}
	if len(s.Stop) > 0 {
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: s.Stop}
	}
	if s.Seed != nil {
		params.Seed = openai.Int(*s.Seed)
	}
	if s.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(s.ReasoningEffort)
	}
	if s.PromptCacheKey != "" {
		params.PromptCacheKey = openai.String(s.PromptCacheKey)
	}
	if s.PromptCacheRetention != "" {
		params.PromptCacheRetention = openai.ChatCompletionNewParamsPromptCacheRetention(s.PromptCacheRetention)
	}
	if s.ParallelToolCalls != nil && tools {
		params.ParallelToolCalls = openai.Bool(*s.ParallelToolCalls)
	}
	if rf := s.ResponseFormat; rf != nil && rf.Schema != nil {
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rf.Name, Schema: rf.Schema}
		if rf.Description != "" {
			js.Description = openai.String(rf.Description)
		}
		if rf.Strict {
			js.Strict = openai.Bool(true)
		}
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js},
		}
	}
	if len(s.ExtraBody) > 0 {
		params.SetExtraFields(s.ExtraBody)
	}
}

// maxErrorBody bounds what is read of an error body that openai-go could
// not decode.
const maxErrorBody = 64 << 10

// requestError turns the error of a request that got no stream into what
// the run reports: a *ProviderError for an HTTP error status, err itself
// otherwise (a *ConnectionError, a cancelled context). resp is the response,
// or nil when none arrived.
func requestError(err error, resp *http.Response) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		pe := &ProviderError{StatusCode: apiErr.StatusCode, Message: apiErr.Message,
			Type: apiErr.Type, Code: apiErr.Code, Param: apiErr.Param, Err: apiErr}
		if pe.Message == "" {
			fillFromBody(pe, apiErr.Response)
		}
		return pe
	}
	if resp != nil && resp.StatusCode >= 400 {
		// openai-go could not decode the body as its error shape
		// ({"error": "text"} as Ollama sends, an HTML page from a proxy);
		// it put the body back for us.
		pe := &ProviderError{StatusCode: resp.StatusCode}
		fillFromBody(pe, resp)
		return pe
	}
	return err
}

// fillFromBody sets pe's fields from the error body of resp.
func fillFromBody(pe *ProviderError, resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if se := wire.ErrorBody(body); se != nil && se.Message != "" {
		pe.Message = se.Message
		pe.Type = cmp.Or(pe.Type, se.Type)
		pe.Code = cmp.Or(pe.Code, se.Code)
		pe.Param = cmp.Or(pe.Param, se.Param)
		return
	}
	pe.Message = wire.Snippet(body, 200)
}

// streamError turns an error of a response's body into what the run
// reports: a *ProviderError for an error the provider sent, a description
// of what arrived for a body that is not an event stream, err itself
// otherwise.
func streamError(err error, resp *http.Response) error {
	var se *wire.StreamError
	if errors.As(err, &se) {
		return &ProviderError{StatusCode: resp.StatusCode, Message: se.Message, Type: se.Type, Code: se.Code, Param: se.Param}
	}
	var ne *wire.NotStreamError
	if errors.As(err, &ne) {
		ct := "no Content-Type"
		if v := resp.Header.Get("Content-Type"); v != "" {
			ct = "Content-Type " + strconv.Quote(v)
		}
		return fmt.Errorf("the response is not an event stream (%s, %s); it starts: %s", resp.Status, ct, wire.Snippet(ne.Start, 200))
	}
	return err
}
