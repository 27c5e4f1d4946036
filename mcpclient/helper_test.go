package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
)

// The test binary doubles as a stdio MCP server: TestMain runs the helper
// named by this variable instead of the tests.
const helperEnv = "PLANROUND_MCPCLIENT_HELPER"

// markEnv names a directory where a stdio helper leaves marks ("cancelled")
// for the test to find.
const markEnv = "PLANROUND_MCPCLIENT_MARKS"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper runs the test binary as a stdio server (or a process a server
// starts), by mode.
func runHelper(mode string) int {
	switch mode {
	case "server":
		srv := newTestServer(&hooks{
			cancelled: func() { mark("cancelled") },
			crash:     func() { os.Exit(3) },
			hang:      make(chan struct{}), // never closed
			flood: func() {
				// A message without end, beside the server's own.
				chunk := []byte(strings.Repeat("x", 1<<20))
				for range 64 {
					if _, err := os.Stdout.Write(chunk); err != nil {
						return
					}
				}
			},
		})
		if err := server.ServeStdio(srv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "once":
		// Serves the first time; afterwards it fails to start, like a
		// server whose configuration broke after a crash.
		started := filepath.Join(os.Getenv(markEnv), "started")
		if _, err := os.Stat(started); err == nil {
			fmt.Fprintln(os.Stderr, "helper: the port is taken")
			return 1
		}
		mark("started")
		return runHelper("server")
	case "legacy":
		return legacyServer()
	case "stubborn":
		// A server that outlives its input and SIGTERM, as some real
		// servers behind a wrapper do: only SIGKILL ends it.
		signal.Ignore(syscall.SIGTERM)
		srv := newTestServer(&hooks{hang: make(chan struct{})})
		_ = server.NewStdioServer(srv).Listen(context.Background(), os.Stdin, os.Stdout)
		select {}
	case "sleep":
		select {}
	case "silent":
		// Reads its input and never answers.
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				select {} // and outlives it
			}
		}
	case "garbage":
		for i := 0; i < 1_000_000; i++ {
			if _, err := fmt.Fprintf(os.Stdout, "garbage %d {{{ not json\n", i); err != nil {
				return 0
			}
			time.Sleep(time.Millisecond)
		}
		return 0
	case "huge":
		// One line that never ends, 1 MiB at a time, up to 1 GiB.
		chunk := []byte(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 1<<20))
		for i := 0; i < 1024; i++ {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 0
			}
			chunk = chunk[:1<<20]
			for j := range chunk {
				chunk[j] = 'x'
			}
		}
		select {}
	case "fail":
		fmt.Fprintln(os.Stderr, strings.Repeat("x", 10000)) // logged in part
		fmt.Fprintln(os.Stderr, "helper: cannot start: no configuration")
		return 1
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// legacyServer is a server of protocol 2025-11-25 written by hand, that
// ignores requests it does not know (server/discover among them) instead
// of answering them with an error, as some servers do.
func legacyServer() int {
	dec := json.NewDecoder(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := dec.Decode(&req); err != nil {
			return 0
		}
		var result any
		switch req.Method {
		case "server/discover":
			mark("discover")
			continue
		case "initialize":
			result = map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "legacy", "version": "1"},
			}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "hello", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "hi from legacy"}}}
		default:
			continue
		}
		if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}); err != nil {
			return 0
		}
	}
}

// mark leaves a mark in the directory named by markEnv.
func mark(name string) {
	if dir := os.Getenv(markEnv); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, name), nil, 0o600)
	}
}

// hooks are what a test server does where a stdio helper and an HTTP
// server in the test process differ.
type hooks struct {
	cancelled func()        // the slow tool saw its call cancelled
	crash     func()        // the crash tool: the server goes away
	hang      chan struct{} // the hang tool waits for it, ignoring its context
	flood     func()        // the flood tool: write more than a message may hold
}

