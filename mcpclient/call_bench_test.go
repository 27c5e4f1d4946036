package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// The per-call benchmarks compare a tool call through this package (the
// agent.Tool that Client.Tools offers, Execute) with the same call made
// with mcp-go's client directly, on the same server over the same
// transport:
//
//   - inprocess: mcp-go's in-process transport to a server in the
//     benchmark's process. The package offers no such transport to its
//     users; the benchmark builds a Client around one (inProcessClient), so
//     that the figure is the package's own cost without a wire or a process.
//   - stdio: the stdio test server, a process for each client.
//   - sse, http: a server in the benchmark's process on httptest
//     (127.0.0.1), both clients on the same server.

// benchArgs are the arguments of every benchmarked echo call.
var benchArgs = json.RawMessage(`{"text":"hello"}`)

// directEcho calls echo with mcp-go's client and reads the result's text,
// the least a caller of mcp-go does.
func directEcho(ctx context.Context, mc *client.Client, req mcp.CallToolRequest) (string, error) {
	res, err := mc.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		return "", errors.New("no content")
	}
	text, ok := mcp.AsTextContent(res.Content[0])
	if !ok {
		return "", fmt.Errorf("content %T, want text", res.Content[0])
	}
	if res.IsError {
		return "", errors.New(text.Text)
	}
	return text.Text, nil
}

func echoRequest() mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = "echo"
	req.Params.Arguments = benchArgs
	return req
}

// echoRequestProgress is echoRequest asking for progress notifications, as
// a call through the package with a Progress does.
func echoRequestProgress() mcp.CallToolRequest {
	req := echoRequest()
	req.Params.Meta = &mcp.Meta{ProgressToken: "bench-1"}
	return req
}

// benchTarget is one server reached two ways: by mcp-go directly, and
// through a Client of this package.
type benchTarget struct {
	direct *client.Client
	ours   *Client
}

// newBenchTarget starts a test server on the transport ("inprocess" or a
// Transport) and connects both clients to it. Everything ends in tb's
// cleanups.
func newBenchTarget(tb testing.TB, tr Transport) *benchTarget {
	tb.Helper()
	if tr == "inprocess" {
		srv := testserver.New(testserver.Options{})
		mc, err := client.NewInProcessClient(srv)
		if err != nil {
			tb.Fatal(err)
		}
		startDirect(tb, mc, "")
		return &benchTarget{direct: mc, ours: inProcessClient(tb, srv, ServerConfig{Name: "inprocess"})}
	}
	f := newFixture(tb, tr)
	var dtr transport.Interface
	var version string
	switch tr {
	case TransportStdio:
		dtr = transport.NewStdio(f.cfg.Command, nil, f.cfg.Args...)
	case TransportSSE:
		sse, err := transport.NewSSE(f.cfg.URL, transport.WithHTTPClient(newHTTPClient()))
		if err != nil {
			tb.Fatal(err)
		}
		dtr = sse
		version = mcp.LATEST_LEGACY_PROTOCOL_VERSION // as the Client speaks SSE
	case TransportHTTP:
		h, err := transport.NewStreamableHTTP(f.cfg.URL, transport.WithHTTPBasicClient(newHTTPClient()))
		if err != nil {
			tb.Fatal(err)
		}
		dtr = h
	}
	var opts []client.ClientOption
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	mc := client.NewClient(dtr, opts...)
	startDirect(tb, mc, version)
	return &benchTarget{direct: mc, ours: newClient(tb, Options{}, f.cfg)}
}

// startDirect starts mc, makes the handshake and lists the tools, as
// New does (mcp-go keeps the listed tools, and does more for a call of a
// tool it knows); tb's cleanup closes it.
func startDirect(tb testing.TB, mc *client.Client, version string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb.Cleanup(func() { mc.Close() })
	if err := mc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	req.Params.ProtocolVersion = version
	if _, err := mc.Initialize(ctx, req); err != nil {
		tb.Fatal(err)
	}
	if _, err := mc.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		tb.Fatal(err)
	}
}

