package mcptest

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// exerciseEverything lists server-everything's tools and calls echo,
// get-tiny-image and trigger-long-running-operation (with a progress
// token) on an initialized client.
func exerciseEverything(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	progress := watchProgress(c)
	require.NoError(t, initialize(ctx, c))

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"echo", "get-tiny-image", "trigger-long-running-operation"} {
		assert.True(t, names[want], "tool %s in %v", want, names)
	}

	res, err := callTool(ctx, c, "echo", map[string]any{"message": "hello, everything"}, nil)
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "Echo: hello, everything", text(res))

	res, err = callTool(ctx, c, "get-tiny-image", map[string]any{}, nil)
	require.NoError(t, err)
	var images int
	for _, content := range res.Content {
		if img, ok := content.(mcp.ImageContent); ok {
			images++
			assert.Equal(t, "image/png", img.MIMEType)
			assert.True(t, strings.HasPrefix(img.Data, tinyPNGStart), "base64 PNG data")
		}
	}
	assert.Equal(t, 1, images)

	const steps = 3
	res, err = callTool(ctx, c, "trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": steps}, "everything-progress")
	require.NoError(t, err)
	assert.Contains(t, text(res), "Long running operation completed")
	notes := progress.all()
	require.Len(t, notes, steps, "one notification per step, each before the answer")
	for i, n := range notes {
		assert.Equal(t, "everything-progress", n["progressToken"])
		assert.Equal(t, i+1, number(n["progress"]))
		assert.Equal(t, steps, number(n["total"]))
	}
}

func TestEverythingStdio(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), testLimit)
	defer cancel()
	command, args := EverythingStdio(t)
	c := startStdio(t, command, args, stdioOptions{})
	exerciseEverything(ctx, t, c.Client)
}

func TestEverythingHTTP(t *testing.T) {
	leaktest.Check(t, settleHTTP)
	for _, transport := range []string{"sse", "streamableHttp"} {
		var pid int
		var port string
		t.Run(transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testLimit)
			defer cancel()
			var u string
			u, pid = startEverythingHTTP(t, transport)
			parsed, err := url.Parse(u)
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", parsed.Hostname())
			port = parsed.Port()
			if runtime.GOOS == "linux" {
				assert.Equal(t, []string{"127.0.0.1:" + port}, listeners(t, port), "the server listens on loopback only")
			}

			var c *client.Client
			if transport == "sse" {
				c, err = client.NewSSEMCPClient(u)
			} else {
				c, err = client.NewStreamableHttpClient(u)
			}
			require.NoError(t, err)
			// The SSE stream lives as long as Start's context.
			connCtx, stop := context.WithCancel(context.Background())
			t.Cleanup(func() {
				_ = c.Close()
				stop()
			})
			require.NoError(t, c.Start(connCtx))
			exerciseEverything(ctx, t, c)
		})
		if pid == 0 {
			continue // the subtest failed or skipped
		}
		// The subtest's cleanup ended the server.
		assert.False(t, Alive(pid), "%s: server-everything (pid %d) outlived its test", transport, pid)
		if _, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			t.Errorf("%s: port %s still accepts connections", transport, port)
		}
	}
}

// TestEverythingHTTPUnknownTransport: a transport the server does not
// have fails the test rather than starting anything.
func TestEverythingHTTPUnknownTransport(t *testing.T) {
	ft := &fatalT{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine with runtime.Goexit
		defer close(done)
		EverythingHTTP(ft, "websocket")
	}()
	<-done
	assert.Contains(t, ft.msg, `transport "websocket" is neither sse nor streamableHttp`)
}

// fatalT records the message of Fatalf instead of failing the test.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// listeners returns the local addresses of the TCP sockets listening on
// port, from /proc/net/tcp and /proc/net/tcp6 (what `ss -ltn` reads).
func listeners(t *testing.T, port string) []string {
	t.Helper()
	var addrs []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// "sl local_address rem_address st ...", addresses as hex IP:PORT,
			// the IP in the kernel's byte order; state 0A is LISTEN.
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			ipHex, portHex, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			var p int
			if _, err := fmt.Sscanf(portHex, "%X", &p); err != nil || fmt.Sprint(p) != port {
				continue
			}
			raw, err := hex.DecodeString(ipHex)
			require.NoError(t, err)
			for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is little-endian
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			addrs = append(addrs, net.JoinHostPort(net.IP(raw).String(), port))
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	return addrs
}
