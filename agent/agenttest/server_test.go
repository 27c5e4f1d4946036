package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// call is a tool call assembled from stream fragments.
type call struct{ id, name, args string }

// result is what a client read from one stream.
type result struct {
	chunks    int
	text      string
	reasoning string
	calls     []*call
	finish    string
	usage     openai.CompletionUsage
	err       error
}

func newClient(s *agenttest.Server) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(s.URL()),
		option.WithAPIKey("k"),
		option.WithHTTPClient(s.Client()),
		option.WithMaxRetries(0),
	)
}

func params(tools ...string) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    "test-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
	for _, name := range tools {
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       name,
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}},
		}))
	}
	return p
}

// read streams one request and assembles everything the way an SDK
// would: calls by index, reasoning from the extra field.
func read(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams) result {
	var r result
	st := c.Chat.Completions.NewStreaming(ctx, p)
	defer st.Close()
	for st.Next() {
		ch := st.Current()
		r.chunks++
		if ch.JSON.Usage.Valid() {
			r.usage = ch.Usage
		}
		for _, choice := range ch.Choices {
			r.text += choice.Delta.Content
			if f, ok := choice.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				_ = json.Unmarshal([]byte(f.Raw()), &s)
				r.reasoning += s
			}
			for _, tc := range choice.Delta.ToolCalls {
				i := int(tc.Index)
				for len(r.calls) <= i {
					r.calls = append(r.calls, &call{})
				}
				c := r.calls[i]
				if tc.ID != "" {
					c.id = tc.ID
				}
				c.name += tc.Function.Name
				c.args += tc.Function.Arguments
			}
			if choice.FinishReason != "" {
				r.finish = choice.FinishReason
			}
		}
	}
	r.err = st.Err()
	return r
}

// newServer starts a server that is closed, and whose goroutines are
// checked to be gone, when the test ends.
func newServer(t *testing.T) (*agenttest.Server, openai.Client) {
	t.Helper()
	checkGoroutines(t)
	s := agenttest.NewServer()
	t.Cleanup(s.Close)
	return s, newClient(s)
}

// checkGoroutines fails the test if goroutines started during it are
// still running after its other cleanups, once the idle connections of the
// default transport (which the clients use) are closed.
func checkGoroutines(t *testing.T) {
	t.Helper()
	leaktest.Check(t)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}

func TestText(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("Hel", "lo <no_", "tool>").Usage(12, 5).Finish("stop"))
	r := read(t.Context(), c, params())
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello <no_tool>" || r.finish != "stop" {
		t.Errorf("text %q finish %q, want %q stop", r.text, r.finish, "Hello <no_tool>")
	}
	if r.usage.PromptTokens != 12 || r.usage.CompletionTokens != 5 || r.usage.TotalTokens != 17 {
		t.Errorf("usage = %+v, want 12/5/17", r.usage)
	}
	// 3 text chunks, the finish chunk, the usage chunk.
	if r.chunks != 5 {
		t.Errorf("chunks = %d, want 5", r.chunks)
	}
	if s.Pending() != 0 {
		t.Errorf("pending = %d, want 0", s.Pending())
	}
}

// TestUsageDetails: the cached and reasoning tokens a script sets reach
// the official client where OpenAI puts them, in either call order.
func TestUsageDetails(t *testing.T) {
	for name, b := range map[string]agenttest.Response{
		"details after usage":  agenttest.Reply().Text("hi").Usage(120, 30).CachedTokens(64).ReasoningTokens(9).Finish("stop"),
		"details before usage": agenttest.Reply().Text("hi").CachedTokens(64).ReasoningTokens(9).Usage(120, 30).Finish("stop"),
	} {
		t.Run(name, func(t *testing.T) {
			s, c := newServer(t)
			s.Enqueue(b)
			r := read(t.Context(), c, params())
			if r.err != nil {
				t.Fatal(r.err)
			}
			u := r.usage
			if u.PromptTokens != 120 || u.CompletionTokens != 30 || u.TotalTokens != 150 ||
				u.PromptTokensDetails.CachedTokens != 64 || u.CompletionTokensDetails.ReasoningTokens != 9 {
				t.Errorf("usage = %+v, want 120/30/150, 64 cached, 9 reasoning", u)
			}
		})
	}
}