// inProcessClient is a Client with one shared server, srv, reached over
// mcp-go's in-process transport, configured by cfg but for its transport.
// Only the connection is made here, as dial would make it; calls take the
// path of every shared server's calls.
func inProcessClient(tb testing.TB, srv *server.MCPServer, cfg ServerConfig) *Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := &serverEntry{
		cfg:        &expanded{ServerConfig: cfg},
		log:        slog.New(slog.DiscardHandler),
		clientInfo: mcp.Implementation{Name: "planround", Version: "devel"},
		relist:     make(chan struct{}, 1),
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.shared = &sharedServer{e: e}
	c := newConn(e)
	c.cancel = func() {}
	c.mc = client.NewClient(transport.NewInProcessTransport(srv))
	c.mc.OnNotification(c.notify)
	cl := &Client{entries: []*serverEntry{e}}
	tb.Cleanup(func() {
		c.close()
		cl.Close()
	})
	if err := c.mc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	var req mcp.InitializeRequest
	req.Params.ClientInfo = e.clientInfo
	res, err := c.mc.Initialize(ctx, req)
	if err != nil {
		tb.Fatal(err)
	}
	c.protocol = res.ProtocolVersion
	tools, err := c.listTools(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	e.setTools(tools)
	e.shared.conn = c
	return cl
}

// benchTool is the client's tool with that name, as an agent.Tool.
func benchTool(tb testing.TB, c *Client, name string) agent.Tool {
	tb.Helper()
	for _, t := range c.Tools() {
		if t.Definition().Name == name {
			return t
		}
	}
	tb.Fatalf("no tool %q", name)
	return nil
}

var benchTransports = []Transport{"inprocess", TransportStdio, TransportSSE, TransportHTTP}

// BenchmarkMCPCall: one call of the echo tool, by mcp-go's client directly
// (direct), through the agent.Tool of this package as a caller without a
// Progress makes it (mcpclient), and as the agent makes it, with a
// Progress, so that the request carries a progress token
// (mcpclient-progress); direct-progress is mcp-go's call with a progress
// token, the baseline of mcpclient-progress.
func BenchmarkMCPCall(b *testing.B) {
	for _, tr := range benchTransports {
		b.Run(string(tr), func(b *testing.B) {
			leaktest.Check(b, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			tg := newBenchTarget(b, tr)
			echo := benchTool(b, tg.ours, "echo")
			ctx := context.Background()
			b.Run("direct", func(b *testing.B) {
				req := echoRequest()
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					if out, err := directEcho(ctx, tg.direct, req); err != nil || out != "hello" {
						b.Fatalf("direct: %q, %v", out, err)
					}
				}
			})
			b.Run("direct-progress", func(b *testing.B) {
				req := echoRequestProgress()
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					if out, err := directEcho(ctx, tg.direct, req); err != nil || out != "hello" {
						b.Fatalf("direct: %q, %v", out, err)
					}
				}
			})
			b.Run("mcpclient", func(b *testing.B) {
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					if out, err := echo.Execute(ctx, benchArgs, nil); err != nil || out != "hello" {
						b.Fatalf("mcpclient: %q, %v", out, err)
					}
				}
			})
			b.Run("mcpclient-progress", func(b *testing.B) {
				var p discardProgress
				b.ReportAllocs()
				defer reportCPU(b)()
				for b.Loop() {
					if out, err := echo.Execute(ctx, benchArgs, p); err != nil || out != "hello" {
						b.Fatalf("mcpclient: %q, %v", out, err)
					}
				}
			})
		})
	}
}

