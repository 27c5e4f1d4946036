package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/openaiparams"
	"github.com/planround/planround/memory"
)

// heapRuns is how many conversations BenchmarkHeapPerConversation holds at
// once, and heapSeen how many text deltas each one reads before it counts
// as mid-stream.
const (
	heapRuns = 1000
	heapSeen = 20
)

// heapServerEnv, when set, makes TestHeapServerProcess serve instead of
// skipping: it is how BenchmarkHeapPerConversation starts its server in
// another process, so that the server's memory is not measured.
const heapServerEnv = "PLANROUND_HEAP_SERVER"

// TestHeapServerProcess is the scripted server of
// BenchmarkHeapPerConversation, run in a child process: it prints its URL,
// serves until its standard input ends, and answers by model: "hold" with a
// long reply that stops after a few dozen deltas and holds the stream
// open, "tool" with a planning reply that needs a tool and then a call to
// get_weather.
func TestHeapServerProcess(t *testing.T) {
	if os.Getenv(heapServerEnv) == "" {
		t.Skip("the server of BenchmarkHeapPerConversation; runs only in its child process")
	}
	pieces := make([]string, 200)
	for i := range pieces {
		pieces[i] = "tok "
	}
	hold := agenttest.Reply().Text(pieces...).Finish("stop").HoldAfter(2 * heapSeen)
	tool := toolTurn()
	srv := agenttest.NewServer()
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case req.Model == "hold":
			return hold
		case req.LastMessage().Role == "tool":
			return tool[2]
		case req.HasTools():
			return tool[1]
		}
		return tool[0]
	})
	fmt.Println(srv.URL())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// startHeapServer starts TestHeapServerProcess in a child process and
// returns its URL; the child ends when b's cleanup closes its input.
func startHeapServer(b *testing.B) string {
	return startServerProcess(b, "TestHeapServerProcess", heapServerEnv)
}

// startServerProcess runs this test binary's test in a child process, with
// env set to 1 so that it serves instead of skipping, and returns the URL
// it prints first; the child ends when b's cleanup closes its input.
func startServerProcess(b *testing.B, test, env string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("server process: %v", err)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") {
		b.Fatalf("server process printed %q (%v), want its URL", line, err)
	}
	go io.Copy(io.Discard, out) // the rest of its output (the test's own lines)
	return strings.TrimSpace(line)
}

