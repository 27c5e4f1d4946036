package waiting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/suspend"
	"github.com/planround/planround/memory"
)

var (
	timedOut    = memory.ApprovalDecision{Reason: "timed out", Cause: "timeout", Principal: "timeout", Channel: "timeout"}
	interrupted = memory.ApprovalDecision{Reason: "interrupted", Cause: "approval_interrupted", Principal: "system", Channel: "system"}
	yes         = memory.ApprovalDecision{Approved: true, Principal: "alice", Channel: "http"}
)

func newCore(t *testing.T, cfg Config) *Core {
	t.Helper()
	if cfg.Kind == "" {
		cfg.Kind = memory.KindApproval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	cfg.TimedOut, cfg.Interrupted = timedOut, interrupted
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func rec(session, call, key string) memory.Approval {
	return memory.Approval{SessionID: session, CallID: call, Tool: "run", Arguments: []byte(`{"x":1}`), Key: key}
}

func TestDecisionBeforeWaitIsKept(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	w, existing, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	assert.False(t, existing)
	assert.Equal(t, memory.KindApproval, w.Record.Kind)

	ok, err := c.Decide(ctx, "s1", w.Record.ID, yes, nil)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = c.Decide(ctx, "s1", w.Record.ID, memory.ApprovalDecision{}, nil)
	require.NoError(t, err)
	assert.False(t, ok, "the first decision wins")

	a, err := w.Wait(ctx)
	require.NoError(t, err)
	assert.True(t, a.Decision.Approved)
	assert.Equal(t, "alice", a.Decision.Principal)
	assert.Zero(t, c.Len())
}

func TestDecisionWakesWait(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	done := make(chan memory.Approval)
	go func() {
		a, _ := w.Wait(ctx)
		done <- a
	}()
	ok, err := c.Decide(ctx, "s1", w.Record.ID, yes, nil)
	require.NoError(t, err)
	require.True(t, ok)
	a := <-done
	assert.True(t, a.Decision.Approved)
	assert.Zero(t, c.Len())
}

func TestDecideRefusals(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)

	_, err = c.Decide(ctx, "s2", w.Record.ID, yes, nil)
	assert.ErrorIs(t, err, ErrWrongSession)
	refused := errors.New("not what was shown")
	_, err = c.Decide(ctx, "s1", w.Record.ID, yes, func(memory.Approval, *memory.ApprovalDecision) error { return refused })
	assert.ErrorIs(t, err, refused)
	ok, err := c.Decide(ctx, "s1", "unknown", yes, nil)
	assert.NoError(t, err)
	assert.False(t, ok)

	a, err := c.Store().GetApproval(ctx, w.Record.ID)
	require.NoError(t, err)
	assert.False(t, a.Decided, "a refused decision leaves the wait pending")
	w.Release()
}

func TestTimeoutCountsFromCreation(t *testing.T) {
	c := newCore(t, Config{Timeout: 30 * time.Millisecond})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	a, err := w.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, timedOut, a.Decision)

	// A wait nobody waits for: a late decision is refused and recorded
	// as a timeout.
	w2, _, err := c.Open(ctx, rec("s1", "c2", ""))
	require.NoError(t, err)
	w2.Release()
	time.Sleep(40 * time.Millisecond)
	ok, err := c.Decide(ctx, "s1", w2.Record.ID, yes, nil)
	require.NoError(t, err)
	assert.False(t, ok)
	got, err := c.Store().GetApproval(ctx, w2.Record.ID)
	require.NoError(t, err)
	assert.Equal(t, timedOut, got.Decision)
}

func TestPendingExpiresLateWaits(t *testing.T) {
	c := newCore(t, Config{Timeout: 30 * time.Millisecond})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	w.Release()
	list, err := c.Pending(ctx, "s1")
	require.NoError(t, err)
	assert.Len(t, list, 1)
	time.Sleep(40 * time.Millisecond)
	list, err = c.Pending(ctx, "s1")
	require.NoError(t, err)
	assert.Empty(t, list)
	got, err := c.Store().GetApproval(ctx, w.Record.ID)
	require.NoError(t, err)
	assert.True(t, got.Decided)
}

func TestKeyReopensTheSameWait(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	w1, existing, err := c.Open(ctx, rec("s1", "c1", "7/c1"))
	require.NoError(t, err)
	require.False(t, existing)
	w1.Release()

	w2, existing, err := c.Open(ctx, rec("s1", "c1", "7/c1"))
	require.NoError(t, err)
	assert.True(t, existing)
	assert.Equal(t, w1.Record.ID, w2.Record.ID)
	// The same key in another session is another wait.
	w3, existing, err := c.Open(ctx, rec("s2", "c1", "7/c1"))
	require.NoError(t, err)
	assert.False(t, existing)
	w3.Release()

	ok, err := c.Decide(ctx, "s1", w2.Record.ID, yes, nil)
	require.NoError(t, err)
	require.True(t, ok)
	a, err := w2.Wait(ctx)
	require.NoError(t, err)
	assert.True(t, a.Decision.Approved)

	w4, existing, err := c.Open(ctx, rec("s1", "c1", "7/c1"))
	require.NoError(t, err)
	assert.True(t, existing)
	assert.True(t, w4.Record.Decided, "a decided wait is returned decided")
	a, err = w4.Wait(ctx)
	require.NoError(t, err)
	assert.True(t, a.Decision.Approved)
	assert.Zero(t, c.Len())
}

