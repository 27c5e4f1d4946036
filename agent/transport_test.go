package agent_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// A TCP connection cut or reset in the middle of a response is truncation,
// and the error still says what happened to the connection.
func TestCutConnectionIsTruncated(t *testing.T) {
	tests := []struct {
		name  string
		resps []agenttest.Response
		tools []agent.Tool
		cause error
	}{
		{"closed mid-text", []agenttest.Response{agenttest.Reply().Text("Hel", "lo ", "there").Finish("stop").CutAfter(2)}, nil, io.ErrUnexpectedEOF},
		{"reset mid-text", []agenttest.Response{agenttest.Reply().Text("Hel", "lo ", "there").Finish("stop").ResetAfter(2)}, nil, syscall.ECONNRESET},
		{"closed in a call's arguments", []agenttest.Response{planNeedTool(),
			agenttest.Reply().Text("Calling").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).Finish("tool_calls").CutAfter(3)},
			[]agent.Tool{weatherTool()}, io.ErrUnexpectedEOF},
		{"closed before the finish", []agenttest.Response{agenttest.Reply().Text("Hel", "lo").Finish("stop").CutAfter(2)}, nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.resps...)
			turn := newAgent(t, srv, nil, tt.tools...).NewTurn(agent.Input{Message: "hi"})
			chunks, err := collect(turn.Run(context.Background()))
			require.Error(t, err)
			assert.ErrorIs(t, err, agent.ErrTruncated)
			assert.ErrorIs(t, err, tt.cause)
			assert.Contains(t, err.Error(), tt.cause.Error(), "the cause is in the text")
			for _, c := range chunks {
				assert.NotEqual(t, agent.KindInvalid, c.Kind)
			}
			validHistory(t, turn.Messages())
		})
	}
}

// A connection cut after the finish_reason, before [DONE] (or before the
// usage chunk), loses nothing: the response was complete, so its tool call
// runs and the turn goes on.
func TestCutAfterFinishKeepsTheResponse(t *testing.T) {
	call := agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).Usage(5, 3).Finish("tool_calls")
	n := call.NumFrames() // text, header, two fragments, finish, usage
	for name, resp := range map[string]agenttest.Response{
		"before done":  call.CutAfter(n),
		"before usage": call.CutAfter(n - 1),
	} {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), resp, agenttest.Reply().Text("Sunny.").Finish("stop").CutAfter(3))
			turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "Weather in Paris?"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)
			assert.Equal(t, []string{
				"text", "round_end:0:need_tool",
				"text", "tool:start:get_weather", "tool:approval_required:get_weather",
				"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
				"text", "round_end:2",
			}, trace(chunks))
			assert.Equal(t, "Sunny.", text(chunks, 2))
			msgs := turn.Messages()
			validHistory(t, msgs)
			require.Len(t, msgs, 5)
			assert.Equal(t, "sunny in Paris", msgs[3].Content)
		})
	}
}

// A 200 response whose body is not an event stream says what arrived, and
// is never reported as truncated.
func TestNotAnEventStream(t *testing.T) {
	t.Run("error object", func(t *testing.T) {
		leaktest.Check(t)
		srv := newServer(t)
		srv.Enqueue(agenttest.Body(200, "application/json", `{"error":{"message":"model `+"`gpt-x`"+` does not exist","type":"invalid_request_error","code":"model_not_found"}}`))
		_, err := collect(newAgent(t, srv, nil).Run(context.Background(), agent.Input{Message: "hi"}))
		require.Error(t, err)
		assert.NotErrorIs(t, err, agent.ErrTruncated)
		var pe *agent.ProviderError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 200, pe.StatusCode)
		assert.Equal(t, "model `gpt-x` does not exist", pe.Message)
		assert.Equal(t, "model_not_found", pe.Code)
		assert.Contains(t, err.Error(), "model `gpt-x` does not exist")
	})
	for name, tt := range map[string]struct {
		resp agenttest.Response
		want []string
	}{
		"html": {agenttest.Body(200, "text/html; charset=utf-8", "<!DOCTYPE html>\n<html><body>Please sign in</body></html>"),
			[]string{"200 OK", `"text/html; charset=utf-8"`, "<html><body>Please sign in"}},
		"other json": {agenttest.Body(200, "application/json", `{"detail":"Not Found"}`),
			[]string{"200 OK", `"application/json"`, `{"detail":"Not Found"}`}},
		"plain text, no content type": {agenttest.Body(200, "", "upstream unavailable"),
			[]string{"200 OK", "no Content-Type", "upstream unavailable"}},
	} {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.resp)
			turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
			_, err := collect(turn.Run(context.Background()))
			require.Error(t, err)
			assert.NotErrorIs(t, err, agent.ErrTruncated)
			assert.NotContains(t, err.Error(), "truncated")
			assert.Contains(t, err.Error(), "not an event stream")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			validHistory(t, turn.Messages())
		})
	}
}

