package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/oteltest"
	"github.com/planround/planround/memory"
)

const benchDeltas = 10_000

// benchReplies are the two responses of one no-tool turn: a planning reply
// of benchDeltas small deltas ending in <no_tool>, and a one-delta
// continuation.
func benchReplies() (plan, cont agenttest.Response) {
	pieces := make([]string, benchDeltas)
	for i := range pieces {
		pieces[i] = "tok "
	}
	pieces[len(pieces)-1] = "<no_tool>"
	return agenttest.Reply().Text(pieces...).Finish("stop"), agenttest.Reply().Text("ok").Finish("stop")
}

// BenchmarkAgentRun consumes a benchDeltas-delta reply through Agent.Run;
// BenchmarkRawOpenAI consumes the same two responses from the same kind of
// local server through openai-go's own streaming client. Compare ns/delta
// and allocs/delta.
func BenchmarkAgentRun(b *testing.B) { benchAgentRun(b, nil) }

// BenchmarkAgentRunTraced is BenchmarkAgentRun with telemetry recorded:
// internal/oteltest's providers keep every span and sum every measurement
// in memory. The SDK's own cost per span is not in it (the SDK stays out
// of the module's go.mod, issue 37); what the agent does for its spans and
// metrics is.
func BenchmarkAgentRunTraced(b *testing.B) {
	benchAgentRun(b, func(c *agent.Config) {
		c.TracerProvider, c.MeterProvider = &oteltest.TracerProvider{}, &oteltest.MeterProvider{}
	})
}

// BenchmarkAgentRunAPILog is BenchmarkAgentRun with Config.APILog set to
// a MemStore: a record, with the request and the reply, per model call.
// Compare with BenchmarkAgentRun, whose nil APILog must cost nothing.
func BenchmarkAgentRunAPILog(b *testing.B) {
	st := &memory.MemStore{}
	benchAgentRun(b, func(c *agent.Config) { c.APILog = st })
}

// BenchmarkAgentRunAPILogMetadata is BenchmarkAgentRunAPILog keeping
// metadata only.
func BenchmarkAgentRunAPILogMetadata(b *testing.B) {
	st := &memory.MemStore{}
	benchAgentRun(b, func(c *agent.Config) { c.APILog, c.APILogMetadataOnly = st, true })
}

func benchAgentRun(b *testing.B, mut func(*agent.Config)) {
	srv := agenttest.NewServer()
	defer srv.Close()
	plan, cont := benchReplies()
	cfg := agent.Config{
		BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "bench",
		MaxRetries: -1,
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		srv.Enqueue(plan, cont)
		b.StartTimer()
		n := 0
		for c, err := range a.Run(ctx, agent.Input{Message: "go"}) {
			if err != nil {
				b.Fatal(err)
			}
			if c.Kind == agent.KindText {
				n++
			}
		}
		if n < benchDeltas-1 {
			b.Fatalf("got %d text chunks", n)
		}
	}
	reportPerDelta(b)
	reportConns(b, srv)
}

func BenchmarkRawOpenAI(b *testing.B) {
	srv := agenttest.NewServer()
	defer srv.Close()
	plan, cont := benchReplies()
	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0), option.WithAPIKey("k"))
	params := openai.ChatCompletionNewParams{
		Model:    "bench",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		srv.Enqueue(plan, cont)
		b.StartTimer()
		n := 0
		for range 2 {
			s := client.Chat.Completions.NewStreaming(ctx, params)
			for s.Next() {
				if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
					n++
				}
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
		if n < benchDeltas {
			b.Fatalf("got %d deltas", n)
		}
	}
	reportPerDelta(b)
	reportConns(b, srv)
}

// reportConns reports the TCP connections the server accepted per turn
// (two requests): 1 when the client reuses its connection.
func reportConns(b *testing.B, srv *agenttest.Server) {
	b.ReportMetric(float64(srv.Conns())/float64(b.N), "conns/turn")
}

func reportPerDelta(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchDeltas, "ns/delta")
}

// toolTurn is a three-round turn: a planning reply that needs a tool, a
// tool round with one call and the answer, each a few dozen deltas.
func toolTurn() []agenttest.Response {
	words := strings.Fields(strings.Repeat("the weather in Paris is looked up now ", 6))
	for i := range words {
		words[i] += " "
	}
	return []agenttest.Response{
		agenttest.Reply().Text(words...).Text("<need_tool>").Usage(40, 30).Finish("stop"),
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).Usage(60, 10).Finish("tool_calls"),
		agenttest.Reply().Text(words...).Usage(80, 30).Finish("stop"),
	}
}

// BenchmarkConnsPerTurn runs a three-round turn (planning, a tool round,
// the answer) through Agent.Run against a fresh server and HTTP client per
// op, and reports the TCP connections the turn opened: 1 when each body is
// read to its end so that net/http reuses the connection.
// BenchmarkConnsPerTurnRawOpenAI sends the same three requests with
// openai-go's streaming client, for comparison.
func BenchmarkConnsPerTurn(b *testing.B) {
	reg, err := agent.NewToolRegistry(agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", SkipApproval: true},
		Fn:  func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "sunny", nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	conns := 0
	for b.Loop() {
		srv := agenttest.NewServer()
		srv.Enqueue(toolTurn()...)
		a, err := agent.New(agent.Config{
			BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "bench", Tools: reg,
			MaxRetries: -1,
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
			if err != nil {
				b.Fatal(err)
			}
		}
		if n := len(srv.Requests()); n != 3 {
			b.Fatalf("%d requests, want 3", n)
		}
		conns += srv.Conns()
		srv.Close()
	}
	b.ReportMetric(float64(conns)/float64(b.N), "conns/turn")
}

func BenchmarkConnsPerTurnRawOpenAI(b *testing.B) {
	params := openai.ChatCompletionNewParams{
		Model:    "bench",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
	}
	conns := 0
	for b.Loop() {
		srv := agenttest.NewServer()
		srv.Enqueue(toolTurn()...)
		client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0), option.WithAPIKey("k"))
		for range 3 {
			s := client.Chat.Completions.NewStreaming(context.Background(), params)
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
		conns += srv.Conns()
		srv.Close()
	}
	b.ReportMetric(float64(conns)/float64(b.N), "conns/turn")
}