func TestShapes(t *testing.T) {
	weather := []string{`{"ci`, `ty":"Pa`, `ris"}`}
	tests := []struct {
		name  string
		b     *agenttest.Builder
		calls []call // want
	}{
		{"split", agenttest.Reply().Text("Checking.").
			Call(0, "call_1", "get_weather", weather...).
			Call(1, "call_2", "get_time", `{"tz":`, `"CET"}`),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}, {"call_2", "get_time", `{"tz":"CET"}`}}},
		{"whole", agenttest.Reply().WholeCalls().
			Call(0, "call_1", "get_weather", weather...).
			Call(1, "call_2", "get_time", `{"tz":`, `"CET"}`),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}, {"call_2", "get_time", `{"tz":"CET"}`}}},
		{"interleaved", agenttest.Reply().
			Fragment(0, "call_1", "get_weather", "").
			Fragment(1, "call_2", "get_time", `{"tz"`).
			Fragment(0, "", "", `{"city":`).
			Fragment(1, "", "", `:"CET"}`).
			Fragment(0, "", "", `"Paris"}`),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}, {"call_2", "get_time", `{"tz":"CET"}`}}},
		{"no index", agenttest.Reply().OmitIndex().Call(0, "call_1", "get_weather", weather...),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}}},
		{"id every fragment", agenttest.Reply().IDOnEveryFragment().Call(0, "call_1", "get_weather", weather...),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}}},
		{"finish with last", agenttest.Reply().FinishWithLast().Call(0, "call_1", "get_weather", weather...),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}}},
		{"usage in finish", agenttest.Reply().UsageInFinish().Usage(3, 4).Call(0, "call_1", "get_weather", weather...),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}}},
		{"azure first chunk", agenttest.Reply().EmptyFirstChunk().Usage(3, 4).Call(0, "call_1", "get_weather", weather...),
			[]call{{"call_1", "get_weather", `{"city":"Paris"}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newServer(t)
			s.Enqueue(tt.b.Finish("tool_calls"))
			r := read(t.Context(), c, params("get_weather", "get_time"))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.finish != "tool_calls" {
				t.Errorf("finish = %q, want tool_calls", r.finish)
			}
			if len(r.calls) != len(tt.calls) {
				t.Fatalf("got %d calls, want %d", len(r.calls), len(tt.calls))
			}
			for i, want := range tt.calls {
				if *r.calls[i] != want {
					t.Errorf("call %d = %+v, want %+v", i, *r.calls[i], want)
				}
			}
		})
	}
}

// TestShapesOnTheWire checks the JSON the shape switches produce.
func TestShapesOnTheWire(t *testing.T) {
	tests := []struct {
		name       string
		r          agenttest.Response
		want, nope []string
	}{
		{"openai", agenttest.Reply().Text("a").Call(0, "c1", "f", `{}`).Usage(1, 2).Finish("tool_calls"),
			[]string{`"role":"assistant","content":"a"`, `"finish_reason":null`, `{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""}}`,
				`{"index":0,"function":{"arguments":"{}"}}`, `"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`, "data: [DONE]\n\n"},
			nil},
		{"whole", agenttest.Reply().WholeCalls().Call(0, "c1", "f", `{"a"`, `:1}`).Finish("tool_calls"),
			[]string{`{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}`}, nil},
		{"no index", agenttest.Reply().OmitIndex().Call(0, "c1", "f", `{}`).Finish("tool_calls"),
			[]string{`{"id":"c1","type":"function","function":{"name":"f","arguments":""}}`}, []string{`"index":0,"id"`}},
		{"id every fragment", agenttest.Reply().IDOnEveryFragment().Call(0, "c1", "f", `{}`).Finish("tool_calls"),
			[]string{`{"index":0,"id":"c1","type":"function","function":{"arguments":"{}"}}`}, nil},
		{"finish with last", agenttest.Reply().FinishWithLast().Text("a", "b").Finish("stop"),
			[]string{`"content":"b"},"finish_reason":"stop"`}, []string{`"delta":{},"finish_reason"`}},
		{"usage in finish", agenttest.Reply().UsageInFinish().Text("a").Usage(1, 2).Finish("stop"),
			[]string{`"delta":{},"finish_reason":"stop"}],"usage":{`}, []string{`"choices":[],"usage"`}},
		{"azure", agenttest.Reply().EmptyFirstChunk().Text("a").Finish("stop"),
			[]string{`"prompt_filter_results":[{`, `"choices":[]}`}, nil},
		{"no finish", agenttest.Reply().Text("a").Finish(""),
			[]string{"data: [DONE]"}, []string{`"finish_reason":"`}},
		{"reasoning", agenttest.Reply().Reasoning("hmm").Text("a").Finish("stop"),
			[]string{`"delta":{"role":"assistant","reasoning_content":"hmm"}`}, nil},
		{"no done", agenttest.Reply().Text("a").Finish("stop").NoDone(), nil, []string{"[DONE]"}},
		{"keep-alive", agenttest.Reply().Text("a", "b").Finish("stop").KeepAlive(), []string{"\n\n: keep-alive\n\ndata: "}, nil},
		{"frames", agenttest.Frames(`{"x":1}`, "[DONE]"), []string{"data: {\"x\":1}\n\ndata: [DONE]\n\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			s.Enqueue(tt.r)
			body := post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, http.StatusOK)
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			for _, n := range tt.nope {
				if strings.Contains(body, n) {
					t.Errorf("body has %q:\n%s", n, body)
				}
			}
		})
	}
}

