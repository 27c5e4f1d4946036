package waiting

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/suspend"
	"github.com/planround/planround/memory"
)

// idle reports whether no wait of c is in its heap and its timer is not
// armed (Stop finds it stopped or fired).
func idle(c *Core) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits) == 0 && !c.armed && (c.timer == nil || !c.timer.Stop())
}

// inHeap returns how many waits c's timer wakes.
func inHeap(c *Core) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// pendingAt stores a pending record of session s created at created, under
// key, for a Core to reopen: a wait whose deadline the test chooses.
func pendingAt(t *testing.T, st memory.ApprovalStore, key string, created time.Time) {
	t.Helper()
	a := rec("s1", key, key)
	a.ID, a.Kind, a.CreatedAt = NewID(), memory.KindApproval, created
	require.NoError(t, st.CreateApproval(t.Context(), a))
}

// ended is what a Wait returned, and when.
type ended struct {
	i   int
	a   memory.Approval
	err error
	at  time.Time
}

// waitAsync calls w.Wait(ctx) on a goroutine of its own and gives what it
// returned, and when.
func waitAsync(ctx context.Context, w *Wait) <-chan ended {
	out := make(chan ended, 1)
	go func() {
		a, err := w.Wait(ctx)
		out <- ended{a: a, err: err, at: time.Now()}
	}()
	return out
}

// TestWaitsTimeOutInDueOrder holds waits whose deadlines come in an order
// other than the one they were waited in: each times out once, at its
// deadline, in the order of the deadlines, and the Core keeps no wait in
// its heap and no armed timer afterwards.
func TestWaitsTimeOutInDueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		st := &memory.MemStore{}
		c := newCore(t, Config{Store: st, Timeout: 100 * time.Second})
		start := time.Now()
		offsets := rand.Perm(n) // wait i is due offsets[i]+1 seconds from start
		for i, off := range offsets {
			pendingAt(t, st, fmt.Sprint("k", i), start.Add(time.Duration(off+1)*time.Second-c.cfg.Timeout))
		}
		ctx := context.Background()
		var mu sync.Mutex
		var got []ended
		for i := range n {
			w, existing, err := c.Open(ctx, rec("s1", fmt.Sprint("k", i), fmt.Sprint("k", i)))
			require.NoError(t, err)
			require.True(t, existing)
			go func() {
				a, err := w.Wait(ctx)
				mu.Lock()
				got = append(got, ended{i, a, err, time.Now()})
				mu.Unlock()
			}()
		}
		synctest.Wait()
		assert.Equal(t, n, inHeap(c))
		time.Sleep(time.Duration(n+1) * time.Second)
		synctest.Wait()

		require.Len(t, got, n)
		for k, g := range got {
			due := start.Add(time.Duration(offsets[g.i]+1) * time.Second)
			assert.NoError(t, g.err)
			assert.Equal(t, timedOut, g.a.Decision, "wait %d", g.i)
			assert.Equal(t, offsets[g.i], k, "wait %d timed out out of order", g.i)
			assert.True(t, g.at.Equal(due), "wait %d ended at %v, due at %v", g.i, g.at.Sub(start), due.Sub(start))
			assert.True(t, g.a.DecidedAt.Equal(due), "wait %d decided at %v", g.i, g.a.DecidedAt.Sub(start))
		}
		all, err := st.Decisions(ctx, memory.DecisionQuery{SessionID: "s1"})
		require.NoError(t, err)
		assert.Len(t, all, n, "one decision per wait")
		assert.Zero(t, c.Len())
		assert.True(t, idle(c), "no wait in the heap, no timer armed")
	})
}

// TestSuspendAndTimeoutShareTheTimer: a wait whose deadline comes before
// SuspendAfter times out at its deadline, the others suspend after
// SuspendAfter, and their records stay pending.
func TestSuspendAndTimeoutShareTheTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memory.MemStore{}
		c := newCore(t, Config{Store: st, Timeout: 100 * time.Second, SuspendAfter: 30 * time.Second})
		start := time.Now()
		// k0 is due in 10 s, k1 in 50 s (it suspends at 30 s), k2 in 100 s
		// (it suspends at 30 s too).
		pendingAt(t, st, "k0", start.Add(-90*time.Second))
		pendingAt(t, st, "k1", start.Add(-50*time.Second))
		pendingAt(t, st, "k2", start)
		ctx := context.Background()
		got := make([]ended, 3)
		var wg sync.WaitGroup
		for i := range got {
			w, _, err := c.Open(ctx, rec("s1", fmt.Sprint("k", i), fmt.Sprint("k", i)))
			require.NoError(t, err)
			wg.Go(func() {
				a, err := w.Wait(ctx)
				got[i] = ended{i, a, err, time.Now()}
			})
		}
		wg.Wait()
		assert.NoError(t, got[0].err)
		assert.Equal(t, timedOut, got[0].a.Decision)
		assert.Equal(t, 10*time.Second, got[0].at.Sub(start))
		for _, g := range got[1:] {
			assert.ErrorIs(t, g.err, suspend.ErrSuspended)
			assert.Equal(t, 30*time.Second, g.at.Sub(start))
		}
		list, err := c.Pending(ctx, "s1")
		require.NoError(t, err)
		assert.Len(t, list, 2)
		assert.True(t, idle(c))
	})
}