// newTestServer is the MCP server of the tests: tools for every kind of
// result, progress, slowness and failure. It lists two tools a page, so
// every listing goes over pages.
func newTestServer(h *hooks) *server.MCPServer {
	srv := server.NewMCPServer("test", "1.0.0", server.WithToolCapabilities(true), server.WithRecovery(), server.WithPaginationLimit(2))
	var counter atomic.Int64 // each server counts its own calls
	srv.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echoes text."), mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(text), nil
		})
	srv.AddTool(mcp.NewTool("image", mcp.WithDescription("A caption and an image.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultImage("a cat", "iVBORw0KGgo=", "image/png"), nil
		})
	srv.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always an error result.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("the disk is full"), nil
		})
	srv.AddTool(mcp.NewTool("progress", mcp.WithDescription("Reports progress."),
		mcp.WithNumber("steps", mcp.Required()),
		mcp.WithBoolean("messages"),
		mcp.WithBoolean("hold")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			steps := req.GetInt("steps", 1)
			var token mcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			s := server.ServerFromContext(ctx)
			for i := 1; i <= steps; i++ {
				p := map[string]any{"progressToken": token, "progress": i, "total": steps}
				if req.GetBool("messages", false) {
					p["message"] = fmt.Sprintf("copied file %d", i)
				}
				if token != nil {
					_ = s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), p)
				}
				// Notifications are sent in order, but mcp-go's HTTP
				// server may drop one sent right before the result.
				time.Sleep(20 * time.Millisecond)
			}
			if req.GetBool("hold", false) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return mcp.NewToolResultText(fmt.Sprintf("did %d steps", steps)), nil
		})
	srv.AddTool(mcp.NewTool("slow", mcp.WithDescription("Waits until cancelled.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			if h.cancelled != nil {
				h.cancelled()
			}
			return nil, ctx.Err()
		})
	srv.AddTool(mcp.NewTool("hang", mcp.WithDescription("Never answers, whatever happens.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-h.hang
			return mcp.NewToolResultText("too late"), nil
		})
	srv.AddTool(mcp.NewTool("crash", mcp.WithDescription("The server goes away mid-call.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if h.crash != nil {
				h.crash()
			}
			select { // mcp-go's SSE server never cancels a handler's context
			case <-ctx.Done():
			case <-h.hang:
			}
			return nil, ctx.Err()
		})
	srv.AddTool(mcp.NewTool("flood", mcp.WithDescription("Writes without end.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if h.flood != nil {
				h.flood()
			}
			select {
			case <-ctx.Done():
			case <-h.hang:
			}
			return nil, ctx.Err()
		})
	srv.AddTool(mcp.NewTool("count", mcp.WithDescription("Counts the calls of this process.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.FormatInt(counter.Add(1), 10)), nil
		})
	srv.AddTool(mcp.NewTool("pid", mcp.WithDescription("The server's process id.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	srv.AddTool(mcp.NewTool("spawn", mcp.WithDescription("Starts a process that sleeps, and gives its pid.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=sleep")
			if err := cmd.Start(); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			go cmd.Wait() // the server reaps it if it dies first
			return mcp.NewToolResultText(strconv.Itoa(cmd.Process.Pid)), nil
		})
	srv.AddTool(mcp.NewTool("add_tool", mcp.WithDescription("Adds the tool late.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			server.ServerFromContext(ctx).AddTool(mcp.NewTool("late", mcp.WithDescription("Added late.")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("late"), nil
				})
			return mcp.NewToolResultText("added"), nil
		})
	return srv
}

// testTools are the tools of newTestServer, in the order it lists them
// (by name).
var testTools = []string{"add_tool", "count", "crash", "echo", "fail", "flood", "hang", "image", "pid", "progress", "slow", "spawn"}

// fixture is a test server on one transport, and how to see what it saw.
type fixture struct {
	cfg ServerConfig
	// cancelled waits (boundedly) for the server to see a call cancelled.
	cancelled func(t *testing.T)
	// stop stops an HTTP server.
	stop func()
}

// stdioConfig is a stdio server running the test binary in a mode.
func stdioConfig(t *testing.T, name, mode string) ServerConfig {
	t.Helper()
	return ServerConfig{
		Name:         name,
		Command:      os.Args[0],
		Env:          map[string]string{helperEnv: mode, markEnv: t.TempDir()},
		StartTimeout: 10 * time.Second,
	}
}

// newFixture starts a test server on the transport and returns its
// configuration. HTTP servers are in the test process, on 127.0.0.1; a
// stdio server is the test binary.
func newFixture(t *testing.T, tr Transport) *fixture {
	t.Helper()
	switch tr {
	case TransportStdio:
		cfg := stdioConfig(t, "test", "server")
		dir := cfg.Env[markEnv]
		return &fixture{cfg: cfg, cancelled: func(t *testing.T) {
			t.Helper()
			waitFor(t, "the server saw the call cancelled", func() bool {
				_, err := os.Stat(filepath.Join(dir, "cancelled"))
				return err == nil
			})
		}}
	case TransportSSE, TransportHTTP:
		cancelled := make(chan struct{})
		var once sync.Once
		h := &hooks{cancelled: func() { once.Do(func() { close(cancelled) }) }, hang: make(chan struct{})}
		srv := newTestServer(h)
		var ts *httptest.Server
		if tr == TransportSSE {
			ts = servertest.NewTestServer(srv)
		} else {
			ts = servertest.NewTestStreamableHTTPServer(srv)
		}
		h.crash = ts.CloseClientConnections
		var stopOnce sync.Once
		stop := func() {
			stopOnce.Do(func() {
				// ts.Close waits for the handlers: end those that wait
				// for the test or for a client (a subscription).
				close(h.hang)
				ts.CloseClientConnections()
				ts.Close()
			})
		}
		t.Cleanup(stop)
		url := ts.URL + "/mcp"
		if tr == TransportSSE {
			url = ts.URL + "/sse"
		}
		return &fixture{
			stop: stop,
			cfg:  ServerConfig{Name: "test", Transport: tr, URL: url, StartTimeout: 10 * time.Second},
			cancelled: func(t *testing.T) {
				t.Helper()
				select {
				case <-cancelled:
				case <-time.After(10 * time.Second):
					t.Fatal("the server never saw the call cancelled")
				}
			},
		}
	}
	t.Fatalf("no fixture for transport %q", tr)
	return nil
}

var transports = []Transport{TransportStdio, TransportSSE, TransportHTTP}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newClient makes a Client of cfgs that the test closes.
func newClient(t *testing.T, opts Options, cfgs ...ServerConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(ctx, cfgs, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// tool returns the client's tool with that name.
func tool(t *testing.T, c *Client, name string) *mcpTool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Definition().Name == name {
			return tl.(*mcpTool)
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

// buffer is an agent.Progress that keeps what it was given.
type buffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) { return b.WriteString(string(p)) }

func (b *buffer) WriteString(s string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.WriteString(s)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run calls a tool with a bounded context.
func run(t *testing.T, tl *mcpTool, args string, progress *buffer) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if progress == nil {
		progress = &buffer{}
	}
	return tl.Execute(ctx, []byte(args), progress)
}

func itoa(n int) string { return strconv.Itoa(n) }

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
