//go:build unix

package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// procStarter starts procInstances: a `sleep` child in a process group of
// its own, standing in for a stdio server. Its close kills the group and
// waits for the child, as the real stdio instance does.
type procStarter struct {
	t       testing.TB
	path    string
	onStart func(pid int) // when set, called right after each process starts
	live    atomic.Int32  // processes started and not yet waited for
	mu      sync.Mutex
	started []*procInstance
}

type procInstance struct {
	p      *procStarter
	cmd    *exec.Cmd
	closes atomic.Int32
	once   sync.Once
	err    error
}

func newProcStarter(t testing.TB) *procStarter {
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command:", err)
	}
	return &procStarter{t: t, path: path}
}

func (p *procStarter) start(ctx context.Context) (instance, error) {
	// Not exec.CommandContext(ctx): the start's context ends with the start,
	// and the process must outlive it.
	cmd := exec.Command(p.path, "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.live.Add(1)
	if err := cmd.Start(); err != nil {
		p.live.Add(-1)
		return nil, err
	}
	inst := &procInstance{p: p, cmd: cmd}
	p.mu.Lock()
	p.started = append(p.started, inst)
	p.mu.Unlock()
	if p.onStart != nil {
		p.onStart(cmd.Process.Pid)
	}
	return inst, nil
}

func (i *procInstance) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	return strconv.Itoa(i.pid()), nil
}

func (i *procInstance) close() error {
	i.closes.Add(1)
	i.once.Do(func() {
		_ = syscall.Kill(-i.cmd.Process.Pid, syscall.SIGKILL)
		err := i.cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			i.err = fmt.Errorf("sleep %d ended with %v, not killed", i.pid(), err)
		}
		i.p.live.Add(-1)
	})
	return i.err
}

func (i *procInstance) pid() int { return i.cmd.Process.Pid }

// requireAllGone fails t unless every process started is gone (neither
// running nor a zombie) and was closed exactly once.
func (p *procStarter) requireAllGone(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range p.started {
		assert.Equal(t, int32(1), i.closes.Load(), "closes of %d", i.pid())
		assert.True(t, gone(i.pid()), "process %d is gone", i.pid())
	}
	assert.Zero(t, p.live.Load(), "processes not waited for")
}

// gone reports whether our child pid has ended and been waited for: signal 0
// fails (a zombie would still take it), or the pid now belongs to a process
// that is not our child (pids are reused).
func gone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	ppid, ok := parentOf(pid)
	return ok && ppid != os.Getpid()
}

// parentOf reads pid's parent from /proc; ok is false where there is no
// /proc or no such process.
func parentOf(pid int) (ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, err == nil
}

// children counts the processes whose parent is this test process, zombies
// included, from /proc; ok is false where there is no /proc.
func children() (n int, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return 0, false
	}
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok && ppid == me {
			n++
		}
	}
	return n, true
}

// TestSandboxProcessesEnd: eviction by the bound, idle eviction,
// closeConversation and close each leave no process behind: the pid is gone
// and was waited for.
func TestSandboxProcessesEnd(t *testing.T) {
	pidOf := func(t *testing.T, s *sandboxes, conv string) int {
		t.Helper()
		inst, release, err := s.get(t.Context(), conv)
		require.NoError(t, err)
		defer release()
		require.False(t, gone(inst.pid()), "running")
		return inst.pid()
	}
	t.Run("eviction", func(t *testing.T) {
		leaktest.Check(t)
		p := newProcStarter(t)
		s := newSandboxes(p.start, 1, 0)
		defer s.close()
		a := pidOf(t, s, "a")
		b := pidOf(t, s, "b")
		assert.True(t, gone(a), "a's process ended before b's started")
		assert.False(t, gone(b))
		require.NoError(t, s.close())
		p.requireAllGone(t)
	})
	t.Run("idle", func(t *testing.T) {
		leaktest.Check(t)
		p := newProcStarter(t)
		s := newSandboxes(p.start, 4, 50*time.Millisecond)
		defer s.close()
		a := pidOf(t, s, "a")
		require.Eventually(t, func() bool { return gone(a) }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, uint64(1), s.stats().IdleEvictions)
		require.NoError(t, s.close())
		p.requireAllGone(t)
	})
	t.Run("closeConversation", func(t *testing.T) {
		leaktest.Check(t)
		p := newProcStarter(t)
		s := newSandboxes(p.start, 4, 0)
		defer s.close()
		a := pidOf(t, s, "a")
		b := pidOf(t, s, "b")
		require.NoError(t, s.closeConversation("a"))
		assert.True(t, gone(a), "a's process ended before closeConversation returned")
		assert.False(t, gone(b), "b's is untouched")
		require.NoError(t, s.close())
		p.requireAllGone(t)
	})
	t.Run("close", func(t *testing.T) {
		leaktest.Check(t)
		p := newProcStarter(t)
		s := newSandboxes(p.start, 4, time.Minute)
		for _, c := range []string{"a", "b", "c"} {
			pidOf(t, s, c)
		}
		_, release, err := s.get(t.Context(), "d") // busy at close
		require.NoError(t, err)
		require.NoError(t, s.close())
		release()
		p.requireAllGone(t)
		if n, ok := children(); ok {
			assert.Zero(t, n, "child processes left")
		}
	})
}

// TestSandboxProcessesBound: 200 conversations calling at once with a bound
// of 8 never hold more than 8 processes, counted both by the starter and,
// where /proc exists, as children of this process right after each start.
func TestSandboxProcessesBound(t *testing.T) {
	leaktest.Check(t)
	p := newProcStarter(t)
	const bound, conversations, callsEach = 8, 200, 2
	var mu sync.Mutex
	maxLive, maxChildren := 0, 0
	p.onStart = func(int) {
		n, _ := children()
		mu.Lock()
		maxLive = max(maxLive, int(p.live.Load()))
		maxChildren = max(maxChildren, n)
		mu.Unlock()
	}
	s := newSandboxes(p.start, bound, 0)
	defer s.close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, conversations*callsEach)
	for c := range conversations {
		wg.Go(func() {
			conv := fmt.Sprint("conv-", c)
			for range callsEach {
				inst, release, err := s.get(ctx, conv)
				if err != nil {
					errs <- err
					return
				}
				if gone(inst.pid()) {
					errs <- fmt.Errorf("%s: got an ended process %d", conv, inst.pid())
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assert.LessOrEqual(t, maxLive, bound, "processes held at once")
	assert.LessOrEqual(t, maxChildren, bound, "children of this process at once")
	st := s.stats()
	assert.GreaterOrEqual(t, st.Starts, uint64(conversations))
	t.Logf("starts %d, evictions %d, most processes at once %d (children seen %d)", st.Starts, st.Evictions, maxLive, maxChildren)

	require.NoError(t, s.close())
	p.requireAllGone(t)
	if n, ok := children(); ok {
		assert.Zero(t, n, "child processes left")
	}
}

// BenchmarkSandboxStartProcess: a conversation's first get when its
// instance is a process (here `sleep`, so the figure is the floor under a
// real stdio server's start), then closeConversation, which kills it and
// waits for it.
func BenchmarkSandboxStartProcess(b *testing.B) {
	p := newProcStarter(b)
	s := newSandboxes(p.start, 8, 0)
	defer s.close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		conv := fmt.Sprint("conversation-", i)
		i++
		_, release, err := s.get(ctx, conv)
		if err != nil {
			b.Fatal(err)
		}
		release()
		if err := s.closeConversation(conv); err != nil {
			b.Fatal(err)
		}
	}
}
