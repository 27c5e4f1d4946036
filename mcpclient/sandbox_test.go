package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// fakeStarter starts fakeInstances. It counts an instance as live from the
// moment its start begins until its close has returned, as a process would
// be, and remembers the most that were live at once. Set its fields before
// the registry uses it.
type fakeStarter struct {
	latency   time.Duration     // each start takes this long, or until its ctx ends
	gate      chan struct{}     // when set, starts also wait for it to close (or ctx)
	gateFrom  int               // only starts from this one on (1-based) wait for gate
	ignoreCtx bool              // starts do not stop when their ctx ends
	fail      func(n int) error // when set, start n (1-based) fails with its error
	closeGate chan struct{}     // when set, closes wait for it to close
	began     chan int          // when set, receives n as start n begins (keep it roomy)

	mu      sync.Mutex
	calls   int // start calls
	live    int
	maxLive int
	insts   []*fakeInstance
}

type fakeInstance struct {
	f      *fakeStarter
	n      int          // the start that made it
	closes atomic.Int32 // calls of close
}

func (f *fakeStarter) start(ctx context.Context) (instance, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.live++
	f.maxLive = max(f.maxLive, f.live)
	f.mu.Unlock()
	if f.began != nil {
		f.began <- n
	}

	err := f.wait(ctx, n)
	if err == nil && f.fail != nil {
		err = f.fail(n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.live--
		return nil, err
	}
	inst := &fakeInstance{f: f, n: n}
	f.insts = append(f.insts, inst)
	return inst, nil
}

func (f *fakeStarter) wait(ctx context.Context, n int) error {
	done := ctx.Done()
	if f.ignoreCtx {
		done = nil
	}
	if f.latency > 0 {
		select {
		case <-time.After(f.latency):
		case <-done:
			return ctx.Err()
		}
	}
	if f.gate != nil && n >= f.gateFrom {
		select {
		case <-f.gate:
		case <-done:
			return ctx.Err()
		}
	}
	return nil
}

func (i *fakeInstance) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	return fmt.Sprint(i.n), nil
}

func (i *fakeInstance) close() error {
	if i.closes.Add(1) != 1 {
		return nil
	}
	if i.f.closeGate != nil {
		<-i.f.closeGate
	}
	i.f.mu.Lock()
	i.f.live--
	i.f.mu.Unlock()
	return nil
}

func (i *fakeInstance) pid() int { return 0 }

func (f *fakeStarter) counts() (calls, live, maxLive int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.live, f.maxLive
}

// closed returns the numbers of the instances closed so far, and fails t
// if one was closed more than once.
func (f *fakeStarter) closed(t testing.TB) []int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, i := range f.insts {
		switch c := i.closes.Load(); {
		case c == 1:
			out = append(out, i.n)
		case c > 1:
			t.Errorf("instance %d closed %d times", i.n, c)
		}
	}
	return out
}

// requireAllClosedOnce fails t unless every instance started was closed
// exactly once and none is live.
func (f *fakeStarter) requireAllClosedOnce(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	n, live := len(f.insts), f.live
	f.mu.Unlock()
	require.Len(t, f.closed(t), n, "every instance is closed")
	require.Zero(t, live, "no instance is live")
}

// newTestSandboxes returns a registry over f that is closed when t ends.
func newTestSandboxes(t testing.TB, f *fakeStarter, max int, idle time.Duration) *sandboxes {
	s := newSandboxes(f.start, max, idle)
	t.Cleanup(func() { _ = s.close() })
	return s
}

// use gets the conversation's instance, calls it and releases it, returning
// the number of the instance that answered.
func use(t testing.TB, s *sandboxes, conv string) string {
	t.Helper()
	inst, release, err := s.get(t.Context(), conv)
	require.NoError(t, err)
	defer release()
	out, err := inst.call(t.Context(), "tool", nil, nil)
	require.NoError(t, err)
	return out
}

type getResult struct {
	inst    instance
	release func()
	err     error
}