// reportCPU reports the CPU time this process used per op (cpu-ns/op),
// all threads counted, from now until the returned function is called.
// Unlike ns/op it leaves out the time spent waiting for a CPU that other
// work holds. A server in the benchmark's process (inprocess, sse, http)
// is counted; a stdio server's process is not.
func reportCPU(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		if end, _ := processCPU(); ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// discardProgress is an agent.Progress that keeps nothing.
type discardProgress struct{}

func (discardProgress) Write(b []byte) (int, error)       { return len(b), nil }
func (discardProgress) WriteString(s string) (int, error) { return len(s), nil }

// BenchmarkMCPCallPaired makes the four calls of BenchmarkMCPCall in
// turn in every iteration (see benchPaired): on a machine shared with
// other work, the four kinds see the same load, so the ratios hold where
// the ns/op of separate benchmarks vary from one run to the next.
func BenchmarkMCPCallPaired(b *testing.B) {
	for _, tr := range benchTransports {
		b.Run(string(tr), func(b *testing.B) {
			leaktest.Check(b, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			tg := newBenchTarget(b, tr)
			echo := benchTool(b, tg.ours, "echo")
			ctx := context.Background()
			req, reqProgress := echoRequest(), echoRequestProgress()
			var p discardProgress
			check := func(out string, err error) error {
				if err != nil || out != "hello" {
					return fmt.Errorf("got %q, %v", out, err)
				}
				return nil
			}
			benchPaired(b, []pairedCall{
				{"direct", func() error { return check(directEcho(ctx, tg.direct, req)) }},
				{"direct-progress", func() error { return check(directEcho(ctx, tg.direct, reqProgress)) }},
				{"mcpclient", func() error { return check(echo.Execute(ctx, benchArgs, nil)) }},
				{"mcpclient-progress", func() error { return check(echo.Execute(ctx, benchArgs, p)) }},
			})
		})
	}
}

// pairedCall is one kind of op of benchPaired.
type pairedCall struct {
	name string
	op   func() error
}

// benchPaired runs one op of each kind in every iteration, the order
// rotating, and times each. It reports the median time of the first kind,
// the baseline (<name>-ns), and for each other kind the ratio of its
// median time to the baseline's (x-<name>) and the ratio of the CPU time
// this process used during its ops to the baseline's (xcpu-<name>; a
// stdio server's process is not counted).
func benchPaired(b *testing.B, calls []pairedCall) {
	n := len(calls)
	times := make([][]time.Duration, n)
	cpu := make([]time.Duration, n)
	i := 0
	for b.Loop() {
		for k := range n {
			j := (i + k) % n
			cpu0, _ := processCPU()
			start := time.Now()
			err := calls[j].op()
			times[j] = append(times[j], time.Since(start))
			cpu1, _ := processCPU()
			cpu[j] += cpu1 - cpu0
			if err != nil {
				b.Fatalf("%s: %v", calls[j].name, err)
			}
		}
		i++
	}
	base := median(times[0])
	b.ReportMetric(base, calls[0].name+"-ns")
	for j := 1; j < n; j++ {
		b.ReportMetric(median(times[j])/base, "x-"+calls[j].name)
		if cpu[0] > 0 {
			b.ReportMetric(float64(cpu[j])/float64(cpu[0]), "xcpu-"+calls[j].name)
		}
	}
}

// median is the median of d in nanoseconds; it sorts d.
func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)/2])
}

// countingProgress counts the lines of partial output it is given.
type countingProgress struct{ n atomic.Int64 }

func (p *countingProgress) Write(b []byte) (int, error) { return p.WriteString(string(b)) }

func (p *countingProgress) WriteString(s string) (int, error) {
	p.n.Add(int64(strings.Count(s, "\n")))
	return len(s), nil
}

// BenchmarkMCPProgress: a call of the progress tool, 50 steps a
// millisecond apart, through the agent.Tool. With a Progress (notified)
// the request carries a progress token, so the server sends a notification
// with a message at each step, and each becomes a line of partial output
// (notes/op counts them: all arrive); without one (silent) the server
// sends none but pauses the same. The pauses make ns/op; the cost of a
// notification is the difference in cpu-ns/op and allocs/op over the 50:
// the client's (mcp-go's decoding and this package's line), and the
// server's too except over stdio. (Without the pauses mcp-go's servers
// send the result before most of the notifications, which then come too
// late to be shown.)
func BenchmarkMCPProgress(b *testing.B) {
	const steps = 50
	for _, tr := range []Transport{"inprocess", TransportStdio, TransportHTTP} {
		b.Run(string(tr), func(b *testing.B) {
			leaktest.Check(b, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			progress := benchTool(b, newBenchTarget(b, tr).ours, "progress")
			args := json.RawMessage(fmt.Sprintf(`{"steps":%d,"delay_ms":1}`, steps))
			want := fmt.Sprintf("progress: done %d steps", steps)
			for _, notified := range []bool{false, true} {
				name := "silent"
				var p *countingProgress
				if notified {
					name, p = "notified", &countingProgress{}
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					b.ReportAllocs()
					defer reportCPU(b)()
					for b.Loop() {
						var out string
						var err error
						if p != nil {
							out, err = progress.Execute(ctx, args, p)
						} else {
							out, err = progress.Execute(ctx, args, nil)
						}
						if err != nil || out != want {
							b.Fatalf("progress: %q, %v", out, err)
						}
					}
					if p != nil {
						b.ReportMetric(float64(p.n.Load())/float64(b.N), "notes/op")
					}
				})
			}
		})
	}
}
