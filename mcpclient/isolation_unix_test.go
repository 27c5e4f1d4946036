//go:build unix

package mcpclient

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest"
)

// The tests in this file run per_conversation stdio servers (the stdio
// test server, one process per conversation) through the client, and look
// at the processes.

// sandboxedConfig is a per_conversation stdio test server.
func sandboxedConfig(t *testing.T) ServerConfig {
	t.Helper()
	cfg := stdioConfig(t, "sandboxed")
	cfg.Isolation = IsolationPerConversation
	return cfg
}

// callIn calls the tool in the conversation, as a run of that session
// would, and fails t on an error.
func callIn(t *testing.T, c *Client, ctx context.Context, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := tool(t, c, name).Execute(ctx, []byte(`{}`), &buffer{})
	require.NoError(t, err, name)
	return out
}

// pidIn is the pid of the conversation's server process.
func pidIn(t *testing.T, c *Client, ctx context.Context) int {
	t.Helper()
	pid, err := strconv.Atoi(callIn(t, c, ctx, "pid"))
	require.NoError(t, err)
	require.True(t, mcptest.Alive(pid), "the server %d runs", pid)
	return pid
}

// ended reports whether the process has ended and been waited for: it is
// not alive, and not a zombie child of this process either.
func ended(pid int) bool {
	return !mcptest.Alive(pid) && gone(pid)
}

// Two conversations get two processes, and neither sees the other's
// state; an instance evicted to make room (the least recently used one),
// one evicted after its idle time, one whose conversation is closed and
// those left at Close all end with their process, which is waited for: no
// process and no zombie is left.
func TestIsolationProcesses(t *testing.T) {
	t.Run("two conversations", func(t *testing.T) {
		leaktest.Check(t)
		c := newClient(t, Options{}, sandboxedConfig(t))
		a, b := sessionContext(t, "a"), sessionContext(t, "b")
		pa, pb := pidIn(t, c, a), pidIn(t, c, b)
		assert.NotEqual(t, pa, pb, "one process each")
		for _, step := range []struct {
			ctx  context.Context
			want string
		}{{a, "1"}, {a, "2"}, {b, "1"}, {a, "3"}, {b, "2"}} {
			assert.Equal(t, step.want, callIn(t, c, step.ctx, "counter"))
		}
		assert.Equal(t, pa, pidIn(t, c, a), "a keeps its process")

		c.CloseConversation("a")
		assert.True(t, ended(pa), "a's process ended when CloseConversation returned")
		assert.False(t, ended(pb), "b's runs on")
		assert.Equal(t, "1", callIn(t, c, a, "counter"), "a fresh instance for a")
		pa = pidIn(t, c, a)

		require.NoError(t, c.Close())
		assert.True(t, ended(pa), "Close ended a's process")
		assert.True(t, ended(pb), "Close ended b's process")
		if n, ok := children(); ok {
			assert.Zero(t, n, "child processes left")
		}
	})

	t.Run("least recently used", func(t *testing.T) {
		leaktest.Check(t)
		c := newClient(t, Options{MaxSandboxes: 2}, sandboxedConfig(t))
		a, b, x := sessionContext(t, "a"), sessionContext(t, "b"), sessionContext(t, "c")
		pa := pidIn(t, c, a)
		pb := pidIn(t, c, b)
		callIn(t, c, a, "counter") // b is the least recently used now
		pc := pidIn(t, c, x)
		assert.True(t, ended(pb), "b's process ended to make room for c's")
		assert.False(t, ended(pa))
		assert.False(t, ended(pc))
		assert.Equal(t, 2, c.Servers()[0].Instances)

		assert.Equal(t, "1", callIn(t, c, b, "counter"), "b starts afresh")
		assert.True(t, ended(pa), "a's process ended to make room for b's")
		assert.False(t, ended(pc))
		require.NoError(t, c.Close())
		assert.True(t, ended(pc))
		if n, ok := children(); ok {
			assert.Zero(t, n, "child processes left")
		}
	})

	t.Run("idle", func(t *testing.T) {
		leaktest.Check(t)
		c := newClient(t, Options{SandboxIdle: 200 * time.Millisecond}, sandboxedConfig(t))
		a := sessionContext(t, "a")
		pa := pidIn(t, c, a)
		waitFor(t, "the idle instance's process ended", func() bool { return ended(pa) })
		assert.Zero(t, c.Servers()[0].Instances)
		assert.Equal(t, "1", callIn(t, c, a, "counter"), "a starts afresh")
		require.NoError(t, c.Close())
		if n, ok := children(); ok {
			assert.Zero(t, n, "child processes left")
		}
	})
}

// 200 conversations calling at once, with a bound of 8, never hold more
// than 8 server processes: counted as the children of this process that
// run the test server (zombies included; on Linux the guards of their
// process groups are children too) by a sampler and after each call. Every
// process ends.
func TestIsolationBound(t *testing.T) {
	leaktest.Check(t)
	const bound, conversations, callsEach = 8, 200, 2
	if _, ok := children(); !ok {
		t.Skip("no /proc to count processes in")
	}
	c := newClient(t, Options{MaxSandboxes: bound}, sandboxedConfig(t))
	ctxs := make([]context.Context, conversations)
	for i := range ctxs {
		ctxs[i] = sessionContext(t, fmt.Sprint("conversation-", i))
	}
	// Every call, and so the whole test, ends by this deadline.
	deadline := time.Now().Add(3 * time.Minute)

	var mu sync.Mutex
	most, samples := 0, 0
	pids := map[int]bool{}
	sample := func() {
		n := serverChildren()
		mu.Lock()
		most = max(most, n)
		samples++
		mu.Unlock()
	}
	sampling, stopSampling := context.WithDeadline(context.Background(), deadline)
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for sampling.Err() == nil {
			sample()
			time.Sleep(2 * time.Millisecond)
		}
	})

	pid := tool(t, c, "pid")
	errs := make(chan error, conversations*callsEach)
	var wg sync.WaitGroup
	for i := range conversations {
		wg.Go(func() {
			for range callsEach {
				callCtx, cancel := context.WithDeadline(ctxs[i], deadline)
				out, err := pid.Execute(callCtx, []byte(`{}`), &buffer{})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("conversation %d: %w", i, err)
					return
				}
				p, err := strconv.Atoi(out)
				if err != nil {
					errs <- fmt.Errorf("conversation %d: pid %q", i, out)
					return
				}
				mu.Lock()
				pids[p] = true
				mu.Unlock()
				sample()
			}
		})
	}
	wg.Wait()
	stopSampling()
	sampler.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d processes started, at most %d at once in %d samples", len(pids), most, samples)
	assert.LessOrEqual(t, most, bound, "server processes at once")
	assert.GreaterOrEqual(t, len(pids), conversations, "a process for each conversation at least")
	assert.LessOrEqual(t, c.Servers()[0].Instances, bound)

	require.NoError(t, c.Close())
	for p := range pids {
		assert.True(t, ended(p), "process %d ended", p)
	}
	n, _ := children()
	assert.Zero(t, n, "child processes left")
}

// serverChildren counts the children of this process, zombies included,
// that run the stdio test server, from /proc.
func serverChildren() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); !ok || ppid != os.Getpid() {
			continue
		}
		if comm, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "stdioserver" {
			n++
		}
	}
	return n
}