// goGet runs get in a goroutine and delivers its result on the channel.
func goGet(ctx context.Context, s *sandboxes, conv string) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		inst, release, err := s.get(ctx, conv)
		ch <- getResult{inst, release, err}
	}()
	return ch
}

func TestSandboxStartsLazilyAndCaches(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{}
	s := newTestSandboxes(t, f, 4, 0)

	calls, _, _ := f.counts()
	require.Zero(t, calls, "nothing starts before the first call")

	assert.Equal(t, "1", use(t, s, "a"))
	assert.Equal(t, "1", use(t, s, "a"), "a's second call reuses its instance")
	assert.Equal(t, "2", use(t, s, "b"), "b gets its own instance")
	assert.Equal(t, "1", use(t, s, "a"))

	_, _, err := s.get(t.Context(), "")
	require.ErrorIs(t, err, errNoConversation, "calls without a conversation share no sandbox")

	calls, live, _ := f.counts()
	assert.Equal(t, 2, calls)
	assert.Equal(t, 2, live)
	st := s.stats()
	assert.Equal(t, 2, st.Live)
	assert.Zero(t, st.Busy)
	assert.Equal(t, uint64(2), st.Starts)
	assert.Empty(t, f.closed(t))

	require.NoError(t, s.close())
	f.requireAllClosedOnce(t)
}

// TestSandboxOneStartForConcurrentGets: the first calls of a conversation
// arriving together share one start, and all get the same instance.
func TestSandboxOneStartForConcurrentGets(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10)}
	s := newTestSandboxes(t, f, 4, 0)

	const n = 20
	results := make([]<-chan getResult, n)
	for i := range results {
		results[i] = goGet(t.Context(), s, "a")
	}
	<-f.began
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.byConv["a"]
		return e != nil && e.waiters == n
	}, 5*time.Second, time.Millisecond, "all gets wait for the start")
	close(f.gate)

	got := make([]getResult, n)
	for i, ch := range results {
		got[i] = <-ch
		require.NoError(t, got[i].err)
		assert.Same(t, got[0].inst, got[i].inst)
	}
	s.mu.Lock()
	inflight := s.byConv["a"].inflight
	s.mu.Unlock()
	assert.Equal(t, n, inflight, "every get holds a call")
	for _, r := range got {
		r.release()
	}
	calls, _, _ := f.counts()
	assert.Equal(t, 1, calls, "one start")
	st := s.stats()
	assert.Equal(t, 1, st.Live)
	assert.Zero(t, st.Busy, "every call released")
}

// TestSandboxWaiterHonoursContext: a get waiting for a start returns when
// its own context ends, while the start goes on for the others.
func TestSandboxWaiterHonoursContext(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10)}
	s := newTestSandboxes(t, f, 4, 0)

	patient := goGet(t.Context(), s, "a")
	<-f.began
	ctx, cancel := context.WithCancel(t.Context())
	impatient := goGet(ctx, s, "a")
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.byConv["a"].waiters == 2
	}, 5*time.Second, time.Millisecond)
	cancel()
	r := <-impatient
	require.ErrorIs(t, r.err, context.Canceled)
	assert.Nil(t, r.release)

	close(f.gate)
	r = <-patient
	require.NoError(t, r.err)
	r.release()
	calls, _, _ := f.counts()
	assert.Equal(t, 1, calls, "the start went on for the patient get")
	assert.Equal(t, 1, s.stats().Live)
}

