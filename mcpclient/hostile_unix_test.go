//go:build unix

package mcpclient

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// Stdio servers that misbehave, at start or in the middle of a call, in a
// whole agent run: the run ends on its own (within the server's timeouts)
// without an error, the model reads what went wrong as the tool's error,
// the history stays valid, the client's memory stays bounded, and no
// process is left.
//
// A misbehaviour at start is met by a per_conversation server, whose probe
// (New's start) is normal and whose conversation instance, started by the
// run's call, misbehaves (-first-normal).
func TestHostileServersInAgentRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		atCall bool   // a shared server, misbehaving in the call; else at the start of the conversation's instance
		tool   string // the tool the model calls, with {} or echo's text
		want   string // what the model reads
		// The start timeout is 1s and the call timeout 20s unless set.
		startTimeout, callTimeout time.Duration
		// memory: the server sends more than a message may hold, and the
		// client's heap must stay bounded
		memory bool
	}{
		{name: "garbage between messages", flags: []string{"-mode=garbage-after"}, atCall: true, tool: "echo", want: "hostile"},
		{name: "garbage at start", flags: []string{"-mode=garbage"}, tool: "echo", want: "error: " + `mcp server "hostile": no answer within the start timeout of 1s`},
		{name: "huge answer", flags: []string{"-mode=huge"}, atCall: true, tool: "echo", want: "the server sent a message larger than 32 MiB", memory: true},
		{name: "flood mid-call", atCall: true, tool: "flood", want: "the server sent a message larger than 32 MiB", memory: true},
		// The bound, not the start timeout, must end it, even on a busy machine.
		{name: "flood at start", flags: []string{"-mode=flood"}, tool: "echo", want: "the server sent a message larger than 32 MiB", memory: true, startTimeout: 15 * time.Second},
		{name: "silence at start", flags: []string{"-mode=silence", "-stubborn"}, tool: "echo", want: "no answer within the start timeout of 1s"},
		{
			name: "silence at start beyond the call timeout", flags: []string{"-mode=silence", "-stubborn"}, tool: "echo",
			startTimeout: 10 * time.Second, callTimeout: time.Second,
			want: `error: mcp server "hostile": waiting for the conversation's server to start: no result within the call timeout of 1s`,
		},
		{name: "silence mid-call", atCall: true, tool: "freeze", callTimeout: time.Second, want: "no result within the call timeout of 1s"},
		{name: "exit at start", flags: []string{"-mode=exit"}, tool: "echo", want: "the server exited (exit status 3): stdioserver: exiting at start (-mode=exit)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			flags := tc.flags
			if !tc.atCall {
				flags = append(flags, "-first-normal="+filepath.Join(t.TempDir(), "probed"))
			}
			cfg := stdioConfig(t, "hostile", flags...)
			cfg.StartTimeout = cmpOr(tc.startTimeout, time.Second)
			cfg.CallTimeout = cmpOr(tc.callTimeout, 20*time.Second)
			if !tc.atCall {
				cfg.Isolation = IsolationPerConversation
			}
			c := newClient(t, Options{}, cfg)
			model := agenttest.NewServer()
			t.Cleanup(model.Close)
			args := `{}`
			if tc.tool == "echo" {
				args = `{"text":"hostile"}`
			}
			model.Enqueue(
				agenttest.Reply().Call(0, "call_1", tc.tool, args).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"),
			)
			a := newAgent(t, c, model, &askingApprover{})

			heap := watchHeap()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			turn := a.NewTurn(agent.Input{SessionID: "s", Message: "go"})
			var result *agent.ToolCall
			for ch, err := range turn.Run(ctx) {
				require.NoError(t, err, "the run fails")
				if ch.Kind == agent.KindToolCall && ch.Tool.State == agent.StateResult {
					result = ch.Tool
				}
			}
			require.NoError(t, ctx.Err(), "the run ended on its own, before the test's limit")
			most := heap.stop()

			require.NotNil(t, result, "the call has a result")
			assert.Contains(t, result.Result, tc.want)
			if tc.name != "garbage between messages" {
				assert.True(t, strings.HasPrefix(result.Result, "error: "), "an error for the model: %q", result.Result)
			}
			validTurn(t, turn.Messages())
			reqs := model.Requests()
			require.Len(t, reqs, 2)
			if msg := reqs[1].LastMessage(); msg.Role != "tool" || msg.Content != result.Result {
				t.Errorf("the model read %+v, want the call's result", msg)
			}
			if tc.memory {
				// A message is cut at 32 MiB; the transport reads the
				// line up to there and copies it once more, so a little
				// over 64 MiB is expected, and a message without the
				// bound would take all it is sent (64 MiB twice over, or
				// without end).
				grown := heap.settle(16 << 20)
				t.Logf("the heap held at most %d MiB more during the run, %d MiB more after it", most>>20, grown>>20)
				assert.Less(t, most, uint64(100<<20), "the heap during the run")
				assert.Less(t, grown, int64(16<<20), "the heap kept after the run")
			}
			if !tc.atCall {
				assert.Zero(t, c.Servers()[0].Instances, "an instance that failed to start is not kept")
				// Its process ends with the start, or soon after a call
				// that stopped waiting for it.
				waitFor(t, "the instance's process ended", func() bool {
					n, ok := children()
					return !ok || n == 0
				})
			}

			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Close did not return")
			}
			if n, ok := children(); ok {
				assert.Zero(t, n, "processes left after Close")
			}
		})
	}
}

// heapWatch samples the heap in use (live and not yet collected objects)
// while a test runs.
type heapWatch struct {
	before uint64
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	most   uint64
}

// watchHeap starts sampling, every 5 ms, after a collection.
func watchHeap() *heapWatch {
	h := &heapWatch{done: make(chan struct{})}
	h.before = heapNow(true)
	h.wg.Go(func() {
		for {
			n := heapNow(false)
			h.mu.Lock()
			h.most = max(h.most, n)
			h.mu.Unlock()
			select {
			case <-h.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	return h
}

// stop ends the sampling and returns the most the heap held above the
// start.
func (h *heapWatch) stop() (most uint64) {
	close(h.done)
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most - min(h.most, h.before)
}

// settle returns how much the heap grew since the start, after a
// collection, once that is below limit or after 5 seconds: a message being
// read when the run ended is let go when its reading ends.
func (h *heapWatch) settle(limit int64) (grown int64) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		grown = int64(heapNow(true)) - int64(h.before)
		if grown < limit || time.Now().After(deadline) {
			return grown
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func heapNow(collect bool) uint64 {
	if collect {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cmpOr returns d, or def when d is zero.
func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
