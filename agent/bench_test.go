package agent_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/scripted"
)

const benchDeltas = 10_000

// benchReplies are the two responses of one no-tool turn: a planning reply
// of benchDeltas small deltas ending in <no_tool>, and a one-delta
// continuation.
func benchReplies() (plan, cont scripted.Response) {
	pieces := make([]string, benchDeltas)
	for i := range pieces {
		pieces[i] = "tok "
	}
	pieces[len(pieces)-1] = "<no_tool>"
	return scripted.Reply().Text(pieces...).Finish("stop"), scripted.Reply().Text("ok").Finish("stop")
}

// BenchmarkAgentRun consumes a benchDeltas-delta reply through Agent.Run;
// BenchmarkRawOpenAI consumes the same two responses from the same kind of
// local server through openai-go's own streaming client. Compare ns/delta
// and allocs/delta.
func BenchmarkAgentRun(b *testing.B) {
	srv := scripted.NewServer()
	defer srv.Close()
	plan, cont := benchReplies()
	a, err := agent.New(agent.Config{
		BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "bench",
		RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
	})
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
}

func BenchmarkRawOpenAI(b *testing.B) {
	srv := scripted.NewServer()
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
}

func reportPerDelta(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchDeltas, "ns/delta")
}