// TestSandboxAbandonedStart: when every get waiting for a start has left,
// the start is cancelled; it is not cached and the next get starts again.
// A start that does not stop and still returns an instance is cached (and
// closed with the rest): it is not leaked.
func TestSandboxAbandonedStart(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10)}
		s := newTestSandboxes(t, f, 4, 0)

		ctx, cancel := context.WithCancel(t.Context())
		r := goGet(ctx, s, "a")
		<-f.began
		cancel()
		require.ErrorIs(t, (<-r).err, context.Canceled)
		require.Eventually(t, func() bool { return s.stats().Starting == 0 }, 5*time.Second, time.Millisecond,
			"the start ends when nobody waits for it")
		_, live, _ := f.counts()
		assert.Zero(t, live)
		assert.Zero(t, s.stats().StartFailures, "a start every caller left is not a failure")

		close(f.gate)
		assert.Equal(t, "2", use(t, s, "a"), "the next call starts again")
	})
	t.Run("finishes anyway", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10), ignoreCtx: true}
		s := newTestSandboxes(t, f, 4, 0)

		ctx, cancel := context.WithCancel(t.Context())
		r := goGet(ctx, s, "a")
		<-f.began
		cancel()
		require.ErrorIs(t, (<-r).err, context.Canceled)
		close(f.gate)
		require.Eventually(t, func() bool { return s.stats().Live == 1 }, 5*time.Second, time.Millisecond,
			"the instance is cached")
		assert.Equal(t, "1", use(t, s, "a"), "and used by the next call")
		require.NoError(t, s.close())
		f.requireAllClosedOnce(t)
	})
	t.Run("joined after it was abandoned", func(t *testing.T) {
		leaktest.Check(t)
		// The start is cancelled but slow to stop; a get arriving
		// meanwhile must not inherit the cancellation: it starts again.
		stopping := make(chan struct{})
		f := &fakeStarter{began: make(chan int, 10)}
		f.gate = make(chan struct{})
		s := newSandboxes(func(ctx context.Context) (instance, error) {
			inst, err := f.start(ctx)
			if errors.Is(err, context.Canceled) {
				<-stopping
			}
			return inst, err
		}, 4, 0)
		t.Cleanup(func() { _ = s.close() })

		ctx, cancel := context.WithCancel(t.Context())
		r := goGet(ctx, s, "a")
		<-f.began
		cancel()
		require.ErrorIs(t, (<-r).err, context.Canceled)
		late := goGet(t.Context(), s, "a")
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			e := s.byConv["a"]
			return e != nil && e.abandoned && e.waiters == 1
		}, 5*time.Second, time.Millisecond)
		close(f.gate)
		close(stopping)
		got := <-late
		require.NoError(t, got.err)
		got.release()
		calls, _, _ := f.counts()
		assert.Equal(t, 2, calls)
	})
}

// TestSandboxFailedStartNotCached: every get waiting for a failed start
// gets its error; the next get starts again.
func TestSandboxFailedStartNotCached(t *testing.T) {
	leaktest.Check(t)
	boom := errors.New("boom")
	f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10),
		fail: func(n int) error {
			if n == 1 {
				return boom
			}
			return nil
		}}
	s := newTestSandboxes(t, f, 1, 0)

	a1, a2 := goGet(t.Context(), s, "a"), goGet(t.Context(), s, "a")
	<-f.began
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.byConv["a"].waiters == 2
	}, 5*time.Second, time.Millisecond)
	close(f.gate)
	require.ErrorIs(t, (<-a1).err, boom)
	require.ErrorIs(t, (<-a2).err, boom)
	st := s.stats()
	assert.Equal(t, uint64(1), st.StartFailures)
	assert.Zero(t, st.Live+st.Starting)

	assert.Equal(t, "2", use(t, s, "a"), "the next call starts again, in the freed slot")
}

// TestSandboxLRUEviction: beyond the bound, the least recently used idle
// instance ends, exactly once, before the new one starts.
func TestSandboxLRUEviction(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{}
	s := newTestSandboxes(t, f, 2, 0)

	use(t, s, "a") // 1
	use(t, s, "b") // 2
	use(t, s, "a") // b is now the least recently used
	use(t, s, "c") // 3, evicts b
	assert.Equal(t, []int{2}, f.closed(t))
	_, live, maxLive := f.counts()
	assert.Equal(t, 2, live)
	assert.Equal(t, 2, maxLive, "b ended before c started")

	assert.Equal(t, "1", use(t, s, "a"), "a kept its instance")
	assert.Equal(t, "4", use(t, s, "b"), "b starts again, evicting c")
	assert.Equal(t, []int{2, 3}, f.closed(t))
	assert.Equal(t, uint64(2), s.stats().Evictions)
	assert.Equal(t, uint64(4), s.stats().Starts)
}

