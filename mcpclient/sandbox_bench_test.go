package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// nopInstance costs nothing, so that the benchmarks measure the registry.
type nopInstance struct{}

func (nopInstance) call(context.Context, string, json.RawMessage, agent.Progress) (string, error) {
	return "", nil
}
func (nopInstance) close() error { return nil }
func (nopInstance) pid() int     { return 0 }

func startNop(context.Context) (instance, error) { return nopInstance{}, nil }

// BenchmarkSandboxGetWarm: get and release on a running sandbox, the cost
// the registry adds to every call of a per-conversation tool.
func BenchmarkSandboxGetWarm(b *testing.B) {
	s := newSandboxes(startNop, 8, 0)
	defer s.close()
	ctx := context.Background()
	_, release, err := s.get(ctx, "conversation")
	if err != nil {
		b.Fatal(err)
	}
	release()
	b.ReportAllocs()
	for b.Loop() {
		_, release, err := s.get(ctx, "conversation")
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkSandboxGetWarmParallel: the same from many goroutines, each on
// a conversation of its own, all through the registry's one lock.
func BenchmarkSandboxGetWarmParallel(b *testing.B) {
	s := newSandboxes(startNop, 0, 0)
	defer s.close()
	ctx := context.Background()
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		conv := fmt.Sprint("conversation-", next.Add(1))
		for pb.Next() {
			_, release, err := s.get(ctx, conv)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}

// BenchmarkSandboxGetCold: a conversation's first get with a start that
// costs nothing, then closeConversation: the registry's share of a sandbox
// start.
func BenchmarkSandboxGetCold(b *testing.B) {
	s := newSandboxes(startNop, 8, 0)
	defer s.close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		conv := fmt.Sprint("conversation-", i)
		i++
		_, release, err := s.get(ctx, conv)
		if err != nil {
			b.Fatal(err)
		}
		release()
		if err := s.closeConversation(conv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSandboxEntryMemory reports the heap a running, idle sandbox
// costs the registry (B/entry), the instance itself not counted.
func BenchmarkSandboxEntryMemory(b *testing.B) {
	const n = 10000
	convs := make([]string, n)
	for i := range convs {
		convs[i] = fmt.Sprintf("conversation-%06d", i)
	}
	ctx := context.Background()
	var total float64
	for b.Loop() {
		s := newSandboxes(startNop, 0, 0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, c := range convs {
			_, release, err := s.get(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		total += float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
		_ = s.close()
	}
	b.ReportMetric(total/float64(b.N), "B/entry")
}

// The benchmarks below run a per_conversation stdio server, the stdio test
// server, through a Client: one process per conversation.

// sandboxedClient is a Client of one per_conversation stdio test server
// holding at most max instances, which never end for being idle.
func sandboxedClient(b *testing.B, max int) (*Client, ServerConfig) {
	b.Helper()
	cfg := stdioConfig(b, "sandboxed")
	cfg.Isolation = IsolationPerConversation
	return newClient(b, Options{MaxSandboxes: max, SandboxIdle: time.Hour}, cfg), cfg
}

// BenchmarkSandboxStdio: calls of echo on a per_conversation stdio server.
//
//   - cold: a conversation's first call, which starts the conversation's
//     process, makes the handshake and calls (ending the process
//     afterwards, with CloseConversation, is not timed);
//   - warm: a call in a conversation whose process runs;
//   - cold-direct: the floor of a cold start with mcp-go alone: start the
//     same server with its stdio client, make the handshake, call (closing
//     is not timed).
func BenchmarkSandboxStdio(b *testing.B) {
	leaktest.Check(b)
	c, cfg := sandboxedClient(b, 4)
	echo := benchTool(b, c, "echo")
	check := func(out string, err error) {
		b.Helper()
		if err != nil || out != "hello" {
			b.Fatalf("echo: %q, %v", out, err)
		}
	}

	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			conv := fmt.Sprint("cold-", i)
			i++
			ctx := sessionContext(b, conv)
			b.StartTimer()
			check(echo.Execute(ctx, benchArgs, nil))
			b.StopTimer()
			c.CloseConversation(conv)
			b.StartTimer()
		}
	})

	b.Run("warm", func(b *testing.B) {
		ctx := sessionContext(b, "warm")
		check(echo.Execute(ctx, benchArgs, nil))
		b.ReportAllocs()
		for b.Loop() {
			check(echo.Execute(ctx, benchArgs, nil))
		}
		c.CloseConversation("warm")
	})

	b.Run("cold-direct", func(b *testing.B) {
		b.ReportAllocs()
		req := echoRequest()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			mc, err := client.NewStdioMCPClient(cfg.Command, nil, cfg.Args...)
			if err != nil {
				b.Fatal(err)
			}
			var init mcp.InitializeRequest
			init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
			if _, err := mc.Initialize(ctx, init); err != nil {
				mc.Close()
				b.Fatal(err)
			}
			check(directEcho(ctx, mc, req))
			cancel()
			b.StopTimer()
			if err := mc.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkSandboxIdleMemory reports what an idle per_conversation
// sandbox of the stdio test server costs: 16 conversations each make one
// call, which starts their process, and once the calls' goroutines have
// ended (after callerIdle) the benchmark reports, per sandbox, the growth
// of this process's heap after a GC (heap-B/sandbox), of its goroutine
// stacks (stack-B/sandbox) and of its goroutines (goroutines/sandbox), and
// the resident set size of each server process (RSS-B/process, Linux
// only). Each op starts the 16 processes and waits, so ns/op is not a
// figure to read; the processes are ended outside the timer.
func BenchmarkSandboxIdleMemory(b *testing.B) {
	const n = 16
	leaktest.Check(b)
	c, _ := sandboxedClient(b, n)
	pid := benchTool(b, c, "pid")
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = sessionContext(b, fmt.Sprint("idle-", i))
	}
	var heap, stack, goroutines, rss float64
	rssCount := 0
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		pids := make([]int, n)
		for i, ctx := range ctxs {
			out, err := pid.Execute(ctx, []byte(`{}`), nil)
			if err != nil {
				b.Fatal(err)
			}
			if pids[i], err = strconv.Atoi(out); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(callerIdle + 200*time.Millisecond) // the callers end
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		stack += float64(int64(after.StackInuse)-int64(before.StackInuse)) / n
		goroutines += float64(runtime.NumGoroutine()-g0) / n
		for _, p := range pids {
			if r, ok := processRSS(p); ok {
				rss += float64(r)
				rssCount++
			}
		}
		runtime.KeepAlive(pids)

		b.StopTimer()
		for i := range ctxs {
			c.CloseConversation(fmt.Sprint("idle-", i))
		}
		b.StartTimer()
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/sandbox")
	b.ReportMetric(stack/float64(b.N), "stack-B/sandbox")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/sandbox")
	if rssCount > 0 {
		b.ReportMetric(rss/float64(rssCount), "RSS-B/process")
	}
}