// post sends body to the server with a plain HTTP client and returns the
// response body, failing unless the status is want.
func post(t *testing.T, s *agenttest.Server, body string, want int) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
	}
	return string(b)
}

func TestReasoning(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Reasoning("think", "ing").Text("done").Finish("stop"))
	r := read(t.Context(), c, params())
	if r.err != nil || r.reasoning != "thinking" || r.text != "done" {
		t.Errorf("got reasoning %q text %q err %v", r.reasoning, r.text, r.err)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		status int
		code   string
	}{
		{http.StatusTooManyRequests, "rate_limit_exceeded"},
		{http.StatusInternalServerError, ""},
		{http.StatusUnauthorized, "invalid_api_key"},
		{http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			s, c := newServer(t)
			s.Enqueue(agenttest.HTTPError(tt.status, "nope").RetryAfter(1500 * time.Millisecond))
			r := read(t.Context(), c, params())
			var apiErr *openai.Error
			if !errors.As(r.err, &apiErr) {
				t.Fatalf("err = %v, want *openai.Error", r.err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Message != "nope" || apiErr.Code != tt.code {
				t.Errorf("status %d message %q code %q, want %d nope %q", apiErr.StatusCode, apiErr.Message, apiErr.Code, tt.status, tt.code)
			}
			if got := apiErr.Response.Header.Get("Retry-After"); got != "2" {
				t.Errorf("Retry-After = %q, want 2", got)
			}
			if r.chunks != 0 {
				t.Errorf("chunks = %d, want 0", r.chunks)
			}
		})
	}
	t.Run("non-error status", func(t *testing.T) {
		if got := agenttest.HTTPError(200, "x").Status(); got != http.StatusInternalServerError {
			t.Errorf("status = %d, want 500", got)
		}
	})
}