// TestSandboxBusyNotEvicted: an instance with a call in flight is not
// evicted; a new conversation waits for a slot (honouring its context)
// instead of going over the bound.
func TestSandboxBusyNotEvicted(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{}
	s := newTestSandboxes(t, f, 1, 0)

	a, releaseA, err := s.get(t.Context(), "a")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = s.get(ctx, "b")
	require.ErrorIs(t, err, context.DeadlineExceeded, "b waits for a slot while a is busy")
	assert.Empty(t, f.closed(t), "a is not evicted under its call")
	out, err := a.call(t.Context(), "tool", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "1", out)

	b := goGet(t.Context(), s, "b")
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiters) == 1
	}, 5*time.Second, time.Millisecond)
	releaseA()
	r := <-b
	require.NoError(t, r.err)
	r.release()
	r.release() // a second release does nothing
	assert.Equal(t, []int{1}, f.closed(t), "a was evicted once its call ended")
	_, _, maxLive := f.counts()
	assert.Equal(t, 1, maxLive)
	assert.Zero(t, s.stats().Busy)
}

// TestSandboxReleaseTwice: a second release of one call does not end
// another call's hold on the instance.
func TestSandboxReleaseTwice(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{}
	s := newTestSandboxes(t, f, 1, 0)

	_, release1, err := s.get(t.Context(), "a")
	require.NoError(t, err)
	_, release2, err := s.get(t.Context(), "a")
	require.NoError(t, err)
	release1()
	release1()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = s.get(ctx, "b")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a still has a call in flight")
	assert.Empty(t, f.closed(t))
	assert.Equal(t, 1, s.stats().Busy)
	release2()
	assert.Equal(t, "2", use(t, s, "b"))
}

// TestSandboxWaitersFirstComeFirstServed: starts waiting for a slot get
// one in the order they asked, even when a later conversation keeps calling.
func TestSandboxWaitersFirstComeFirstServed(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStarter{}
		s := newSandboxes(f.start, 1, 0)
		defer s.close()

		_, releaseA, err := s.get(t.Context(), "a")
		require.NoError(t, err)
		b := goGet(t.Context(), s, "b")
		synctest.Wait()
		c := goGet(t.Context(), s, "c")
		synctest.Wait()

		releaseA()
		rb := <-b
		require.NoError(t, rb.err)
		assert.Equal(t, "2", mustCall(t, rb.inst), "b asked first")
		synctest.Wait()
		select {
		case <-c:
			t.Fatal("c got an instance over the bound")
		default:
		}
		// a's conversation comes back: it queues behind c.
		a := goGet(t.Context(), s, "a")
		synctest.Wait()
		rb.release()
		rc := <-c
		require.NoError(t, rc.err)
		assert.Equal(t, "3", mustCall(t, rc.inst))
		rc.release()
		ra := <-a
		require.NoError(t, ra.err)
		assert.Equal(t, "4", mustCall(t, ra.inst))
		ra.release()
		assert.Equal(t, []int{1, 2, 3}, f.closed(t))
	})
}

func mustCall(t testing.TB, inst instance) string {
	t.Helper()
	out, err := inst.call(t.Context(), "tool", nil, nil)
	require.NoError(t, err)
	return out
}

