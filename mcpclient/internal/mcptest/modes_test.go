package mcptest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// garbageLines are the lines the garbage modes write, as the server writes
// them.
var garbageLines = []string{
	"stdioserver: this line is not JSON",
	`[1, 2, 3]`,
	`{"hello": "this object is not JSON-RPC"}`,
	`{"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}`,
	`{"jsonrpc": "2.0", "method": `,
}

// TestStdioServerGarbage: garbage-before writes the garbage lines before
// anything else, garbage-after before every message after its first; mcp-go's
// client skips every such line (it ignores lines it cannot decode and
// answers to requests it did not send), so Initialize and calls succeed.
func TestStdioServerGarbage(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()

	t.Run("before/raw", func(t *testing.T) {
		command, args := StdioServer(t, "-mode=garbage-before")
		r := startRaw(t, command, args...)
		for _, want := range garbageLines {
			assert.Equal(t, want, r.line(t, 1<<20))
		}
		r.initialize(t)
		r.call(t, 2, "echo", `{"text":"after the garbage"}`)
		assert.Contains(t, r.line(t, 1<<20), `"id":2,"result"`)
	})

	t.Run("after/raw", func(t *testing.T) {
		command, args := StdioServer(t, "-mode=garbage-after")
		r := startRaw(t, command, args...)
		r.initialize(t) // its answer is the first line
		r.call(t, 2, "echo", `{"text":"amid the garbage"}`)
		for _, want := range garbageLines {
			assert.Equal(t, want, r.line(t, 1<<20))
		}
		assert.Contains(t, r.line(t, 1<<20), `"id":2,"result"`)
		r.call(t, 3, "echo", `{"text":"again"}`)
		for _, want := range garbageLines {
			assert.Equal(t, want, r.line(t, 1<<20))
		}
		assert.Contains(t, r.line(t, 1<<20), `"id":3,"result"`)
	})

	for _, mode := range []string{"garbage-before", "garbage-after"} {
		t.Run(mode+"/client", func(t *testing.T) {
			c := connect(ctx, t, stdioOptions{}, "-mode="+mode)
			for range 3 {
				assert.Equal(t, "still fine", text(mustCall(ctx, t, c, "echo", map[string]any{"text": "still fine"})))
			}
		})
	}
}