// A server that ignores "stream": true and answers each request with one
// chat.completion object simply works.
func TestServerThatIgnoresStream(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool().IgnoreStream(),
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Usage(20, 5).Finish("tool_calls").IgnoreStream(),
		agenttest.Reply().Text("It is sunny in Paris.").Finish("stop").IgnoreStream(),
	)
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "Weather in Paris?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"text", "tool:start:get_weather", "tool:approval_required:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, "Let me look that up. ", text(chunks, 0))
	assert.Equal(t, "It is sunny in Paris.", text(chunks, 2))
	for _, c := range chunks {
		if c.Kind == agent.KindRoundEnd && c.Round == 1 {
			require.NotNil(t, c.Usage)
			assert.Equal(t, int64(20), c.Usage.PromptTokens)
		}
	}
	validHistory(t, turn.Messages())
}

// An event stream is read as one whatever its Content-Type says.
func TestEventStreamWithOddContentType(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	a := newAgent(t, srv, nil)
	for _, cts := range [][2]string{{"text/plain", ""}, {"application/json", "text/html"}} {
		srv.Enqueue(planNoTool().WithHeader("Content-Type", cts[0]), agenttest.Reply().Text("Fine.").Finish("stop").WithHeader("Content-Type", cts[1]))
		chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
		require.NoError(t, err, "Content-Types %q", cts)
		assert.Equal(t, "Fine.", text(chunks, 1))
	}
}