// TestSandboxBound: 200 conversations calling at once, three times each,
// with a bound of 8: never more than 8 instances live (counted from the
// start's beginning to the close's end), every call served, every instance
// closed exactly once.
func TestSandboxBound(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{latency: time.Millisecond}
	const bound, conversations, callsEach = 8, 200, 3
	s := newTestSandboxes(t, f, bound, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var maxBusy atomic.Int32
	var busy atomic.Int32
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
				b := busy.Add(1)
				for m := maxBusy.Load(); b > m && !maxBusy.CompareAndSwap(m, b); m = maxBusy.Load() {
				}
				_, err = inst.call(ctx, "tool", nil, nil)
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				busy.Add(-1)
				release()
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	calls, _, maxLive := f.counts()
	assert.LessOrEqual(t, maxLive, bound, "live instances never exceed the bound")
	assert.LessOrEqual(t, int(maxBusy.Load()), bound)
	assert.GreaterOrEqual(t, calls, conversations, "every conversation started")
	st := s.stats()
	assert.LessOrEqual(t, st.Live, bound)
	assert.Equal(t, uint64(calls), st.Starts)
	assert.Equal(t, uint64(calls-st.Live), st.Evictions)
	require.NoError(t, s.close())
	f.requireAllClosedOnce(t)
}

// TestSandboxIdleEviction: an instance ends after the idle time without a
// call, never while a call is in flight, and the next call starts it again.
func TestSandboxIdleEviction(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStarter{}
		s := newSandboxes(f.start, 8, time.Minute)
		defer s.close()

		use(t, s, "a")
		time.Sleep(30 * time.Second)
		use(t, s, "b")
		time.Sleep(29 * time.Second)
		use(t, s, "b") // b's clock starts again
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, f.closed(t), "a is idle for just under a minute")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, []int{1}, f.closed(t), "a is idle for a minute")
		assert.Equal(t, uint64(1), s.stats().IdleEvictions)

		// b with a call in flight for five minutes is not evicted.
		_, release, err := s.get(t.Context(), "b")
		require.NoError(t, err)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		assert.Equal(t, []int{1}, f.closed(t), "b is busy")
		release()
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, []int{1, 2}, f.closed(t), "b idle for a minute after its call")
		st := s.stats()
		assert.Zero(t, st.Live)
		assert.Equal(t, uint64(2), st.IdleEvictions)

		assert.Equal(t, "3", use(t, s, "a"), "a starts again")
	})
}

// TestSandboxIdleTimerOneForAll: many idle conversations share one timer,
// evicted in order as their times come.
func TestSandboxIdleTimerOneForAll(t *testing.T) {
	leaktest.Check(t)
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStarter{}
		s := newSandboxes(f.start, 0, 10*time.Second)
		defer s.close()

		for i := range 5 {
			use(t, s, fmt.Sprint(i))
			time.Sleep(time.Second)
		}
		// Now: 5 s after the first call. The first ends at 10 s, the last at 14 s.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, []int{1}, f.closed(t))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, []int{1, 2, 3}, f.closed(t))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, []int{1, 2, 3, 4, 5}, f.closed(t))
		s.mu.Lock()
		armed := !s.timerAt.IsZero()
		s.mu.Unlock()
		assert.False(t, armed, "nothing left to watch")
	})
}

// TestSandboxCloseConversation: the instance ends, exactly once, before
// closeConversation returns; the next call starts again; a start in flight
// is cancelled and its waiters told.
func TestSandboxCloseConversation(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{}
		s := newTestSandboxes(t, f, 2, 0)
		use(t, s, "a")
		use(t, s, "b")
		require.NoError(t, s.closeConversation("a"))
		assert.Equal(t, []int{1}, f.closed(t))
		require.NoError(t, s.closeConversation("a"), "again: nothing to do")
		require.NoError(t, s.closeConversation("nobody"))
		assert.Equal(t, "3", use(t, s, "a"))
		assert.Equal(t, "2", use(t, s, "b"))
		assert.Zero(t, s.stats().Evictions, "a freed its slot")
	})
	t.Run("busy", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{}
		s := newTestSandboxes(t, f, 2, 0)
		_, release, err := s.get(t.Context(), "a")
		require.NoError(t, err)
		require.NoError(t, s.closeConversation("a"))
		assert.Equal(t, []int{1}, f.closed(t), "closed under its call")
		release()
		assert.Equal(t, "2", use(t, s, "a"))
		assert.Equal(t, 1, s.stats().Live)
	})
	t.Run("starting", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{gate: make(chan struct{}), began: make(chan int, 10)}
		s := newTestSandboxes(t, f, 2, 0)
		r := goGet(t.Context(), s, "a")
		<-f.began
		require.NoError(t, s.closeConversation("a"))
		require.ErrorIs(t, (<-r).err, errConversationClosed)
		_, live, _ := f.counts()
		assert.Zero(t, live)
		close(f.gate)
		assert.Equal(t, "2", use(t, s, "a"))
	})
	t.Run("starting, start ignores ctx", func(t *testing.T) {
		leaktest.Check(t)
		f := &fakeStarter{latency: 20 * time.Millisecond, ignoreCtx: true, began: make(chan int, 10)}
		s := newTestSandboxes(t, f, 2, 0)
		r := goGet(t.Context(), s, "a")
		<-f.began
		require.NoError(t, s.closeConversation("a"))
		assert.Equal(t, []int{1}, f.closed(t), "the instance that came out is closed before closeConversation returns")
		require.ErrorIs(t, (<-r).err, errConversationClosed)
	})
}

