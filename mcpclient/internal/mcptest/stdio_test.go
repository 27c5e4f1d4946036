package mcptest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// allTools are the stdio server's tools, sorted.
var allTools = testserver.Tools

// connect starts the stdio server with flags and initializes a client.
func connect(ctx context.Context, t *testing.T, o stdioOptions, flags ...string) *stdioClient {
	t.Helper()
	command, args := StdioServer(t, flags...)
	c := startStdio(t, command, args, o)
	require.NoError(t, initialize(ctx, c.Client), "stderr: %s", c.stderr)
	return c
}

// mustCall calls tool and fails t on a Go error.
func mustCall(ctx context.Context, t *testing.T, c *stdioClient, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(ctx, c.Client, tool, args, nil)
	require.NoError(t, err, "%s; stderr: %s", tool, c.stderr)
	return res
}

func TestStdioServerTools(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	dir := t.TempDir()
	c := connect(ctx, t, stdioOptions{env: []string{"MCPTEST_GREETING=hello from the environment"}, dir: dir})

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, allTools, names)

	t.Run("echo", func(t *testing.T) {
		res := mustCall(ctx, t, c, "echo", map[string]any{"text": "hello, echo"})
		assert.False(t, res.IsError)
		assert.Equal(t, []mcp.Content{mcp.NewTextContent("hello, echo")}, res.Content)
	})
	t.Run("image", func(t *testing.T) {
		res := mustCall(ctx, t, c, "image", nil)
		require.Len(t, res.Content, 2)
		assert.Equal(t, "a tiny image", res.Content[0].(mcp.TextContent).Text)
		img := res.Content[1].(mcp.ImageContent)
		assert.Equal(t, "image/png", img.MIMEType)
		assert.Equal(t, tinyPNGStart, img.Data[:len(tinyPNGStart)])
	})
	t.Run("audio", func(t *testing.T) {
		res := mustCall(ctx, t, c, "audio", nil)
		require.Len(t, res.Content, 2)
		assert.Equal(t, "audio/wav", res.Content[1].(mcp.AudioContent).MIMEType)
	})
	t.Run("fail", func(t *testing.T) {
		res := mustCall(ctx, t, c, "fail", nil)
		assert.True(t, res.IsError)
		assert.Equal(t, "fail: this tool always fails", text(res))
		res = mustCall(ctx, t, c, "fail", map[string]any{"message": "no such file"})
		assert.True(t, res.IsError)
		assert.Equal(t, "no such file", text(res))
	})
	t.Run("env", func(t *testing.T) {
		res := mustCall(ctx, t, c, "env", map[string]any{"name": "MCPTEST_GREETING"})
		assert.False(t, res.IsError)
		assert.Equal(t, "hello from the environment", text(res))
		res = mustCall(ctx, t, c, "env", map[string]any{"name": "MCPTEST_NOT_SET"})
		assert.True(t, res.IsError)
		assert.Equal(t, "env: MCPTEST_NOT_SET is not set", text(res))
	})
	t.Run("cwd", func(t *testing.T) {
		want, err := filepath.EvalSymlinks(dir)
		require.NoError(t, err)
		assert.Equal(t, want, text(mustCall(ctx, t, c, "cwd", nil)))
	})
	t.Run("pid", func(t *testing.T) {
		assert.Equal(t, strconv.Itoa(c.pid), text(mustCall(ctx, t, c, "pid", nil)))
	})
	t.Run("counter", func(t *testing.T) {
		for want := 1; want <= 3; want++ {
			assert.Equal(t, strconv.Itoa(want), text(mustCall(ctx, t, c, "counter", nil)))
		}
	})
	t.Run("resources", func(t *testing.T) {
		res := mustCall(ctx, t, c, "resources", nil)
		require.Len(t, res.Content, 4)
		assert.Equal(t, "two notes and some bytes", res.Content[0].(mcp.TextContent).Text)
		link := res.Content[1].(mcp.ResourceLink)
		assert.Equal(t, "mcptest://notes/readme.txt", link.URI)
		assert.Equal(t, "readme.txt", link.Name)
		note := res.Content[2].(mcp.EmbeddedResource).Resource.(mcp.TextResourceContents)
		assert.Equal(t, "mcptest://notes/hello.txt", note.URI)
		assert.Equal(t, "hello from an embedded resource", note.Text)
		blob := res.Content[3].(mcp.EmbeddedResource).Resource.(mcp.BlobResourceContents)
		assert.Equal(t, "mcptest://data/blob.bin", blob.URI)
		assert.Equal(t, "AAECAw==", blob.Blob)
	})
}