// TestWaitsLeaveTheHeap ends waits in every way a wait ends, with other
// waits still waiting: each leaves the heap when it ends, and once all
// ended the timer is not armed.
func TestWaitsLeaveTheHeap(t *testing.T) {
	leaktest.Check(t)
	c := newCore(t, Config{Timeout: time.Hour, SuspendAfter: 50 * time.Minute})
	ctx := t.Context()
	open := func() *Wait {
		w, _, err := c.Open(ctx, rec("s1", NewID(), ""))
		require.NoError(t, err)
		return w
	}

	// Released before it was waited for: it never enters the heap.
	open().Release()
	assert.True(t, idle(c))

	start := func(ctx context.Context, w *Wait) <-chan ended {
		before := inHeap(c)
		out := waitAsync(ctx, w)
		for range 5000 { // until it is in the heap
			if inHeap(c) > before {
				break
			}
			time.Sleep(time.Millisecond)
		}
		require.Equal(t, before+1, inHeap(c))
		return out
	}
	keep := open()
	keepCtx, stopKeep := context.WithCancel(ctx)
	kept := start(keepCtx, keep)

	w := open()
	out := start(ctx, w)
	ok, err := c.Decide(ctx, "s1", w.Record.ID, yes, nil)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, inHeap(c), "decided: out of the heap before its Wait looks")
	assert.True(t, (<-out).a.Decision.Approved)

	cctx, cancel := context.WithCancel(ctx)
	out = start(cctx, open())
	cancel()
	assert.ErrorIs(t, (<-out).err, context.Canceled)
	assert.Equal(t, 1, inHeap(c), "interrupted")

	sctx, cancelCause := context.WithCancelCause(ctx)
	out = start(sctx, open())
	cancelCause(suspend.ErrSuspended)
	assert.ErrorIs(t, (<-out).err, suspend.ErrSuspended)
	assert.Equal(t, 1, inHeap(c), "suspended")

	w = open()
	out = start(ctx, w)
	require.NoError(t, c.Cancel(ctx, "s1", w.Record.ID, interrupted))
	assert.Equal(t, 1, inHeap(c), "cancelled: out of the heap before its Wait looks")
	assert.Equal(t, interrupted, (<-out).a.Decision)

	stopKeep()
	<-kept
	assert.True(t, idle(c), "the last wait ended: nothing in the heap, no timer armed")
}

// holdTimeout is a store whose first DecideApproval with the TimedOut
// decision waits until release is closed, after saying so on entered: the
// waiter is between its timer and the record of its timeout.
type holdTimeout struct {
	*memory.MemStore
	once             sync.Once
	entered, release chan struct{}
}

func (h *holdTimeout) DecideApproval(ctx context.Context, sessionID, id string, d memory.ApprovalDecision) (memory.Approval, error) {
	if d.Cause == timedOut.Cause {
		h.once.Do(func() {
			close(h.entered)
			<-h.release
		})
	}
	return h.MemStore.DecideApproval(ctx, sessionID, id, d)
}

// TestDecisionAfterTheTimerFired: a decision that lands after the timer
// woke the wait, before the wait recorded its timeout, wins; the Core's
// entry, whose done the timer closed, takes it without closing done again.
func TestDecisionAfterTheTimerFired(t *testing.T) {
	for _, how := range []string{"here", "elsewhere"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &holdTimeout{MemStore: &memory.MemStore{}, entered: make(chan struct{}), release: make(chan struct{})}
				c := newCore(t, Config{Store: st, Timeout: 10 * time.Second})
				ctx := context.Background()
				w, _, err := c.Open(ctx, rec("s1", "c1", ""))
				require.NoError(t, err)
				out := waitAsync(ctx, w)
				<-st.entered
				c.mu.Lock()
				assert.True(t, w.e.fired)
				c.mu.Unlock()
				moved := memory.ApprovalDecision{Reason: "moved on", Principal: "system", Channel: "system"}
				if how == "here" {
					// Through this Core: the entry is given the decision.
					require.NoError(t, c.Cancel(ctx, "s1", w.Record.ID, moved))
				} else {
					// Another process decided it: only the store knows.
					_, err := st.MemStore.DecideApproval(ctx, "s1", w.Record.ID, moved)
					require.NoError(t, err)
				}
				close(st.release)
				got := <-out
				require.NoError(t, got.err)
				assert.Equal(t, moved, got.a.Decision, "the decision wins over the timeout")
				assert.Zero(t, c.Len())
				assert.True(t, idle(c))
			})
		})
	}
}