// TestSandboxDiscard: discard ends the conversation's instance only while
// it is the one given; an instance replaced meanwhile leaves the newer one
// running, and a starting conversation is not touched.
func TestSandboxDiscard(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{gate: make(chan struct{}), gateFrom: 3, began: make(chan int, 10)}
	s := newTestSandboxes(t, f, 4, 0)
	old, release, err := s.get(t.Context(), "a")
	require.NoError(t, err)
	release()
	require.NoError(t, s.discard("a", old))
	assert.Equal(t, []int{1}, f.closed(t), "the given instance ends")
	require.NoError(t, s.discard("a", old), "again: nothing to do")

	assert.Equal(t, "2", use(t, s, "a"))
	require.NoError(t, s.discard("a", old), "a stale instance")
	assert.Equal(t, []int{1}, f.closed(t), "the newer instance runs on")
	assert.Equal(t, "2", use(t, s, "a"))

	r := goGet(t.Context(), s, "b") // start 3 waits at the gate
	<-f.began
	<-f.began
	<-f.began
	require.NoError(t, s.discard("b", old))
	require.NoError(t, s.discard("nobody", old))
	close(f.gate)
	got := <-r
	require.NoError(t, got.err, "the start went on")
	got.release()
	assert.Equal(t, []int{1}, f.closed(t))
	assert.Equal(t, 2, s.stats().Live)
}

// TestSandboxClose: close ends every instance exactly once (busy or not)
// and cancels the starts in flight and those waiting for a slot before it
// returns; later gets fail with a clear error.
func TestSandboxClose(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{gate: make(chan struct{}), gateFrom: 3, began: make(chan int, 10)}
	s := newSandboxes(f.start, 2, time.Minute)

	use(t, s, "a")
	_, releaseB, err := s.get(t.Context(), "b")
	require.NoError(t, err)
	starting := goGet(t.Context(), s, "c") // evicts a, then its start hangs
	<-f.began
	<-f.began
	<-f.began
	waiting := goGet(t.Context(), s, "d") // waits for a slot
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiters) == 1
	}, 5*time.Second, time.Millisecond)

	closed := make(chan error, 1)
	go func() { closed <- s.close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return: a start in flight was not cancelled")
	}
	f.requireAllClosedOnce(t)
	calls, _, _ := f.counts()
	assert.Equal(t, 3, calls, "d never started")
	require.ErrorIs(t, (<-starting).err, errSandboxesClosed)
	require.ErrorIs(t, (<-waiting).err, errSandboxesClosed)
	releaseB() // after close: harmless

	_, _, err = s.get(t.Context(), "a")
	require.ErrorIs(t, err, errSandboxesClosed)
	assert.EqualError(t, err, "the per-conversation servers are shut down")
	require.NoError(t, s.closeConversation("a"))
	require.NoError(t, s.close(), "close again")
	assert.Zero(t, s.stats().Live)
}