func TestCutAfter(t *testing.T) {
	s, c := newServer(t)
	r0 := agenttest.Reply().Text("a", "b", "c", "d").Finish("stop")
	s.Enqueue(r0.CutAfter(2))
	r := read(t.Context(), c, params())
	if r.err == nil || !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", r.err)
	}
	if r.text != "ab" || r.finish != "" {
		t.Errorf("text %q finish %q, want ab and none", r.text, r.finish)
	}
	// The same Response, unmodified, still streams whole.
	s.Enqueue(r0)
	if r := read(t.Context(), c, params()); r.err != nil || r.text != "abcd" {
		t.Errorf("reused response: text %q err %v", r.text, r.err)
	}
}

func TestNoDone(t *testing.T) {
	for _, reason := range []string{"stop", ""} {
		t.Run("finish="+reason, func(t *testing.T) {
			s, c := newServer(t)
			s.Enqueue(agenttest.Reply().Text("a", "b").Finish(reason).NoDone())
			r := read(t.Context(), c, params())
			if r.err != nil || r.text != "ab" || r.finish != reason {
				t.Errorf("err %v text %q finish %q, want nil ab %q", r.err, r.text, r.finish, reason)
			}
		})
	}
}

func TestKeepAliveAndDelay(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("a", "b", "c").Finish("stop").KeepAlive().Delay(time.Millisecond))
	r := read(t.Context(), c, params())
	if r.err != nil || r.text != "abc" || r.finish != "stop" {
		t.Errorf("err %v text %q finish %q", r.err, r.text, r.finish)
	}
}

func TestErrorFrame(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("a", "b", "c").Finish("stop").ErrorAfter(1, "overloaded"))
	r := read(t.Context(), c, params())
	var se *ssestream.StreamError
	if !errors.As(r.err, &se) || !strings.Contains(se.Message, "overloaded") {
		t.Fatalf("err = %v, want a stream error about overloaded", r.err)
	}
	if r.text != "a" {
		t.Errorf("text = %q, want a", r.text)
	}
}

// TestCancelMidStream cancels the client once a frame has been flushed,
// on a stream that holds and on one with a long delay.
func TestCancelMidStream(t *testing.T) {
	base := agenttest.Reply().Text("a", "b", "c").Finish("stop")
	tests := []struct {
		name string
		r    agenttest.Response
		at   int // frame after which to cancel
		text string
	}{
		{"hold", base.HoldAfter(2), 2, "ab"},
		{"delay", base.Delay(time.Hour), 1, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newServer(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s.Enqueue(tt.r.OnFlush(func(n int) {
				if n == tt.at {
					cancel()
				}
			}))
			got := read(ctx, c, params())
			if !errors.Is(got.err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", got.err)
			}
			// The client may or may not have decoded the last flushed
			// frame before it saw the cancellation.
			if !strings.HasPrefix(tt.text, got.text) {
				t.Errorf("text = %q, want a prefix of %q", got.text, tt.text)
			}
		})
	}
}

// TestCloseEndsHold checks that Close returns while a stream holds.
func TestCloseEndsHold(t *testing.T) {
	checkGoroutines(t)
	s := agenttest.NewServer()
	c := newClient(s)
	flushed := make(chan struct{})
	s.Enqueue(agenttest.Reply().Text("a", "b").Finish("stop").HoldAfter(1).OnFlush(func(int) { close(flushed) }))
	done := make(chan result, 1)
	go func() { done <- read(context.Background(), c, params()) }()
	<-flushed
	s.Close()
	r := <-done
	if r.text != "a" || r.finish != "" {
		t.Errorf("text %q finish %q", r.text, r.finish)
	}
}