func TestSuspendLeavesTheWaitPending(t *testing.T) {
	c := newCore(t, Config{SuspendAfter: 10 * time.Millisecond})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	_, err = w.Wait(ctx)
	require.ErrorIs(t, err, suspend.ErrSuspended)

	w2, _, err := c.Open(ctx, rec("s1", "c2", ""))
	require.NoError(t, err)
	sctx, cancel := context.WithCancelCause(ctx)
	cancel(suspend.ErrSuspended)
	_, err = w2.Wait(sctx)
	require.ErrorIs(t, err, suspend.ErrSuspended)

	list, err := c.Pending(ctx, "s1")
	require.NoError(t, err)
	assert.Len(t, list, 2)
	assert.Zero(t, c.Len())
}

func TestInterruptedWaitRefusesLaterDecisions(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	w, _, err := c.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	a, err := w.Wait(cctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, interrupted, a.Decision)
	ok, err := c.Decide(ctx, "s1", w.Record.ID, yes, nil)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestCancelSessionKeepsToItsKind(t *testing.T) {
	st := &memory.MemStore{}
	approvals := newCore(t, Config{Store: st})
	forms := newCore(t, Config{Store: st, Kind: memory.KindForm})
	ctx := t.Context()
	wa, _, err := approvals.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	wf, _, err := forms.Open(ctx, rec("s1", "c2", ""))
	require.NoError(t, err)
	defer wf.Release()

	n, err := approvals.CancelSession(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	a, err := wa.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, interrupted, a.Decision)

	list, err := forms.Pending(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, wf.Record.ID, list[0].ID)
	// A form is not answered through the approvals' core.
	ok, err := approvals.Decide(ctx, "s1", wf.Record.ID, yes, nil)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestNotesBetweenCores runs two Cores on one store and notifier, as two
// replicas: a decision taken on one wakes the wait on the other at once,
// and OnDecided hears of it only where no wait holds it.
func TestNotesBetweenCores(t *testing.T) {
	st := &memory.MemStore{}
	var heardA, heardB atomic.Int32
	a := newCore(t, Config{Store: st, Notifier: st, OnDecided: func(memory.Approval) { heardA.Add(1) }})
	b := newCore(t, Config{Store: st, Notifier: st, OnDecided: func(memory.Approval) { heardB.Add(1) }})
	forms := newCore(t, Config{Store: st, Notifier: st, Kind: memory.KindForm,
		OnDecided: func(memory.Approval) { t.Error("a form's core heard an approval's decision") }})
	_ = forms
	ctx := t.Context()
	w, _, err := a.Open(ctx, rec("s1", "c1", ""))
	require.NoError(t, err)
	done := make(chan memory.Approval)
	go func() {
		got, _ := w.Wait(ctx)
		done <- got
	}()
	ok, err := b.Decide(ctx, "s1", w.Record.ID, yes, nil)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case got := <-done:
		assert.True(t, got.Decision.Approved)
	case <-time.After(5 * time.Second):
		t.Fatal("the note did not wake the other core's wait")
	}
	assert.Equal(t, int32(0), heardA.Load(), "a wait took the decision")
	assert.Equal(t, int32(1), heardB.Load(), "the decider held no wait")
}

func TestFirstDeciderWinsAcrossCores(t *testing.T) {
	st := &memory.MemStore{}
	cores := []*Core{newCore(t, Config{Store: st, Notifier: st}), newCore(t, Config{Store: st, Notifier: st})}
	ctx := t.Context()
	for round := range 50 {
		w, _, err := cores[0].Open(ctx, rec("s1", fmt.Sprint("c", round), ""))
		require.NoError(t, err)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				ok, err := cores[i%2].Decide(ctx, "s1", w.Record.ID, yes, nil)
				assert.NoError(t, err)
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), wins.Load())
		_, err = w.Wait(ctx)
		require.NoError(t, err)
	}
}

func TestRecordNeverOverrulesAPerson(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	policy := memory.ApprovalDecision{Approved: true, Principal: "policy:allow", Channel: "policy"}

	a, err := c.Record(ctx, rec("s1", "c1", ""), policy)
	require.NoError(t, err)
	assert.True(t, a.Decided)
	assert.Equal(t, "policy:allow", a.Decision.Principal)

	w, _, err := c.Open(ctx, rec("s1", "c2", "9/c2"))
	require.NoError(t, err)
	w.Release()
	no := memory.ApprovalDecision{Reason: "no", Principal: "bob", Channel: "http"}
	_, err = c.Decide(ctx, "s1", w.Record.ID, no, nil)
	require.NoError(t, err)
	a, err = c.Record(ctx, rec("s1", "c2", "9/c2"), policy)
	require.NoError(t, err)
	assert.Equal(t, "bob", a.Decision.Principal, "the person's decision stands")

	all, err := c.Store().Decisions(ctx, memory.DecisionQuery{SessionID: "s1"})
	require.NoError(t, err)
	assert.Len(t, all, 2)
}

func TestPrivateStoreStaysBounded(t *testing.T) {
	c := newCore(t, Config{})
	ctx := t.Context()
	n := keepPrivate + keepPrivate/4 + 10
	for i := range n {
		_, err := c.Record(ctx, rec("s1", fmt.Sprint("c", i), ""), yes)
		require.NoError(t, err)
	}
	all, err := c.Store().Decisions(ctx, memory.DecisionQuery{})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(all), keepPrivate+keepPrivate/4, "the oldest decisions were forgotten")
	assert.GreaterOrEqual(t, len(all), keepPrivate, "the most recent ones are kept")
}

func TestParseNote(t *testing.T) {
	n, ok := ParseNote(`{"session_id":"s","approval_id":"a","kind":"form","from":"x"}`)
	assert.True(t, ok)
	assert.Equal(t, Note{SessionID: "s", ID: "a", Kind: "form", From: "x"}, n)
	for _, p := range []string{"", "{}", "nope", `{"session_id":"s"}`} {
		_, ok := ParseNote(p)
		assert.False(t, ok, p)
	}
}
