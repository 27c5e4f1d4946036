package mcpclient

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/mcpclient/internal/mcptest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// The tests run one MCP test server, package testserver: over stdio as the
// stdioserver command (mcptest.StdioServer builds it), over SSE and
// streamable HTTP in the test's process. It lists its tools two a page, so
// every listing goes over pages.

// testTools are the test server's tools, in the order it lists them.
var testTools = testserver.Tools

// stdioConfig is a stdio server running the stdio test server with flags
// (see the stdioserver command).
func stdioConfig(t testing.TB, name string, flags ...string) ServerConfig {
	t.Helper()
	command, args := mcptest.StdioServer(t, append([]string{"-page-size=2"}, flags...)...)
	return ServerConfig{
		Name:         name,
		Command:      command,
		Args:         args,
		StartTimeout: 10 * time.Second,
	}
}

// fixture is a test server on one transport.
type fixture struct {
	cfg ServerConfig
	// stop stops an HTTP server.
	stop func()
}

// newFixture starts a test server on the transport and returns its
// configuration. HTTP servers are in the test process, on 127.0.0.1, where
// the crash tool cuts the client's connections; a stdio server is the
// stdioserver command.
func newFixture(t testing.TB, tr Transport) *fixture {
	t.Helper()
	switch tr {
	case TransportStdio:
		return &fixture{cfg: stdioConfig(t, "test")}
	case TransportSSE, TransportHTTP:
		release := make(chan struct{})
		var served atomic.Pointer[httptest.Server]
		srv := testserver.New(testserver.Options{
			PageSize: 2,
			Release:  release,
			Crash:    func(int) { served.Load().CloseClientConnections() },
		})
		var ts *httptest.Server
		if tr == TransportSSE {
			ts = servertest.NewTestServer(srv)
		} else {
			ts = servertest.NewTestStreamableHTTPServer(srv)
		}
		served.Store(ts)
		stop := sync.OnceFunc(func() {
			// ts.Close waits for the handlers: end those that wait for
			// the test or for a client (a subscription).
			close(release)
			ts.CloseClientConnections()
			ts.Close()
		})
		t.Cleanup(stop)
		url := ts.URL + "/mcp"
		if tr == TransportSSE {
			url = ts.URL + "/sse"
		}
		return &fixture{
			stop: stop,
			cfg:  ServerConfig{Name: "test", Transport: tr, URL: url, StartTimeout: 10 * time.Second},
		}
	}
	t.Fatalf("no fixture for transport %q", tr)
	return nil
}

var transports = []Transport{TransportStdio, TransportSSE, TransportHTTP}

// waitCancelled waits (boundedly) until the server of c's shared test
// server saw n calls cancelled, asking its cancelled tool.
func waitCancelled(t *testing.T, c *Client, n int) {
	t.Helper()
	waitFor(t, "the server saw "+itoa(n)+" call(s) cancelled", func() bool {
		got, err := run(t, tool(t, c, "cancelled"), `{}`, nil)
		return err == nil && got == itoa(n)
	})
}

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
func newClient(t testing.TB, opts Options, cfgs ...ServerConfig) *Client {
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