// TestSandboxCloseOutsideLock: slow closes (a stdio server taking its
// time) block neither a get for a running conversation nor the stats, and
// only the start that needs the slot waits for them.
func TestSandboxCloseOutsideLock(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{closeGate: make(chan struct{})}
	s := newTestSandboxes(t, f, 3, 0)
	var once sync.Once
	unblock := func() { once.Do(func() { close(f.closeGate) }) }
	t.Cleanup(unblock)

	use(t, s, "a")
	use(t, s, "b")
	use(t, s, "x")
	closingNow := func(n int) func() bool {
		return func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.closing == n
		}
	}
	d := goGet(t.Context(), s, "d") // evicts a, whose close hangs
	require.Eventually(t, closingNow(1), 5*time.Second, time.Millisecond)
	closing := make(chan error, 1)
	go func() { closing <- s.closeConversation("b") }() // b's close hangs too
	require.Eventually(t, closingNow(2), 5*time.Second, time.Millisecond)

	assert.Equal(t, "3", use(t, s, "x"), "a running conversation is served meanwhile")
	assert.Equal(t, 1, s.stats().Live)
	select {
	case <-d:
		t.Fatal("d started before a slot was free")
	case <-closing:
		t.Fatal("closeConversation returned before the close did")
	default:
	}

	unblock()
	require.NoError(t, <-closing)
	r := <-d
	require.NoError(t, r.err)
	r.release()
	assert.Equal(t, []int{1, 2}, f.closed(t))
	_, _, maxLive := f.counts()
	assert.Equal(t, 3, maxLive)
}

// TestSandboxStress mixes everything at once (calls of many conversations,
// impatient callers, failing and slow starts, idle evictions and
// closeConversation) and checks the invariants throughout: never more live
// instances than the bound, a waiting start only when the bound is reached,
// and in the end every instance closed exactly once.
func TestSandboxStress(t *testing.T) {
	leaktest.Check(t)
	f := &fakeStarter{fail: func(n int) error {
		if n%10 == 0 {
			return errors.New("start failed")
		}
		return nil
	}}
	const bound = 4
	s := newSandboxes(func(ctx context.Context) (instance, error) {
		select {
		case <-time.After(time.Duration(rand.IntN(300)) * time.Microsecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return f.start(ctx)
	}, bound, time.Millisecond)
	deadline, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// checkInvariants runs in a worker too: assert, not require.
	checkInvariants := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		assert.LessOrEqual(t, s.used, bound)
		assert.GreaterOrEqual(t, s.closing, 0)
		if len(s.waiters) > 0 {
			assert.Equal(t, bound, s.used, "a start waits only when the bound is reached")
		}
		for e := s.lru.next; e != &s.lru; e = e.next {
			assert.Same(t, e, s.byConv[e.conv], "the ring holds running entries only")
			assert.GreaterOrEqual(t, e.inflight, 0)
		}
	}

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 300 {
				if deadline.Err() != nil {
					return
				}
				conv := fmt.Sprint("conv-", rand.IntN(12))
				switch i % 7 {
				case 0:
					_ = s.closeConversation(conv)
				case 1:
					ctx, cancel := context.WithTimeout(deadline, time.Duration(rand.IntN(200))*time.Microsecond)
					if _, release, err := s.get(ctx, conv); err == nil {
						release()
					}
					cancel()
				default:
					inst, release, err := s.get(deadline, conv)
					if err != nil {
						continue
					}
					_, _ = inst.call(deadline, "tool", nil, nil)
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
					release()
				}
				if w == 0 && i%10 == 0 {
					checkInvariants()
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, deadline.Err(), "the stress loop ran out of time")
	checkInvariants()
	_, _, maxLive := f.counts()
	assert.LessOrEqual(t, maxLive, bound)
	st := s.stats()
	t.Logf("%+v", st)
	require.NoError(t, s.close())
	f.requireAllClosedOnce(t)
}
