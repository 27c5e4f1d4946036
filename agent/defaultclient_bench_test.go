//go:build unix

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
)

// sseServerEnv, when set, makes TestSSEServerProcess serve instead of
// skipping: BenchmarkDefaultClient starts it in another process, so that
// the CPU the server spends is not counted as the client's.
const sseServerEnv = "PLANROUND_SSE_SERVER"

// sseFrames are the events of a chat-completions stream of benchDeltas
// text deltas, ending with a finish and [DONE].
func sseFrames() [][]byte {
	frames := make([][]byte, 0, benchDeltas+2)
	chunk := func(delta map[string]any, finish any) []byte {
		b, err := json.Marshal(map[string]any{
			"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "bench",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		if err != nil {
			panic(err)
		}
		return append(append([]byte("data: "), b...), "\n\n"...)
	}
	for range benchDeltas {
		frames = append(frames, chunk(map[string]any{"content": "tok "}, nil))
	}
	frames = append(frames, chunk(map[string]any{}, "stop"), []byte("data: [DONE]\n\n"))
	return frames
}

// TestSSEServerProcess is the server of BenchmarkDefaultClient, run in a
// child process: it prints its URL and serves until its standard input
// ends. Every request is answered with sseFrames: for the model "at-once"
// written in one piece, as a body that arrived before the client read it;
// for "flushed" an event at a time, each flushed, as a model streams.
func TestSSEServerProcess(t *testing.T) {
	if os.Getenv(sseServerEnv) == "" {
		t.Skip("the server of BenchmarkDefaultClient; runs only in its child process")
	}
	frames := sseFrames()
	whole := make([]byte, 0, benchDeltas*128)
	for _, f := range frames {
		whole = append(whole, f...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch req.Model {
		case "at-once":
			w.Write(whole)
		case "flushed":
			rc := http.NewResponseController(w)
			for _, f := range frames {
				if _, err := w.Write(f); err != nil || rc.Flush() != nil {
					return
				}
			}
		default:
			http.Error(w, "unknown model "+req.Model, http.StatusNotFound)
		}
	})}
	go srv.Serve(ln)
	fmt.Println("http://" + ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// processCPU is the CPU time, user and system, this process has used so
// far over all its threads.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDefaultClient measures what a streamed delta costs the client
// as a host runs it: an Agent whose Config has no HTTPClient (the SDK's
// default client, its connection buffers and all), against a server in
// another process, planning off, a reply of benchDeltas text deltas. The
// figure is this process's CPU time (getrusage: user and system, the
// garbage collector included) per delta, not the wall time, which would
// count the server's. A bare openai-go client (its own default HTTP
// client) reads the same reply in the same loop, as the baseline:
//
//   - planround-ns/delta, openai-go-ns/delta: CPU per delta;
//   - ratio: the first divided by the second;
//   - planround-allocs/delta: heap allocations per delta of the run.
//
// at-once: the server writes the whole body at once, so that the client
// reads a body that is there already (what a client that fell behind, or
// a fast model, reads). flushed: the server flushes every event on its
// own.
func BenchmarkDefaultClient(b *testing.B) {
	url := startServerProcess(b, "TestSSEServerProcess", sseServerEnv)
	for _, model := range []string{"at-once", "flushed"} {
		b.Run(model, func(b *testing.B) {
			a, err := agent.New(agent.Config{BaseURL: url, Model: model, DisablePlanning: true, MaxRetries: -1})
			if err != nil {
				b.Fatal(err)
			}
			client := openai.NewClient(option.WithBaseURL(url), option.WithMaxRetries(0), option.WithAPIKey("k"))
			params := openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
			}
			ctx := context.Background()
			var ours, theirs time.Duration
			var mallocs uint64
			var ms runtime.MemStats
			// Each side starts on a collected heap, so that neither pays
			// for collecting the other's garbage.
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				m0 := ms.Mallocs
				t0 := processCPU(b)
				if n := agentDeltas(b, ctx, a); n != benchDeltas {
					b.Fatalf("the run streamed %d text chunks, want %d", n, benchDeltas)
				}
				t1 := processCPU(b)
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - m0
				runtime.GC()
				t2 := processCPU(b)
				if n := openaiDeltas(b, ctx, client, params); n != benchDeltas {
					b.Fatalf("openai-go read %d deltas, want %d", n, benchDeltas)
				}
				t3 := processCPU(b)
				ours += t1 - t0
				theirs += t3 - t2
			}
			per := float64(b.N) * benchDeltas
			b.ReportMetric(float64(ours.Nanoseconds())/per, "planround-ns/delta")
			b.ReportMetric(float64(theirs.Nanoseconds())/per, "openai-go-ns/delta")
			b.ReportMetric(float64(ours)/float64(theirs), "ratio")
			b.ReportMetric(float64(mallocs)/per, "planround-allocs/delta")
		})
	}
}

// agentDeltas runs a and returns how many text chunks it streamed.
func agentDeltas(b *testing.B, ctx context.Context, a *agent.Agent) int {
	n := 0
	for c, err := range a.Run(ctx, agent.Input{Message: "go"}) {
		if err != nil {
			b.Fatal(err)
		}
		if c.Kind == agent.KindText {
			n++
		}
	}
	return n
}

// openaiDeltas streams params with client and returns how many deltas
// carried text.
func openaiDeltas(b *testing.B, ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams) int {
	s := client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	n := 0
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			n++
		}
	}
	if err := s.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}