func TestExhausted(t *testing.T) {
	s, c := newServer(t)
	r := read(t.Context(), c, params())
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 500 || !strings.Contains(apiErr.Message, "script exhausted") {
		t.Fatalf("err = %v, want a 500 saying the script is exhausted", r.err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("recorded %d requests, want 1", n)
	}
}

func TestRespond(t *testing.T) {
	s, c := newServer(t)
	s.Respond(func(req *agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("dynamic ", req.LastMessage().Content).Finish("stop")
	})
	s.Enqueue(agenttest.Reply().Text("queued").Finish("stop"))
	if r := read(t.Context(), c, params()); r.text != "queued" {
		t.Errorf("first = %q, want the queued response", r.text)
	}
	if r := read(t.Context(), c, params()); r.text != "dynamic hi" {
		t.Errorf("second = %q, want dynamic hi", r.text)
	}
	s.Respond(nil)
	if r := read(t.Context(), c, params()); r.err == nil {
		t.Error("no error after Respond(nil) with an empty queue")
	}
}

func TestConcurrentRequests(t *testing.T) {
	s, c := newServer(t)
	s.Respond(func(req *agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text(req.LastMessage().Content).Finish("stop")
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			p := params()
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("x", i+1))}
			if r := read(t.Context(), c, p); r.err != nil || len(r.text) != i+1 {
				errs <- errors.Join(r.err, errors.New("wrong text "+r.text))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reqs := s.Requests()
	if len(reqs) != 8 {
		t.Fatalf("recorded %d requests, want 8", len(reqs))
	}
	for i, r := range reqs {
		if r.Seq != i+1 {
			t.Errorf("request %d has Seq %d", i, r.Seq)
		}
	}
}

func TestReplayStreams(t *testing.T) {
	files, err := filepath.Glob("../../testdata/streams/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, c := newServer(t)
			resp, err := agenttest.ReplayFile(f)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if resp.NumFrames() < 2 {
				t.Fatalf("%d frames, want the file split into events", resp.NumFrames())
			}
			// The recordings call tools of their own: what is tested here
			// is the stream, not whether the request offered them.
			resp = resp.Unsolicited()
			s.Enqueue(resp)
			r := read(t.Context(), c, params("f"))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.chunks == 0 {
				t.Fatal("no chunk decoded")
			}
			if r.text == "" && r.reasoning == "" && len(r.calls) == 0 {
				t.Error("stream carried neither text, reasoning nor tool calls")
			}
			// Byte-exact: the body on the wire is the file.
			s.Enqueue(resp)
			if body := post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200); body != string(raw) {
				t.Error("replayed body differs from the file")
			}
		})
	}
	if _, err := agenttest.ReplayFile("testdata/missing.sse"); err == nil {
		t.Error("ReplayFile of a missing file: no error")
	}
}