// TestStdioServerHuge: every tool call is answered with one line holding a
// text of -huge-bytes bytes (64 MiB by default).
func TestStdioServerHuge(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()

	t.Run("raw", func(t *testing.T) {
		command, args := StdioServer(t, "-mode=huge")
		r := startRaw(t, command, args...)
		r.initialize(t)
		r.call(t, 2, "echo", `{"text":"small"}`)
		n, start := r.lineLength(t)
		assert.Greater(t, n, 64<<20)
		assert.Less(t, n, 64<<20+200, "the text and a JSON-RPC envelope")
		assert.True(t, strings.HasPrefix(start, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"xxxx`), start)
	})

	t.Run("client", func(t *testing.T) {
		c := connect(ctx, t, stdioOptions{}, "-mode=huge", "-huge-bytes=1048576")
		res := mustCall(ctx, t, c, "pid", nil)
		assert.Equal(t, strings.Repeat("x", 1<<20), text(res))
	})
}

// TestStdioServerFlood: the first answer comes whole, then one line that
// never ends; the process dies once its stdout is closed.
func TestStdioServerFlood(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t, "-mode=flood")
	r := startRaw(t, command, args...)
	r.initialize(t)
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

// TestStdioServerSilence: the server reads everything, writes nothing, and
// ends when its stdin closes. An mcp-go client's Initialize waits until its
// context ends.
func TestStdioServerSilence(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t, "-mode=silence")

	t.Run("raw", func(t *testing.T) {
		r := startRaw(t, command, args...)
		r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
		require.NoError(t, r.stdin.Close())
		assert.Equal(t, 0, r.wait(t))
		require.NoError(t, r.stdout.SetReadDeadline(time.Now().Add(testLimit)))
		out, err := io.ReadAll(r.out)
		require.NoError(t, err)
		assert.Empty(t, out)
	})

	t.Run("client", func(t *testing.T) {
		c := startStdio(t, command, args, stdioOptions{})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		err := initialize(ctx, c.Client)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// TestStdioServerExit: the server exits with status 3 before reading
// anything; an mcp-go client's Initialize fails at once (its reader sees
// the end of stdout).
func TestStdioServerExit(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t, "-mode=exit")

	t.Run("raw", func(t *testing.T) {
		r := startRaw(t, command, args...)
		assert.Equal(t, 3, r.wait(t))
		assert.Contains(t, r.stderr.String(), "exiting at start")
	})

	t.Run("client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), testLimit)
		defer cancel()
		c := startStdio(t, command, args, stdioOptions{})
		require.Error(t, initialize(ctx, c.Client))
		require.NoError(t, ctx.Err(), "Initialize returned before the test's limit")
	})
}

// TestStdioServerGarbageOnly: -mode=garbage writes the garbage lines over
// and over and answers nothing.
func TestStdioServerGarbageOnly(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t, "-mode=garbage")
	r := startRaw(t, command, args...)
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	for i := range 3 * len(garbageLines) {
		assert.Equal(t, garbageLines[i%len(garbageLines)], r.line(t, 1<<20), "line %d", i)
	}
}

// TestStdioServerLegacy: -mode=legacy ignores server/discover (and any
// request it does not know) without a word, answers initialize at
// 2025-11-25, and its ignored tool names what it ignored.
func TestStdioServerLegacy(t *testing.T) {
	leaktest.Check(t)
	command, args := StdioServer(t, "-mode=legacy")
	r := startRaw(t, command, args...)
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	line := r.line(t, 1<<20)
	assert.Contains(t, line, `"id":2`, "the first answer is initialize's: discover is not answered")
	assert.Contains(t, line, `"protocolVersion":"2025-11-25"`)
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	r.call(t, 4, "ignored", `{}`)
	line = r.line(t, 1<<20)
	assert.Contains(t, line, `"id":4`)
	assert.Contains(t, line, `"text":"server/discover,ping"`)
	r.call(t, 5, "hello", `{}`)
	assert.Contains(t, r.line(t, 1<<20), `"text":"hi from legacy"`)
	require.NoError(t, r.stdin.Close())
	assert.Equal(t, 0, r.wait(t))
}

// TestStdioServerStubborn: with -stubborn the process outlives the end of
// its input and SIGTERM, whatever the mode, until SIGKILL.
func TestStdioServerStubborn(t *testing.T) {
	leaktest.Check(t)
	for _, mode := range []string{"normal", "silence"} {
		t.Run(mode, func(t *testing.T) {
			command, args := StdioServer(t, "-stubborn", "-mode="+mode)
			r := startRaw(t, command, args...)
			if mode == "normal" {
				r.initialize(t)
			}
			require.NoError(t, r.stdin.Close())
			time.Sleep(300 * time.Millisecond)
			assert.False(t, r.ended(), "the process ended when stdin closed")
			require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
			time.Sleep(300 * time.Millisecond)
			assert.False(t, r.ended(), "the process ended on SIGTERM")
			require.NoError(t, r.cmd.Process.Kill())
			assert.Equal(t, -1, r.wait(t), "killed by a signal")
		})
	}
}

// TestStdioServerFirstNormal: the first start with -first-normal serves
// normally and creates the file; later starts take -mode.
func TestStdioServerFirstNormal(t *testing.T) {
	leaktest.Check(t)
	file := filepath.Join(t.TempDir(), "started")
	command, args := StdioServer(t, "-mode=exit", "-first-normal="+file)

	first := startRaw(t, command, args...)
	first.initialize(t)
	first.call(t, 2, "echo", `{"text":"first"}`)
	assert.Contains(t, first.line(t, 1<<20), `"text":"first"`)
	_, err := os.Stat(file)
	require.NoError(t, err, "the first start made the file")

	for range 2 {
		later := startRaw(t, command, args...)
		assert.Equal(t, 3, later.wait(t), "a later start exits")
		assert.Contains(t, later.stderr.String(), "exiting at start")
	}
	require.NoError(t, first.stdin.Close())
	assert.Equal(t, 0, first.wait(t))
}