// tinyPNGStart is how every base64 PNG starts (the PNG signature).
const tinyPNGStart = "iVBORw0KGgo"

func TestStdioServerPagination(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	c := connect(ctx, t, stdioOptions{}, "-page-size=4")

	page, err := c.ListToolsByPage(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.Len(t, page.Tools, 4)
	assert.NotEmpty(t, page.NextCursor)
	all, err := c.ListTools(ctx, mcp.ListToolsRequest{}) // follows the cursors
	require.NoError(t, err)
	assert.Len(t, all.Tools, len(allTools))
}

func TestStdioServerProgress(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	c := connect(ctx, t, stdioOptions{})
	progress := watchProgress(c.Client)

	res, err := callTool(ctx, c.Client, "progress", map[string]any{"steps": 4, "delay_ms": 10}, "tok-1")
	require.NoError(t, err)
	assert.Equal(t, "progress: done 4 steps", text(res))
	notes := progress.all()
	require.Len(t, notes, 4, "every notification precedes the answer; stderr: %s", c.stderr)
	for i, n := range notes {
		assert.Equal(t, "tok-1", n["progressToken"])
		assert.Equal(t, i+1, number(n["progress"]))
		assert.Equal(t, 4, number(n["total"]))
		assert.Equal(t, fmt.Sprintf("step %d of 4", i+1), n["message"])
	}

	// Without a progress token, no notification.
	res, err = callTool(ctx, c.Client, "progress", map[string]any{"steps": 2, "delay_ms": 10}, nil)
	require.NoError(t, err)
	assert.Equal(t, "progress: done 2 steps", text(res))
	assert.Len(t, progress.all(), 4)
}

func TestStdioServerCancellation(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	c := connect(ctx, t, stdioOptions{})
	cancelled := func(want int) func() bool {
		return func() bool { return text(mustCall(ctx, t, c, "cancelled", nil)) == strconv.Itoa(want) }
	}

	// slow answers when its time is up...
	res := mustCall(ctx, t, c, "slow", map[string]any{"seconds": 0.01})
	assert.Equal(t, "slow: done", text(res))
	assert.True(t, cancelled(0)())

	// ...and ends when the client cancels it.
	callCtx, stop := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, stop)
	_, err := callTool(callCtx, c.Client, "slow", nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	eventually(ctx, t, "slow saw its cancellation", cancelled(1))

	// progress stops between steps.
	progress := watchProgress(c.Client)
	callCtx, stop = context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := callTool(callCtx, c.Client, "progress", map[string]any{"steps": 10000, "delay_ms": 5}, "tok-cancel")
		done <- err
	}()
	progress.await(ctx, t, 2)
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	eventually(ctx, t, "progress saw its cancellation", cancelled(2))
}

// TestStdioServerHang: hang answers nothing, ignores cancellation, and
// keeps the process alive after stdin closes and after SIGTERM, while the
// server keeps answering other calls. slow, by contrast, lets the process
// end when stdin closes.
func TestStdioServerHang(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t)

	t.Run("hang", func(t *testing.T) {
		r := startRaw(t, command, args...)
		r.initialize(t)
		r.call(t, 2, "hang", `{}`)
		r.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		r.call(t, 3, "echo", `{"text":"still here"}`)
		line := r.line(t, 1<<20)
		assert.Contains(t, line, `"id":3,"result"`, "the only answer is echo's")
		assert.Contains(t, line, "still here")

		require.NoError(t, r.stdin.Close())
		time.Sleep(300 * time.Millisecond)
		assert.False(t, r.ended(), "the process ended when stdin closed")
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
		time.Sleep(300 * time.Millisecond)
		assert.False(t, r.ended(), "the process ended on SIGTERM")
		require.NoError(t, r.cmd.Process.Kill())
		assert.Equal(t, -1, r.wait(t), "killed by a signal")
	})

	t.Run("slow", func(t *testing.T) {
		r := startRaw(t, command, args...)
		r.initialize(t)
		r.call(t, 2, "slow", `{}`)
		r.call(t, 3, "echo", `{"text":"in flight"}`)
		assert.Contains(t, r.line(t, 1<<20), `"id":3,"result"`)
		require.NoError(t, r.stdin.Close())
		assert.Equal(t, 0, r.wait(t), "stderr: %s", r.stderr)
	})
}

