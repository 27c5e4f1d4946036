package person

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

func benchRequest(session string, i int) agent.ApprovalRequest {
	return agent.ApprovalRequest{
		SessionID: session,
		Round:     1,
		Call: agent.ToolCall{
			ID:        fmt.Sprintf("call_%d", i),
			Name:      "run_command",
			State:     agent.StateApprovalRequired,
			Arguments: json.RawMessage(`{"command":"ls -la","dir":"/tmp"}`),
		},
	}
}

// benchDigest is the arguments digest of benchRequest's calls, as the
// approval_required chunk shows it: a front end echoes it, it does not
// compute it.
var benchDigest = agent.ArgumentsDigest(benchRequest("", 0).Call.Arguments)

// respond gives an approval to the pending approval of tk, asked with req,
// as a person's click through the handler does: a reply bound to the call.
func respond(m *Approvals, req agent.ApprovalRequest, tk agent.Ticket) (bool, error) {
	return m.Respond(context.Background(), Reply{SessionID: req.SessionID, ApprovalID: tk.ApprovalID(),
		CallID: req.Call.ID, Tool: req.Call.Name, ArgumentsDigest: benchDigest,
		Decision: agent.Decision{Approved: true, By: "bench"}})
}

// waiter waits for the tickets it is sent, one at a time, and sends the
// time each Wait returned on resumed. It tells on ready that it is about to
// call Wait; the caller yields a few times after that, so that Wait has
// (nearly always) started to block when the decision comes.
func waiter(ctx context.Context, tickets <-chan agent.Ticket, ready chan<- struct{}, resumed chan<- time.Time) {
	for tk := range tickets {
		ready <- struct{}{}
		tk.Wait(ctx)
		resumed <- time.Now()
	}
}

// letWait yields after the waiter said it is about to Wait.
func letWait(ready <-chan struct{}) {
	<-ready
	for range 4 {
		runtime.Gosched()
	}
}

// BenchmarkRespondToResume measures the latency from Respond to the return
// of the Wait that waits for the decision, in another goroutine: the time a
// browser's click takes to resume the agent. It reports the p50 and p99 of
// that latency.
func BenchmarkRespondToResume(b *testing.B) {
	m, _ := StartApprovals(ApprovalsConfig{})
	ctx := context.Background()
	req := benchRequest("s", 1)
	tickets := make(chan agent.Ticket)
	ready := make(chan struct{})
	resumed := make(chan time.Time)
	go waiter(ctx, tickets, ready, resumed)
	lat := make([]time.Duration, 0, 1024)
	for b.Loop() {
		tk, _ := m.Request(ctx, req)
		tickets <- tk
		letWait(ready)
		start := time.Now()
		respond(m, req, tk)
		lat = append(lat, (<-resumed).Sub(start))
	}
	close(tickets)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	if m.Len() != 0 {
		b.Fatalf("Len() = %d after the benchmark", m.Len())
	}
}

