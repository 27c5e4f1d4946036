package person_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

type action uint8

const (
	actApprove       action = iota // Respond approve while Wait waits (or races it)
	actReject                      // Respond reject likewise
	actRespondFirst                // Respond before Wait starts
	actCancelContext               // cancel the waiter's context
	actTimeout                     // do nothing: the Approvals' timeout rejects
	actCount
)

// TestStress holds 10,000 approvals pending at once and answers, cancels
// and times them out in random order from several goroutines, with whole
// sessions cancelled in the middle. Every outcome must match what happened,
// and afterwards no entry and no goroutine may remain.
//
// It runs with an in-memory Approvals and with a durable one (a MemStore as
// its Store), whose outcomes must be the same.
func TestStress(t *testing.T) {
	t.Run("memory", func(t *testing.T) { stress(t, person.ApprovalsConfig{}) })
	t.Run("store", func(t *testing.T) {
		st := &memory.MemStore{}
		stress(t, person.ApprovalsConfig{Store: st})
		left, err := st.PendingApprovals(context.Background(), "")
		if err != nil || len(left) > 0 {
			t.Errorf("after the run the Store has %d pending approvals (%v), want none: every outcome is a decision", len(left), err)
		}
	})
}

func stress(t *testing.T, cfg person.ApprovalsConfig) {
	leaktest.Check(t)
	const (
		sessions = 100
		perSess  = 100
		n        = sessions * perSess
		workers  = 8
		timeout  = time.Minute
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	acts := make([]action, n)
	for i := range acts {
		acts[i] = action(rng.IntN(int(actCount)))
	}
	cancelled := make(map[int]bool) // sessions cancelled by CancelSession
	for len(cancelled) < sessions/10 {
		cancelled[rng.IntN(sessions)] = true
	}

	synctest.Test(t, func(t *testing.T) {
		cfg.Timeout = timeout
		m := startApprovals(t, cfg)
		type result struct {
			d       agent.Decision
			err     error
			waited  time.Duration
			pending bool // what Respond reported
			sent    agent.Decision
		}
		results := make([]result, n)
		ids := make([]string, n)
		cancels := make([]context.CancelFunc, n)
		sessionOf := func(i int) string { return string(rune('A'+i/perSess%26)) + string(rune('a'+i/perSess/26)) }

		var registered, finished sync.WaitGroup
		registered.Add(n)
		for i := range n {
			finished.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cancels[i] = cancel
				req := request(sessionOf(i), i)
				tk, err := m.Request(ctx, req)
				if err != nil {
					t.Errorf("Request %d: %v", i, err)
					registered.Done()
					return
				}
				id := tk.ApprovalID()
				ids[i] = id
				if acts[i] == actRespondFirst {
					results[i].sent = agent.Decision{Approved: i%2 == 0, Reason: "first"}
					results[i].pending, err = respond(m, req.SessionID, id, req, results[i].sent)
					if err != nil {
						t.Errorf("Respond %d: %v", i, err)
					}
				}
				registered.Done()
				start := time.Now()
				d, err := tk.Wait(ctx)
				results[i] = result{d: d, err: err, waited: time.Since(start), pending: results[i].pending, sent: results[i].sent}
			})
		}
		registered.Wait()
		// Only the approvals answered before their wait may be gone.
		first := 0
		for _, a := range acts {
			if a == actRespondFirst {
				first++
			}
		}
		if got := m.Len(); got < n-first || got > n {
			t.Errorf("Len() = %d with all registered, want %d to %d", got, n-first, n)
		}

		// Each task is one action on one approval, or one CancelSession.
		// responded[i] is written by the worker that answers approval i.
		responded := make([]respondRecord, n)
		var tasks []func()
		for i := range n {
			switch acts[i] {
			case actApprove, actReject:
				tasks = append(tasks, func() {
					// results[i] belongs to the waiter, which may
					// still run; keep Respond's answer apart.
					d := agent.Decision{Approved: acts[i] == actApprove, Reason: "answer"}
					pending, err := respond(m, sessionOf(i), ids[i], request(sessionOf(i), i), d)
					if err != nil {
						t.Errorf("Respond %d: %v", i, err)
					}
					responded[i] = respondRecord{pending: pending, d: d}
				})
			case actCancelContext:
				tasks = append(tasks, func() { cancels[i]() })
			}
		}
		for s := range cancelled {
			tasks = append(tasks, func() { cancelSession(t, m, sessionOf(s*perSess)) })
		}
		rng.Shuffle(len(tasks), func(a, b int) { tasks[a], tasks[b] = tasks[b], tasks[a] })
		queue := make(chan func())
		var work sync.WaitGroup
		for range workers {
			work.Go(func() {
				for f := range queue {
					f()
				}
			})
		}
		for _, f := range tasks {
			queue <- f
		}
		close(queue)
		work.Wait()
		finished.Wait() // the untouched ones time out in the bubble's time

		counts := make(map[string]int)
		for i, r := range results {
			sessCancelled := cancelled[i/perSess]
			rejectedByCancel := r.err == nil && sameDecision(r.d, cancelledDecision)
			switch acts[i] {
			case actApprove, actReject:
				rec := responded[i]
				switch {
				case rec.pending && (r.err != nil || !sameDecision(r.d, rec.d)):
					t.Errorf("approval %d: Respond said pending but Wait = %+v, %v; want %+v", i, r.d, r.err, rec.d)
				case !rec.pending && !(sessCancelled && rejectedByCancel):
					t.Errorf("approval %d: Respond said not pending, Wait = %+v, %v", i, r.d, r.err)
				}
				counts[map[bool]string{true: "answered", false: "cancelled first"}[rec.pending]]++
			case actRespondFirst:
				if !r.pending || r.err != nil || !sameDecision(r.d, r.sent) {
					t.Errorf("approval %d: respond-before-wait: pending %v, Wait = %+v, %v; want %+v", i, r.pending, r.d, r.err, r.sent)
				}
				counts["answered before wait"]++
			case actCancelContext:
				ctxEnded := errors.Is(r.err, context.Canceled) && sameDecision(r.d, cancelledDecision)
				if !ctxEnded && !(sessCancelled && rejectedByCancel) {
					t.Errorf("approval %d: context cancelled, Wait = %+v, %v", i, r.d, r.err)
				}
				counts["context cancelled"]++
			case actTimeout:
				switch {
				case sessCancelled:
					if !rejectedByCancel {
						t.Errorf("approval %d: session cancelled, Wait = %+v, %v", i, r.d, r.err)
					}
					counts["session cancelled"]++
				case r.err != nil || r.d.Cause != agent.CauseTimeout || r.waited != timeout:
					t.Errorf("approval %d: want a timeout after %v, got %+v, %v after %v", i, timeout, r.d, r.err, r.waited)
				default:
					counts["timed out"]++
				}
			}
		}
		t.Logf("outcomes: %v", counts)
		if got := m.Len(); got != 0 {
			t.Errorf("Len() = %d after the run, want 0", got)
		}
	})
}

type respondRecord struct {
	pending bool
	d       agent.Decision
}

func sameDecision(a, b agent.Decision) bool {
	return a.Approved == b.Approved && a.Reason == b.Reason && a.Cause == b.Cause && string(a.Arguments) == string(b.Arguments) && a.Scope == b.Scope
}
