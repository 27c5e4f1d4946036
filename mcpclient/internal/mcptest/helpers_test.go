package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"
)

// testLimit bounds each test's calls and waits.
const testLimit = 30 * time.Second

// settleHTTP closes the idle keep-alive connections of the default HTTP
// transport, which mcp-go's HTTP clients use; see leaktest.Check.
func settleHTTP() { http.DefaultTransport.(*http.Transport).CloseIdleConnections() }

// stdioClient is an mcp-go client of a subprocess started in its own
// process group.
type stdioClient struct {
	*client.Client
	pid    int         // the subprocess's pid
	stderr *syncBuffer // what the subprocess wrote to standard error
}

// stdioOptions change how startStdio runs the command.
type stdioOptions struct {
	env []string // added to the environment
	dir string   // the working directory
}

// startStdio starts command with mcp-go's stdio client, in a new process
// group that is killed when t ends (before the client is closed, so that
// Close does not wait seconds for a stubborn server). It does not initialize.
//
// NewStdioMCPClientWithOptions starts the process but not the client: only
// Client.Start installs the handler that passes notifications on to
// OnNotification, so without it no progress notification would arrive.
func startStdio(t *testing.T, command string, args []string, o stdioOptions) *stdioClient {
	t.Helper()
	sc := &stdioClient{stderr: &syncBuffer{}}
	var cmd *exec.Cmd
	factory := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd = exec.CommandContext(ctx, command, args...)
		cmd.Env = append(os.Environ(), env...) // a custom factory merges env itself
		cmd.Dir = o.dir
		cmd.Stderr = sc.stderr
		ownGroup(cmd)
		return cmd, nil
	}
	c, err := client.NewStdioMCPClientWithOptions(command, o.env, args, transport.WithCommandFunc(factory))
	require.NoError(t, err)
	sc.Client, sc.pid = c, cmd.Process.Pid
	t.Cleanup(func() {
		killGroup(sc.pid)
		_ = c.Close() // the exit error of a killed process
	})
	require.NoError(t, c.Start(t.Context())) // the process already runs: only the handlers are set
	return sc
}

// initialize runs the MCP handshake on c.
func initialize(ctx context.Context, c *client.Client) error {
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "mcptest", Version: "0.0.0"}
	_, err := c.Initialize(ctx, req)
	return err
}

// callTool calls tool with args on c, with a progress token when token is
// not nil.
func callTool(ctx context.Context, c *client.Client, tool string, args map[string]any, token mcp.ProgressToken) (*mcp.CallToolResult, error) {
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	if token != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return c.CallTool(ctx, req)
}

// text returns the concatenated text contents of res.
func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// progressLog records the progress notifications that reach a client.
type progressLog struct {
	mu    sync.Mutex // guards notes
	notes []map[string]any
	added chan struct{} // a receive after each notification (buffered)
}

// watchProgress records c's progress notifications from now on.
func watchProgress(c *client.Client) *progressLog {
	p := &progressLog{added: make(chan struct{}, 1024)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		p.mu.Lock()
		p.notes = append(p.notes, n.Params.AdditionalFields)
		p.mu.Unlock()
		select {
		case p.added <- struct{}{}:
		default:
		}
	})
	return p
}

func (p *progressLog) all() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.notes...)
}

// await waits until n notifications arrived.
func (p *progressLog) await(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for len(p.all()) < n {
		select {
		case <-p.added:
		case <-ctx.Done():
			t.Fatalf("%d progress notifications arrived, want %d: %v", len(p.all()), n, p.all())
		}
	}
}

// number returns a JSON number from a notification as an int: progress
// values arrive as float64 over a wire.
func number(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return -1
}

// eventually polls cond every 10 ms until it holds or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's limit", what)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// rawServer is a subprocess spoken to line by line, without an MCP client,
// to see exactly what it writes.
type rawServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // its deadlines bound the reads
	out    *bufio.Reader
	stderr *syncBuffer
	done   chan struct{} // closed when cmd.Wait returned
	err    error         // cmd.Wait's error; read after done
}

// startRaw starts command in a new process group, killed when t ends.
func startRaw(t *testing.T, command string, args ...string) *rawServer {
	t.Helper()
	r := &rawServer{stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(command, args...)
	r.cmd.Stderr = r.stderr
	ownGroup(r.cmd)
	var err error
	r.stdin, err = r.cmd.StdinPipe()
	require.NoError(t, err)
	var w *os.File
	r.stdout, w, err = os.Pipe()
	require.NoError(t, err)
	r.cmd.Stdout = w
	require.NoError(t, r.cmd.Start())
	w.Close()
	r.out = bufio.NewReaderSize(r.stdout, 64<<10)
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			killGroup(r.cmd.Process.Pid)
			<-r.done
		}
		r.stdout.Close()
	})
	return r
}

// send writes one JSON-RPC message.
func (r *rawServer) send(t *testing.T, msg string) {
	t.Helper()
	_, err := io.WriteString(r.stdin, msg+"\n")
	require.NoError(t, err)
}

// initialize runs the legacy handshake (initialize, then initialized).
func (r *rawServer) initialize(t *testing.T) {
	t.Helper()
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	line := r.line(t, 1<<20)
	require.Contains(t, line, `"id":1,"result"`, "the answer to initialize")
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// call sends a tools/call request.
func (r *rawServer) call(t *testing.T, id int, tool, args string) {
	t.Helper()
	r.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
}

// line reads the next line of stdout, without its newline, failing t if
// it is longer than limit or does not come within the test's limit.
func (r *rawServer) line(t *testing.T, limit int) string {
	t.Helper()
	require.NoError(t, r.stdout.SetReadDeadline(time.Now().Add(testLimit)))
	var sb strings.Builder
	for {
		chunk, err := r.out.ReadSlice('\n')
		sb.Write(chunk)
		if sb.Len() > limit+1 {
			t.Fatalf("a line of stdout is longer than %d bytes", limit)
		}
		if err == nil {
			return strings.TrimSuffix(sb.String(), "\n")
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			t.Fatalf("reading a line of stdout: %v (so far %q; stderr: %s)", err, head(sb.String()), r.stderr)
		}
	}
}

// lineLength reads the next line of stdout without keeping it, and returns
// its length and its first bytes.
func (r *rawServer) lineLength(t *testing.T) (n int, start string) {
	t.Helper()
	require.NoError(t, r.stdout.SetReadDeadline(time.Now().Add(testLimit)))
	for {
		chunk, err := r.out.ReadSlice('\n')
		if len(start) < 100 {
			start += string(chunk[:min(len(chunk), 100-len(start))])
		}
		n += len(chunk)
		if err == nil {
			return n - 1, start
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			t.Fatalf("reading a line of stdout: %v after %d bytes", err, n)
		}
	}
}

// wait waits for the process to end and returns its exit code.
func (r *rawServer) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(testLimit):
		t.Fatalf("the server did not end; stderr: %s", r.stderr)
	}
	var exit *exec.ExitError
	if r.err != nil && !errors.As(r.err, &exit) {
		t.Fatalf("waiting for the server: %v", r.err)
	}
	return r.cmd.ProcessState.ExitCode()
}

// ended reports whether the process has ended.
func (r *rawServer) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// head shortens s for a message.
func head(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