func TestNonStreaming(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("Hel", "lo").Call(0, "call_1", "f", `{"a"`, `:1}`).Usage(2, 3).Finish("tool_calls"))
	got, err := c.Chat.Completions.New(t.Context(), params("f"))
	if err != nil {
		t.Fatal(err)
	}
	m := got.Choices[0].Message
	if m.Content != "Hello" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"a":1}` ||
		m.ToolCalls[0].ID != "call_1" || got.Choices[0].FinishReason != "tool_calls" || got.Usage.TotalTokens != 5 {
		t.Errorf("completion = %s", got.RawJSON())
	}
	if s.Requests()[0].Stream {
		t.Error("request recorded as streaming")
	}
	s.Enqueue(agenttest.Frames("[DONE]"))
	if _, err := c.Chat.Completions.New(t.Context(), params()); err == nil {
		t.Error("non-streaming request on a Frames response: no error")
	}
}

func TestRequestRecord(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Finish("stop"), agenttest.Reply().Finish("stop"))

	// Without tools.
	p := params()
	if r := read(t.Context(), c, p); r.err != nil {
		t.Fatal(r.err)
	}
	// With tools and a full history.
	p = params("get_weather", "get_time")
	p.ParallelToolCalls = openai.Bool(true)
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	p.Messages = []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("be brief"),
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("look"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,AA=="}),
		}),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`},
			}}},
		}},
		openai.ToolMessage("sunny", "call_1"),
	}
	if r := read(t.Context(), c, p); r.err != nil {
		t.Fatal(r.err)
	}

	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	r0, r1 := reqs[0], reqs[1]
	if r0.HasTools() || len(r0.ToolNames()) != 0 || r0.Model != "test-model" || !r0.Stream {
		t.Errorf("first request: tools %v model %q stream %v", r0.ToolNames(), r0.Model, r0.Stream)
	}
	if m := r0.LastMessage(); m.Role != "user" || m.Content != "hi" {
		t.Errorf("first request last message = %+v", m)
	}
	if got := r0.Header.Get("Authorization"); got != "Bearer k" {
		t.Errorf("Authorization = %q", got)
	}
	if r0.ParallelToolCalls != nil {
		t.Errorf("parallel_tool_calls recorded although unset")
	}

	if !r1.HasTools() || strings.Join(r1.ToolNames(), ",") != "get_weather,get_time" || !r1.HasTool("get_time") || r1.HasTool("nope") {
		t.Errorf("tools = %v", r1.ToolNames())
	}
	var schema map[string]any
	if err := json.Unmarshal(r1.Tools[0].Parameters, &schema); err != nil || schema["type"] != "object" || r1.Tools[0].Type != "function" {
		t.Errorf("tool schema %s (%v)", r1.Tools[0].Parameters, err)
	}
	if r1.ParallelToolCalls == nil || !*r1.ParallelToolCalls || r1.StreamOptions == nil || !r1.StreamOptions.IncludeUsage {
		t.Errorf("parallel %v stream options %+v", r1.ParallelToolCalls, r1.StreamOptions)
	}
	if len(r1.Messages) != 4 {
		t.Fatalf("%d messages, want 4", len(r1.Messages))
	}
	sys, user, asst, tool := r1.Messages[0], r1.Messages[1], r1.Messages[2], r1.Messages[3]
	if sys.Role != "system" || sys.Content != "be brief" {
		t.Errorf("system = %+v", sys)
	}
	if user.Content != "look" || len(user.Parts) != 2 || user.Parts[1].Type != "image_url" || user.Parts[1].ImageURL == "" {
		t.Errorf("user = %+v", user)
	}
	if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0] != (agenttest.ToolCall{ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city":"Paris"}`}) {
		t.Errorf("assistant = %+v", asst)
	}
	if tool.Role != "tool" || tool.ToolCallID != "call_1" || tool.Content != "sunny" {
		t.Errorf("tool = %+v", tool)
	}
	if m, ok := r1.LastMessageWithRole("system"); !ok || m.Content != "be brief" {
		t.Errorf("LastMessageWithRole(system) = %+v %v", m, ok)
	}
	if !json.Valid(r1.Raw) || !strings.Contains(string(r1.Raw), `"tool_call_id":"call_1"`) {
		t.Errorf("raw body %s", r1.Raw)
	}
	var empty agenttest.Request
	if m := empty.LastMessage(); m.Role != "" {
		t.Errorf("LastMessage of an empty request = %+v", m)
	}
}

func TestBadRequests(t *testing.T) {
	s, _ := newServer(t)
	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/completions", "{}", http.StatusNotFound},
		{http.MethodPost, "/v1/chat/completions", "{not json", http.StatusBadRequest},
		{http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`, http.StatusBadRequest},
		{http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":7}]}`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, strings.TrimSuffix(s.URL(), "/v1")+tt.path, strings.NewReader(tt.body))
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if resp.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.Error.Message, "agenttest: ") {
			t.Errorf("%s %s %q: status %d body %s, want %d", tt.method, tt.path, tt.body, resp.StatusCode, b, tt.status)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("recorded %d bad requests, want 0", n)
	}
}

func BenchmarkStream10k(b *testing.B) {
	pieces := make([]string, 10000)
	for i := range pieces {
		pieces[i] = "tok"
	}
	resp := agenttest.Reply().Text(pieces...).Finish("stop")
	s := agenttest.NewServer()
	defer s.Close()
	s.Respond(func(*agenttest.Request) agenttest.Response { return resp })
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.Client().Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			b.Fatal(err)
		}
		r.Body.Close()
	}
}