// BenchmarkMemoryPerPending measures the heap a pending approval holds in
// the Approvals: 100,000 registrations over 1,000 sessions. The requests
// themselves (owned by the agent) are made beforehand and not counted.
func BenchmarkMemoryPerPending(b *testing.B) {
	const n, sessions = 100_000, 1_000
	reqs := make([]agent.ApprovalRequest, n)
	for i := range reqs {
		reqs[i] = benchRequest(fmt.Sprintf("session-%d", i%sessions), i)
	}
	ctx := context.Background()
	var perPending float64
	for b.Loop() {
		m, _ := StartApprovals(ApprovalsConfig{})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range reqs {
			m.Request(ctx, reqs[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perPending = float64(after.HeapAlloc-before.HeapAlloc) / n
		if m.Len() != n {
			b.Fatalf("Len() = %d, want %d", m.Len(), n)
		}
		for s := range sessions {
			m.CancelSession(ctx, fmt.Sprintf("session-%d", s))
		}
		runtime.KeepAlive(m)
	}
	b.ReportMetric(perPending, "bytes/pending")
}

// BenchmarkRequestRespondWait is the whole life of one approval in one
// goroutine: register, answer before the wait, take the decision.
func BenchmarkRequestRespondWait(b *testing.B) {
	m, _ := StartApprovals(ApprovalsConfig{})
	ctx := context.Background()
	req := benchRequest("s", 1)
	for b.Loop() {
		tk, _ := m.Request(ctx, req)
		respond(m, req, tk)
		tk.Wait(ctx)
	}
}

// BenchmarkRequestRespondWaitParallel is the same from GOMAXPROCS
// goroutines, each with its own session, on one Approvals.
func BenchmarkRequestRespondWaitParallel(b *testing.B) {
	m, _ := StartApprovals(ApprovalsConfig{})
	ctx := context.Background()
	var sessions atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest(fmt.Sprintf("s%d", sessions.Add(1)), 1)
		for pb.Next() {
			tk, _ := m.Request(ctx, req)
			respond(m, req, tk)
			tk.Wait(ctx)
		}
	})
}

// BenchmarkPendingHeld measures the heap that 10,000 pending approvals
// (over 100 sessions) hold, per approval: in an in-memory Approvals, and in a
// durable one whose Store is a MemStore (the figure then includes the
// Store's records, which a database would keep out of the process).
func BenchmarkPendingHeld(b *testing.B) {
	const n, sessions = 10_000, 100
	reqs := make([]agent.ApprovalRequest, n)
	for i := range reqs {
		reqs[i] = benchRequest(fmt.Sprintf("session-%d", i%sessions), i)
	}
	for _, mode := range []string{"memory", "MemStore"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			var perPending float64
			for b.Loop() {
				cfg := ApprovalsConfig{}
				if mode == "MemStore" {
					cfg.Store = &memory.MemStore{}
				}
				m, err := StartApprovals(cfg)
				if err != nil {
					b.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range reqs {
					if _, err := m.Request(ctx, reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPending = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				if m.Len() != n {
					b.Fatalf("Len() = %d, want %d", m.Len(), n)
				}
				for s := range sessions {
					m.CancelSession(ctx, fmt.Sprintf("session-%d", s))
				}
				runtime.KeepAlive(cfg.Store)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(perPending, "bytes/pending")
		})
	}
}

// BenchmarkRequestRespondWaitStore is BenchmarkRequestRespondWait for a
// durable Approvals on a MemStore: the approval is created and decided in the
// Store, and, with a Notifier, the decision announced.
func BenchmarkRequestRespondWaitStore(b *testing.B) {
	for _, notify := range []bool{false, true} {
		b.Run(map[bool]string{false: "store", true: "store+notifier"}[notify], func(b *testing.B) {
			st := &memory.MemStore{}
			cfg := ApprovalsConfig{Store: st}
			if notify {
				cfg.Notifier = st
			}
			m, err := StartApprovals(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			req := benchRequest("s", 1)
			for b.Loop() {
				tk, err := m.Request(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := respond(m, req, tk); err != nil {
					b.Fatal(err)
				}
				if d, err := tk.Wait(ctx); err != nil || !d.Approved {
					b.Fatalf("Wait = %+v, %v", d, err)
				}
			}
		})
	}
}

// BenchmarkRespondToResumeReplicas is BenchmarkRespondToResume across two
// durable Approvals on one MemStore (its Notifier within the process): the
// Wait waits on A, the decision is posted to B. It reports the p50 and p99
// of the time from B's Respond to the return of A's Wait.
func BenchmarkRespondToResumeReplicas(b *testing.B) {
	st := &memory.MemStore{}
	ma, err := StartApprovals(ApprovalsConfig{Store: st, Notifier: st})
	if err != nil {
		b.Fatal(err)
	}
	defer ma.Close()
	mb, err := StartApprovals(ApprovalsConfig{Store: st, Notifier: st, OnDecided: func(memory.Approval) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer mb.Close()
	ctx := context.Background()
	req := benchRequest("s", 1)
	tickets := make(chan agent.Ticket)
	ready := make(chan struct{})
	resumed := make(chan time.Time)
	go waiter(ctx, tickets, ready, resumed)
	lat := make([]time.Duration, 0, 1024)
	for b.Loop() {
		tk, _ := ma.Request(ctx, req)
		tickets <- tk
		letWait(ready)
		start := time.Now()
		respond(mb, req, tk)
		lat = append(lat, (<-resumed).Sub(start))
	}
	close(tickets)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	if ma.Len() != 0 {
		b.Fatalf("Len() = %d after the benchmark", ma.Len())
	}
}
