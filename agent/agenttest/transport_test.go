package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// unreachable is a base URL whose host never resolves: a request that
// missed the in-process transport would fail instead of leaving the machine.
const unreachable = "http://model.invalid/v1"

// inProcess returns an openai-go client whose requests f answers in process.
func inProcess(f agenttest.RespondFunc) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(unreachable),
		option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: f}),
		option.WithMaxRetries(0),
	)
}

// post sends body to f's chat-completions path and returns the response.
func postTo(t *testing.T, ctx context.Context, f agenttest.RespondFunc, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://model.invalid"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: f}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// TestRespondFuncStreams: a RespondFunc serves the same stream a Server
// does, to the same client, without a port, and sees the decoded request.
func TestRespondFuncStreams(t *testing.T) {
	leaktest.Check(t)
	var got atomic.Pointer[agenttest.Request]
	c := inProcess(func(req *agenttest.Request) agenttest.Response {
		got.Store(req)
		return agenttest.Reply().Text("Hel", "lo").Reasoning("hm").
			Call(0, "call_1", "lookup", `{"q":`, `"x"}`).Usage(12, 5).Finish("tool_calls").
			Delay(time.Millisecond).KeepAlive()
	})
	r := read(t.Context(), c, params("lookup"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello" || r.reasoning != "hm" || r.finish != "tool_calls" || r.usage.TotalTokens != 17 {
		t.Errorf("text %q reasoning %q finish %q usage %+v", r.text, r.reasoning, r.finish, r.usage)
	}
	if len(r.calls) != 1 || *r.calls[0] != (call{"call_1", "lookup", `{"q":"x"}`}) {
		t.Errorf("calls = %v", r.calls)
	}
	req := got.Load()
	if req == nil || req.LastMessage().Content != "hi" || !req.HasTool("lookup") || !req.Stream || req.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("the RespondFunc saw %+v", req)
	}
}

// TestRespondFuncNonStreaming: a request without "stream" gets the
// chat.completion object.
func TestRespondFuncNonStreaming(t *testing.T) {
	leaktest.Check(t)
	c := inProcess(func(*agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("Sum", "mary.").Finish("stop")
	})
	out, err := c.Chat.Completions.New(t.Context(), params())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content != "Summary." {
		t.Errorf("completion = %+v", out.Choices)
	}
}

// TestRespondFuncFaults: a cut or reset connection and an error status
// reach the client as they would from a Server.
func TestRespondFuncFaults(t *testing.T) {
	leaktest.Check(t)
	reply := agenttest.Reply().Text("a", "b", "c").Finish("stop")
	for _, tt := range []struct {
		name   string
		resp   agenttest.Response
		status int
		want   func(body string, err error) bool
	}{
		{"cut", reply.CutAfter(1), 200, func(b string, err error) bool {
			return errors.Is(err, io.ErrUnexpectedEOF) && strings.Count(b, "data: ") == 1
		}},
		{"reset", reply.ResetAfter(2), 200, func(b string, err error) bool {
			return errors.Is(err, syscall.ECONNRESET) && strings.Count(b, "data: ") == 2
		}},
		{"error frame", reply.ErrorAfter(1, "overloaded"), 200, func(b string, err error) bool {
			return err == nil && strings.Contains(b, `"message":"overloaded"`) && !strings.Contains(b, "[DONE]")
		}},
		{"http error", agenttest.HTTPError(429, "slow down").RetryAfter(2 * time.Second), 429, func(b string, err error) bool {
			return err == nil && strings.Contains(b, `"rate_limit_exceeded"`)
		}},
		{"whole", reply, 200, func(b string, err error) bool {
			return err == nil && strings.HasSuffix(b, "data: [DONE]\n\n")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response { return tt.resp })
			resp := postTo(t, t.Context(), f, http.MethodPost, "/v1/chat/completions", streamBody)
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !tt.want(string(b), err) {
				t.Errorf("status %d, body %q, error %v", resp.StatusCode, b, err)
			}
			if tt.status == 429 && resp.Header.Get("Retry-After") != "2" {
				t.Errorf("Retry-After = %q, want 2", resp.Header.Get("Retry-After"))
			}
		})
	}
}

