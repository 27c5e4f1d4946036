//go:build unix

package mcpclient

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// processGone reports whether the process has ended: it does not exist, or
// it is a zombie left for its parent (init, for an orphan) to reap.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// A server behind a wrapper (sh here, npx or uvx in the wild) that ignores
// the end of its input and SIGTERM, and a process it started, all end with
// the client: the whole process group is killed.
func TestStdioWrapperLeavesNoProcess(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "wrapped", "-stubborn")
	// Not exec: sh stays the server's parent, as a wrapper does.
	cfg.Command, cfg.Args = "sh", append([]string{"-c", `"$0" "$@"; echo "server ended" >&2`, cfg.Command}, cfg.Args...)
	c := newClient(t, Options{}, cfg)

	shell := c.Servers()[0].PID
	srv, _ := strconv.Atoi(mustRun(t, tool(t, c, "pid"), `{}`))
	child, _ := strconv.Atoi(mustRun(t, tool(t, c, "spawn"), `{}`))
	if shell == 0 || srv == 0 || child == 0 || srv == shell {
		t.Fatalf("pids: shell %d, server %d, child %d", shell, srv, child)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(shell) {
		t.Errorf("the wrapper (pid %d) outlived Close", shell)
	}
	// The others were sent SIGKILL, which takes a moment to land.
	for _, pid := range []int{srv, child} {
		waitFor(t, "process "+strconv.Itoa(pid)+" is gone", func() bool { return processGone(pid) })
	}
}

// Servers that misbehave from the start never hang New, never grow the
// client's memory without bound, and leave no process behind.
func TestStdioMisbehavingServers(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		flags []string
		want  string
	}{
		{"silent", []string{"-mode=silence", "-stubborn"}, "no answer within the start timeout of 1s"},
		{"garbage", []string{"-mode=garbage"}, "no answer within the start timeout of 1s"},
		{"huge", []string{"-mode=flood"}, "the server sent a message larger than 32 MiB"},
		{"fail", []string{"-mode=exit"}, "the server exited (exit status 3): stdioserver: exiting at start (-mode=exit)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			leaktest.Check(t)
			cfg := stdioConfig(t, "bad", tc.flags...)
			cfg.StartTimeout = time.Second
			if tc.mode == "huge" {
				// Not the start timeout but the bound must end it: reading
				// 32 MiB under the race detector on a busy machine can
				// take longer than a second.
				cfg.StartTimeout = 20 * time.Second
			}
			var logs strings.Builder
			var mu sync.Mutex
			logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return logs.Write(p)
			}), &slog.HandlerOptions{Level: slog.LevelDebug}))

			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := New(ctx, []ServerConfig{cfg}, Options{Logger: logger})
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `mcp server "bad"`) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 256<<20 {
				t.Errorf("the heap grew by %d MiB", grown>>20)
			}
			if tc.mode == "fail" {
				mu.Lock()
				defer mu.Unlock()
				if !strings.Contains(logs.String(), "exiting at start") {
					t.Errorf("the server's standard error is not in the log:\n%s", logs.String())
				}
				for line := range strings.Lines(logs.String()) {
					if len(line) > maxStderrLine+200 {
						t.Errorf("a log line of %d bytes", len(line))
					}
				}
			}
		})
	}
}

func mustRun(t *testing.T, tl *mcpTool, args string) string {
	t.Helper()
	out, err := run(t, tl, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", tl.def.Name, err)
	}
	return out
}

// A conversation's instance that died between two calls is replaced by the
// next call, which runs.
func TestPerConversationCrashWhileIdle(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "sandboxed")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)

	callAs(t, c, "a", "counter", `{}`)
	pid, _ := strconv.Atoi(callAs(t, c, "a", "pid", `{}`).Result)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client sees the instance gone", func() bool {
		inst, release, err := c.entries[0].sb.get(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		return inst.(*conn).isLost()
	})
	if got := callAs(t, c, "a", "counter", `{}`); got.State != agent.StateResult || got.Result != "1" {
		t.Errorf("counter after a crash while idle = %+v, want a fresh instance", got)
	}
}