// Errors from a run carry the provider's message, and hosts get at the
// details with errors.As.
func TestProviderErrorCarriesTheMessage(t *testing.T) {
	tests := []struct {
		name  string
		resp  agenttest.Response
		want  agent.ProviderError // Err is not compared
		text  string              // in err.Error()
		apiOK bool                // errors.As finds an *openai.Error too
	}{
		{"openai 404", agenttest.HTTPError(404, "The model `gpt-x` does not exist or you do not have access to it."),
			agent.ProviderError{StatusCode: 404, Message: "The model `gpt-x` does not exist or you do not have access to it.", Type: "invalid_request_error"},
			"404 Not Found: The model `gpt-x` does not exist or you do not have access to it.", true},
		{"openai 401 with code", agenttest.Body(401, "application/json", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`),
			agent.ProviderError{StatusCode: 401, Message: "Incorrect API key provided", Type: "invalid_request_error", Code: "invalid_api_key"},
			"401 Unauthorized: Incorrect API key provided (type invalid_request_error, code invalid_api_key)", true},
		{"ollama error string", agenttest.Body(404, "application/json", `{"error":"model \"llama9\" not found, try pulling it first"}`),
			agent.ProviderError{StatusCode: 404, Message: `model "llama9" not found, try pulling it first`},
			`404 Not Found: model "llama9" not found, try pulling it first`, false},
		{"proxy html page", agenttest.Body(502, "text/html", "<html>\n<body><h1>502 Bad Gateway</h1></body>\n</html>\n"),
			agent.ProviderError{StatusCode: 502, Message: "<html> <body><h1>502 Bad Gateway</h1></body> </html>"},
			"502 Bad Gateway: <html> <body><h1>502 Bad Gateway</h1></body> </html>", true},
		{"error inside the stream", agenttest.Reply().Text("Hel", "lo").Finish("stop").ErrorAfter(1, "model overloaded"),
			agent.ProviderError{StatusCode: 200, Message: "model overloaded", Type: "server_error"},
			"model overloaded (type server_error)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.resp)
			turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
			_, err := collect(turn.Run(context.Background()))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.text)
			var pe *agent.ProviderError
			require.ErrorAs(t, err, &pe)
			got := *pe
			got.Err = nil
			assert.Equal(t, tt.want, got)
			var apiErr *openai.Error
			assert.Equal(t, tt.apiOK, errors.As(err, &apiErr), "errors.As(*openai.Error)")
			assert.NotErrorIs(t, err, agent.ErrTruncated)
			validHistory(t, turn.Messages())
		})
	}
}

// A turn of three rounds (planning, a tool round, the answer) uses one TCP
// connection: each body is read to its end, so net/http can reuse it.
func TestOneConnectionPerTurn(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Usage(5, 3).Finish("tool_calls"),
		agenttest.Reply().Text("It is sunny in Paris.").Finish("stop"),
		// A second turn on the same agent reuses it too.
		planNoTool(), agenttest.Reply().Text("Bye.").Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}))
	require.NoError(t, err)
	assert.Equal(t, 1, srv.Conns(), "TCP connections for a three-round turn")
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "Thanks"}))
	require.NoError(t, err)
	assert.Equal(t, 1, srv.Conns(), "TCP connections for two turns")
	assert.Len(t, srv.Requests(), 5)
}

// A server that keeps the body open after [DONE] does not hold the run:
// the drain gives up and the connection is closed.
func TestServerHoldingTheBodyAfterDone(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	plan := agenttest.Raw([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.<no_tool>\"}}]}\n\ndata: [DONE]\n\n"))
	srv.Enqueue(plan.HoldAfter(plan.NumFrames()), agenttest.Reply().Text("Hello.").Finish("stop"))
	chunks, err := collect(newAgent(t, srv, nil).Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, "Hello.", text(chunks, 1))
	assert.Equal(t, 2, srv.Conns(), "the held connection is not reused")
}

func TestProviderErrors(t *testing.T) {
	tests := []struct {
		name  string
		resp  agenttest.Response
		check func(t *testing.T, err error)
	}{
		{"429", agenttest.HTTPError(429, "slow down"), func(t *testing.T, err error) {
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 429, apiErr.StatusCode)
		}},
		{"500", agenttest.HTTPError(500, "boom"), func(t *testing.T, err error) {
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 500, apiErr.StatusCode)
		}},
		{"cut", agenttest.Reply().Text("Hel", "lo ", "there").Finish("stop").CutAfter(2), func(t *testing.T, err error) {
			assert.ErrorContains(t, err, "round 0")
		}},
		{"no done no finish", agenttest.Frames(`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`), func(t *testing.T, err error) {
			assert.ErrorIs(t, err, agent.ErrTruncated)
		}},
		{"error frame", agenttest.Reply().Text("Hel", "lo").Finish("stop").ErrorAfter(1, "model overloaded"), func(t *testing.T, err error) {
			assert.ErrorContains(t, err, "model overloaded")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.resp)
			turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi"})
			chunks, err := collect(turn.Run(context.Background()))
			require.Error(t, err)
			tt.check(t, err)
			for _, c := range chunks {
				assert.NotEqual(t, agent.KindInvalid, c.Kind)
			}
			validHistory(t, turn.Messages())
		})
	}
}

func TestCutStreamInToolRoundKeepsHistoryValid(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Text("Calling").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).Finish("tool_calls").CutAfter(3))
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "go"})
	_, err := collect(turn.Run(context.Background()))
	require.Error(t, err)
	validHistory(t, turn.Messages())
}

// Config.MaxRetries: a model that fails twice with a 500 before it answers
// is reached with two retries (openai-go's default, which zero keeps) and
// not with fewer; a negative value turns retries off.
func TestMaxRetries(t *testing.T) {
	tests := []struct {
		maxRetries int
		ok         bool
		requests   int
	}{
		{maxRetries: 2, ok: true, requests: 4}, // the two 500s, the plan, the answer
		{maxRetries: 0, ok: true, requests: 4},
		{maxRetries: 1, ok: false, requests: 2},
		{maxRetries: -1, ok: false, requests: 1},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.maxRetries), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			down := agenttest.HTTPError(500, "the model is down").WithHeader("Retry-After-Ms", "1") // no backoff to wait for
			srv.Enqueue(down, down, planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
			a := newAgent(t, srv, func(c *agent.Config) {
				c.MaxRetries = tt.maxRetries
			})
			_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
			if tt.ok {
				require.NoError(t, err)
			} else {
				var apiErr *openai.Error
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, 500, apiErr.StatusCode)
			}
			assert.Len(t, srv.Requests(), tt.requests, "requests sent")
		})
	}
}