// TestDecisionRacingTheDeadline decides waits around their deadline, 200
// times: whoever wins in the store, the Wait returns the stored record,
// a decision Decide reported as taken is the one returned, and nothing is
// closed twice.
func TestDecisionRacingTheDeadline(t *testing.T) {
	leaktest.Check(t)
	c := newCore(t, Config{Timeout: 2 * time.Millisecond})
	ctx := t.Context()
	wins := 0
	for i := range 200 {
		w, _, err := c.Open(ctx, rec("s1", fmt.Sprint("c", i), ""))
		require.NoError(t, err)
		id := w.Record.ID
		out := waitAsync(ctx, w)
		time.Sleep(time.Duration(i%9) * 250 * time.Microsecond)
		var ok bool
		if i%2 == 0 {
			ok, err = c.Decide(ctx, "s1", id, yes, nil)
		} else {
			err = c.Cancel(ctx, "s1", id, yes)
		}
		require.NoError(t, err)
		got := <-out
		require.NoError(t, got.err)
		stored, err := c.Store().GetApproval(ctx, id)
		require.NoError(t, err)
		require.True(t, stored.Decided)
		assert.Equal(t, stored.Decision, got.a.Decision, "round %d: the Wait returns what the store holds", i)
		if ok {
			wins++
			assert.True(t, got.a.Decision.Approved, "round %d: a decision Decide took is not lost", i)
		}
		if !got.a.Decision.Approved && got.a.Decision.Cause != timedOut.Cause {
			t.Fatalf("round %d: decision %+v", i, got.a.Decision)
		}
	}
	t.Logf("%d of 100 decisions came before the deadline", wins)
	assert.Zero(t, c.Len())
	assert.True(t, idle(c))
}

// TestCloseKeepsDeadlines: Close does not end the waits that wait, and
// they still time out; then nothing is armed.
func TestCloseKeepsDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, Config{Timeout: 10 * time.Second})
		ctx := context.Background()
		w, _, err := c.Open(ctx, rec("s1", "c1", ""))
		require.NoError(t, err)
		out := waitAsync(ctx, w)
		synctest.Wait()
		c.Close()
		got := <-out
		require.NoError(t, got.err)
		assert.Equal(t, timedOut, got.a.Decision)
		assert.True(t, idle(c))
	})
}

// TestReleasedWhileWaiting: a Wait released while it waits no longer hears
// of decisions taken through its Core, but ends at its deadline with the
// stored decision, as before the Core had one timer.
func TestReleasedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, Config{Timeout: 10 * time.Second})
		ctx := context.Background()
		start := time.Now()
		w, _, err := c.Open(ctx, rec("s1", "c1", ""))
		require.NoError(t, err)
		out := waitAsync(ctx, w)
		synctest.Wait()
		w.Release()
		assert.Zero(t, c.Len())
		assert.Equal(t, 1, inHeap(c), "its Wait still waits")
		ok, err := c.Decide(ctx, "s1", w.Record.ID, yes, nil)
		require.NoError(t, err)
		require.True(t, ok)
		got := <-out
		require.NoError(t, got.err)
		assert.True(t, got.a.Decision.Approved)
		assert.Equal(t, 10*time.Second, got.at.Sub(start))
		assert.True(t, idle(c))
	})
}

// TestHeapGivesBackItsSlice: after a burst of waits the heap's slice
// shrinks as they end.
func TestHeapGivesBackItsSlice(t *testing.T) {
	var h dueHeap
	es := make([]*entry, 1000)
	for i := range es {
		es[i] = &entry{due: int64(rand.IntN(1000)), index: -1}
		h.Push(es[i])
	}
	for len(h) > 0 {
		e := h.Pop().(*entry)
		assert.Equal(t, -1, e.index)
	}
	assert.LessOrEqual(t, cap(h), 64)
}