// TestRespondFuncEndsWithItsClient: closing the body or cancelling the
// request ends a stream that holds or waits, and its goroutine.
func TestRespondFuncEndsWithItsClient(t *testing.T) {
	for _, tt := range []struct {
		name string
		resp agenttest.Response
	}{
		{"hold", agenttest.Reply().Text("a", "b").Finish("stop").HoldAfter(1)},
		{"delay", agenttest.Reply().Text("a", "b").Finish("stop").Delay(time.Hour)},
	} {
		for _, how := range []string{"close", "cancel"} {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				leaktest.Check(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				f := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response { return tt.resp })
				resp := postTo(t, ctx, f, http.MethodPost, "/v1/chat/completions", streamBody)
				buf := make([]byte, 512)
				if n, err := resp.Body.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "data: ") {
					t.Fatalf("first read: %q, %v", buf[:n], err)
				}
				if how == "close" {
					resp.Body.Close()
					return // leaktest: the handler has returned
				}
				cancel()
				if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
					t.Errorf("read after cancel: %v, want context.Canceled", err)
				}
			})
		}
	}
}

// TestRespondFuncRefuses: other paths, methods and bodies are answered
// with an error, without asking the function.
func TestRespondFuncRefuses(t *testing.T) {
	leaktest.Check(t)
	f := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response {
		t.Error("the RespondFunc was called")
		return agenttest.Reply().Finish("stop")
	})
	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/v1/chat/completions", "", 405},
		{http.MethodPost, "/v1/models", streamBody, 404},
		{http.MethodPost, "/v1/chat/completions", "{", 400},
		{http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`, 400},
	} {
		resp := postTo(t, t.Context(), f, tt.method, tt.path, tt.body)
		var e struct {
			Error struct{ Message string }
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tt.status || json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.Error.Message, "agenttest: ") {
			t.Errorf("%s %s %q: %d %s, want %d and an agenttest error", tt.method, tt.path, tt.body, resp.StatusCode, b, tt.status)
		}
	}
	// Any base path will do.
	ok := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response { return agenttest.Reply().Text("x").Finish("stop") })
	if resp := postTo(t, t.Context(), ok, http.MethodPost, "/openai/deployments/d/chat/completions", streamBody); resp.StatusCode != 200 {
		t.Errorf("a base path of its own: status %d", resp.StatusCode)
	}
}

// TestRespondFuncPanics: a function that panics fails the request, not
// the process.
func TestRespondFuncPanics(t *testing.T) {
	leaktest.Check(t)
	f := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response { panic("boom") })
	req, err := http.NewRequest(http.MethodPost, unreachable+"/chat/completions", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		if resp != nil {
			resp.Body.Close()
		}
		t.Errorf("RoundTrip: %v, want the panic as an error", err)
	}
}

// TestRespondFuncRunsAnAgent: an agent configured with a RespondFunc as its
// HTTP transport runs a whole turn with a tool call, and ranging to the end
// leaves nothing running.
func TestRespondFuncRunsAnAgent(t *testing.T) {
	leaktest.Check(t)
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("Let me look. <need", "_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("It says: ", req.LastMessage().Content).Finish("stop")
		default:
			return agenttest.Reply().Call(0, "call_1", "echo", `{"say":"hi"}`).Finish("tool_calls")
		}
	})
	tools, err := agent.NewToolRegistry(agent.FuncTool{
		Def: agent.ToolDefinition{Name: "echo", SkipApproval: true},
		Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			return string(args), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{BaseURL: unreachable, HTTPClient: &http.Client{Transport: model}, Model: "m", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for c, err := range a.Run(t.Context(), agent.Input{Message: "echo hi"}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind == agent.KindText && c.Round > 0 {
			text.WriteString(c.Text)
		}
	}
	if got, want := text.String(), `It says: {"say":"hi"}`; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}