func TestStdioServerCrash(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()

	t.Run("raw", func(t *testing.T) {
		command, args := StdioServer(t)
		r := startRaw(t, command, args...)
		r.initialize(t)
		r.call(t, 2, "crash", `{"status":7}`)
		assert.Equal(t, 7, r.wait(t))
		assert.Contains(t, r.stderr.String(), "crash: exiting with status 7")
	})

	t.Run("client", func(t *testing.T) {
		c := connect(ctx, t, stdioOptions{})
		_, err := callTool(ctx, c.Client, "crash", nil, nil)
		require.Error(t, err, "a call whose server died returns an error")
		require.NoError(t, ctx.Err(), "the call returned before the test's limit")
		_, err = callTool(ctx, c.Client, "echo", map[string]any{"text": "anyone?"}, nil)
		require.Error(t, err)
	})
}

func TestStdioServerSpawn(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()

	// childOf checks that pid lives in the server's process group.
	childOf := func(t *testing.T, c *stdioClient, pid int) {
		t.Helper()
		require.True(t, Alive(pid), "the child %d is alive", pid)
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		assert.Equal(t, c.pid, pgid, "the child is in the server's process group")
	}

	t.Run("returns", func(t *testing.T) {
		c := connect(ctx, t, stdioOptions{})
		pid, err := strconv.Atoi(text(mustCall(ctx, t, c, "spawn", map[string]any{"seconds": 60})))
		require.NoError(t, err)
		childOf(t, c, pid)
		// The server is still alive and the child outlives the call.
		assert.Equal(t, strconv.Itoa(c.pid), text(mustCall(ctx, t, c, "pid", nil)))
		assert.True(t, Alive(pid))
		killGroup(c.pid)
		eventually(ctx, t, "the child ends with its group", func() bool { return !Alive(pid) })
	})

	t.Run("blocks", func(t *testing.T) {
		c := connect(ctx, t, stdioOptions{})
		progress := watchProgress(c.Client)
		callCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := callTool(callCtx, c.Client, "spawn", map[string]any{"seconds": 60, "block": true}, 7)
			done <- err
		}()
		progress.await(ctx, t, 1)
		note := progress.all()[0]
		assert.Equal(t, 7, number(note["progressToken"]))
		msg, _ := note["message"].(string)
		pid, err := strconv.Atoi(strings.TrimPrefix(msg, "child pid "))
		require.NoError(t, err, "message %q", msg)
		eventually(ctx, t, "the pid on stderr", func() bool { return strings.Contains(c.stderr.String(), msg) })
		childOf(t, c, pid)

		stop()
		require.ErrorIs(t, <-done, context.Canceled)
		eventually(ctx, t, "spawn saw its cancellation", func() bool {
			return text(mustCall(ctx, t, c, "cancelled", nil)) == "1"
		})
		assert.True(t, Alive(pid), "the child outlives the cancelled call")
		killGroup(c.pid)
		eventually(ctx, t, "the child ends with its group", func() bool { return !Alive(pid) })
	})
}

// TestStdioServerInstances: each process has its own state.
func TestStdioServerInstances(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	a := connect(ctx, t, stdioOptions{})
	b := connect(ctx, t, stdioOptions{})
	assert.NotEqual(t, a.pid, b.pid)

	count := func(c *stdioClient) string { return text(mustCall(ctx, t, c, "counter", nil)) }
	assert.Equal(t, "1", count(a))
	assert.Equal(t, "2", count(a))
	assert.Equal(t, "1", count(b), "b does not see a's count")
	assert.Equal(t, "3", count(a))
	assert.Equal(t, strconv.Itoa(b.pid), text(mustCall(ctx, t, b, "pid", nil)))
}