// heapPerRun starts n runs with start, each of which calls reached once it
// is where it should be held, waits until all are there, and returns the
// heap they hold together divided by n, after a garbage collection. Then it
// cancels them and waits for them to end.
func heapPerRun(b *testing.B, n int, start func(ctx context.Context, reached func()) error) float64 {
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(context.Background())
	var at, done sync.WaitGroup
	at.Add(n)
	errs := make(chan error, n)
	for range n {
		done.Go(func() {
			var once sync.Once
			reached := func() { once.Do(at.Done) }
			err := start(ctx, reached)
			if ctx.Err() == nil {
				reached() // not held: do not wait for it
				errs <- fmt.Errorf("a run ended before it was held: %v", err)
			}
		})
	}
	at.Wait()
	var err error
	select {
	case err = <-errs:
	default:
		runtime.GC()
		runtime.ReadMemStats(&during)
	}
	cancel()
	done.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return float64(int64(during.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// heapTransport is an HTTP transport like http.DefaultTransport, for one
// measurement.
func heapTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}

// BenchmarkHeapPerConversation measures the heap a conversation holds, with
// the server in another process (TestHeapServerProcess) and heapRuns
// conversations held at once:
//
//   - planround-B/run: an Agent.Run mid-stream, its reply's next delta
//     awaited from the network;
//   - openai-go-B/run: a bare openai-go chat-completions stream held at the
//     same point of the same reply;
//   - ratio: the first divided by the second;
//   - approval-B/run: an Agent.Run paused at an approval, its pending
//     ticket waiting for a decision;
//   - the first three again (…-16KiB-history-…) for a conversation whose
//     requests carry an earlier turn of 16 KiB.
//
// Run it once per measurement: -benchtime=1x.
func BenchmarkHeapPerConversation(b *testing.B) {
	url := startHeapServer(b)
	var sums [5]float64
	// An earlier turn of 16 KiB, as a conversation a few turns in
	// carries: every request sends it again.
	long := strings.Repeat("history ", 1024)
	history := []memory.Message{{Role: memory.RoleUser, Content: long}, {Role: memory.RoleAssistant, Content: long}}
	for b.Loop() {
		sums[0] += heapAgentMidStream(b, url, nil)
		sums[1] += heapOpenAIMidStream(b, url, nil)
		sums[2] += heapAgentApproval(b, url)
		sums[3] += heapAgentMidStream(b, url, history)
		sums[4] += heapOpenAIMidStream(b, url, history)
	}
	n := float64(b.N)
	b.ReportMetric(sums[0]/n, "planround-B/run")
	b.ReportMetric(sums[1]/n, "openai-go-B/run")
	b.ReportMetric(sums[0]/sums[1], "ratio")
	b.ReportMetric(sums[2]/n, "approval-B/run")
	b.ReportMetric(sums[3]/n, "planround-16KiB-history-B/run")
	b.ReportMetric(sums[4]/n, "openai-go-16KiB-history-B/run")
	b.ReportMetric(sums[3]/sums[4], "ratio-16KiB-history")
}

func heapAgentMidStream(b *testing.B, url string, history []memory.Message) float64 {
	tr := heapTransport()
	defer tr.CloseIdleConnections()
	a, err := agent.New(agent.Config{
		BaseURL: url, HTTPClient: &http.Client{Transport: tr}, Model: "hold",
		MaxRetries: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	return heapPerRun(b, heapRuns, func(ctx context.Context, reached func()) error {
		n := 0
		for c, err := range a.Run(ctx, agent.Input{History: history, Message: "go"}) {
			if err != nil {
				return err
			}
			if c.Kind == agent.KindText {
				if n++; n == heapSeen {
					reached()
				}
			}
		}
		return errors.New("the run ended")
	})
}

func heapOpenAIMidStream(b *testing.B, url string, history []memory.Message) float64 {
	tr := heapTransport()
	defer tr.CloseIdleConnections()
	client := openai.NewClient(option.WithBaseURL(url), option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithMaxRetries(0), option.WithAPIKey("k"))
	params := openai.ChatCompletionNewParams{
		Model:    "hold",
		Messages: append(openaiparams.ToParams(history), openai.UserMessage("go")),
	}
	return heapPerRun(b, heapRuns, func(ctx context.Context, reached func()) error {
		s := client.Chat.Completions.NewStreaming(ctx, params)
		defer s.Close()
		n := 0
		for s.Next() {
			if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				if n++; n == heapSeen {
					reached()
				}
			}
		}
		if err := s.Err(); err != nil {
			return err
		}
		return errors.New("the stream ended")
	})
}

func heapAgentApproval(b *testing.B, url string) float64 {
	tr := heapTransport()
	defer tr.CloseIdleConnections()
	reg, err := agent.NewToolRegistry(agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather"},
		Fn:  func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "sunny", nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	type reachedKey struct{}
	a, err := agent.New(agent.Config{
		BaseURL: url, HTTPClient: &http.Client{Transport: tr}, Model: "tool", Tools: reg,
		MaxRetries: -1,
		Approver:   heapApprover{key: reachedKey{}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return heapPerRun(b, heapRuns, func(ctx context.Context, reached func()) error {
		ctx = context.WithValue(ctx, reachedKey{}, reached)
		for _, err := range a.Run(ctx, agent.Input{Message: "Weather in Paris?"}) {
			if err != nil {
				return err
			}
		}
		return errors.New("the run ended")
	})
}

// heapApprover returns pending tickets whose wait reports, through the
// function stored in its context under key, that the run is paused, and
// then waits until the context ends.
type heapApprover struct{ key any }

func (h heapApprover) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) {
		reached, _ := ctx.Value(h.key).(func())
		if reached == nil {
			return agent.Decision{}, errors.New("heapApprover: no reached function in the context")
		}
		reached()
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	}), nil
}