func TestResetAfter(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("a", "b", "c").Finish("stop").ResetAfter(2))
	r := read(t.Context(), c, params())
	if r.err == nil || !errors.Is(r.err, syscall.ECONNRESET) {
		t.Fatalf("err = %v, want connection reset", r.err)
	}
	if !strings.HasPrefix("ab", r.text) || r.finish != "" {
		t.Errorf("text %q finish %q, want a prefix of ab and no finish", r.text, r.finish)
	}
}

// rawPost posts a streaming request and returns the answer as it came.
func rawPost(t *testing.T, s *agenttest.Server) (*http.Response, string) {
	t.Helper()
	resp, err := s.Client().Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestBody(t *testing.T) {
	tests := []struct {
		name     string
		resp     agenttest.Response
		status   int
		ct, body string
		noCT     bool
	}{
		{"html page", agenttest.Body(502, "text/html", "<html>bad gateway</html>"), 502, "text/html", "<html>bad gateway</html>", false},
		{"json where a stream was asked", agenttest.Body(200, "application/json", `{"error":{"message":"no"}}`), 200, "application/json", `{"error":{"message":"no"}}`, false},
		{"no content type", agenttest.Body(200, "", "plain words"), 200, "", "plain words", true},
		{"bad status", agenttest.Body(42, "text/plain", "x"), 500, "application/json", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			s.Enqueue(tt.resp)
			resp, body := rawPost(t, s)
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != tt.ct {
				t.Errorf("status %d content type %q, want %d %q", resp.StatusCode, resp.Header.Get("Content-Type"), tt.status, tt.ct)
			}
			if _, ok := resp.Header["Content-Type"]; ok == tt.noCT {
				t.Errorf("Content-Type present = %v, want %v", ok, !tt.noCT)
			}
			if tt.body != "" && body != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
		})
	}
}

func TestIgnoreStream(t *testing.T) {
	s, _ := newServer(t)
	s.Enqueue(agenttest.Reply().Text("Hi ", "there").Usage(3, 2).Finish("stop").IgnoreStream())
	resp, body := rawPost(t, s)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var c openai.ChatCompletion
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("body is not a chat.completion: %v\n%s", err, body)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hi there" || c.Usage.TotalTokens != 5 {
		t.Errorf("completion = %s", body)
	}
}

func TestStreamContentTypeOverride(t *testing.T) {
	s, _ := newServer(t)
	s.Enqueue(agenttest.Reply().Text("a").Finish("stop").WithHeader("Content-Type", "text/plain"))
	resp, body := rawPost(t, s)
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("body = %q, want a stream", body)
	}
	s.Enqueue(agenttest.Reply().Text("a").Finish("stop").WithHeader("Content-Type", ""))
	if resp, _ := rawPost(t, s); resp.Header["Content-Type"] != nil {
		t.Errorf("Content-Type = %q, want none", resp.Header["Content-Type"])
	}
}

func TestConns(t *testing.T) {
	s, _ := newServer(t)
	s.Enqueue(agenttest.Reply().Text("a").Finish("stop"), agenttest.Reply().Text("b").Finish("stop"))
	// A client that reads each body to its end reuses the connection.
	for range 2 {
		rawPost(t, s)
	}
	if n := s.Conns(); n != 1 {
		t.Errorf("Conns = %d after two requests read to their end, want 1", n)
	}
	// One that closes the body early cannot.
	s.Enqueue(agenttest.Reply().Text("c").Finish("stop"))
	resp, err := s.Client().Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.Enqueue(agenttest.Reply().Text("d").Finish("stop"))
	rawPost(t, s)
	if n := s.Conns(); n != 2 {
		t.Errorf("Conns = %d, want 2 after a body closed before its end", n)
	}
}