// TestStdioServerBuiltOnce: every call of StdioServer returns the same
// binary, and the flags as given.
func TestStdioServerBuiltOnce(t *testing.T) {
	c1, a1 := StdioServer(t)
	c2, a2 := StdioServer(t, "-mode=huge", "-huge-bytes=10")
	assert.Equal(t, c1, c2)
	assert.Empty(t, a1)
	assert.Equal(t, []string{"-mode=huge", "-huge-bytes=10"}, a2)
	info, err := os.Stat(c1)
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular())
}

// TestStdioServerProgressOptions: without messages the notifications have
// none; with hold the call answers nothing after its steps and ends when
// cancelled.
func TestStdioServerProgressOptions(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	c := connect(ctx, t, stdioOptions{})
	progress := watchProgress(c.Client)

	res, err := callTool(ctx, c.Client, "progress", map[string]any{"steps": 2, "delay_ms": 10, "messages": false}, "plain")
	require.NoError(t, err)
	assert.Equal(t, "progress: done 2 steps", text(res))
	for _, n := range progress.all() {
		assert.NotContains(t, n, "message")
		assert.Equal(t, 2, number(n["total"]))
	}

	callCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := callTool(callCtx, c.Client, "progress", map[string]any{"steps": 2, "delay_ms": 1, "hold": true}, "held")
		done <- err
	}()
	progress.await(ctx, t, 4)
	select {
	case err := <-done:
		t.Fatalf("a held call returned: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	eventually(ctx, t, "progress saw its cancellation", func() bool {
		return text(mustCall(ctx, t, c, "cancelled", nil)) == "1"
	})
}

// TestStdioServerFloodTool: the flood tool writes one line without end
// beside the server's messages; the process dies of SIGPIPE once its
// stdout is closed.
func TestStdioServerFloodTool(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t)
	r := startRaw(t, command, args...)
	r.initialize(t)
	r.call(t, 2, "flood", `{}`)
	const enough = 16 << 20
	require.NoError(t, r.stdout.SetReadDeadline(time.Now().Add(testLimit)))
	buf := make([]byte, 64<<10)
	for read := 0; read < enough; {
		n, err := r.out.Read(buf)
		require.NoError(t, err)
		require.NotContains(t, string(buf[:n]), "\n", "after %d bytes", read)
		read += n
	}
	require.NoError(t, r.stdout.Close())
	assert.Equal(t, -1, r.wait(t), "killed by SIGPIPE")
}

// TestStdioServerFreeze: after freeze the process is stopped: it answers
// nothing, SIGTERM does not end it, SIGKILL does.
func TestStdioServerFreeze(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t)
	r := startRaw(t, command, args...)
	r.initialize(t)
	r.call(t, 2, "freeze", `{}`)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	eventually(ctx, t, "the process is stopped", func() bool { return procState(r.cmd.Process.Pid) == 'T' })
	r.call(t, 3, "echo", `{"text":"anyone?"}`)
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	time.Sleep(300 * time.Millisecond)
	assert.False(t, r.ended(), "a stopped process ended on SIGTERM")
	require.NoError(t, r.stdout.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err := r.out.ReadByte()
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing is answered")
	require.NoError(t, r.cmd.Process.Kill())
	assert.Equal(t, -1, r.wait(t), "killed by a signal")
}

// procState is the state letter of process pid in /proc/<pid>/stat, or 0.
func procState(pid int) byte {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// TestStdioServerAddTool: add_tool adds the tool late, and the client is
// told that the list changed.
func TestStdioServerAddTool(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	c := connect(ctx, t, stdioOptions{})
	changed := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	assert.Equal(t, "added", text(mustCall(ctx, t, c, "add_tool", nil)))
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed")
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.Len(t, tools.Tools, len(allTools)+1)
	assert.Equal(t, "late", text(mustCall(ctx, t, c, "late", nil)))
}
