// Package approvaltest checks that an [agent.Approver] keeps the contract the
// agent relies on.
//
// [Run] runs the checks as subtests. They need no decision from the approver:
// they cancel contexts and look at how it behaves, so they apply equally to
// approvers that decide alone (a policy), ask a person (a terminal) or wait
// for a decision from elsewhere (a browser, through a Manager):
//
//   - Approve returns promptly when its context has already ended, and when
//     it ends during the wait;
//   - Approve may be called from many goroutines at once for different calls
//     (run the tests with -race);
//   - when the approver is an [agent.Preparer]: Prepare returns distinct ids,
//     and the Approve that follows a Prepare with an already cancelled context
//     returns promptly and releases the entry;
//   - no goroutine started by a check outlives it (after the approver is
//     closed, when it is an io.Closer). Idle keep-alive connections are
//     not counted: those of http.DefaultTransport (an approver that posts
//     with http.DefaultClient) are closed before the goroutines are
//     counted, and so are those of an approver that has a
//     CloseIdleConnections() method, as http.Client does (forward it to
//     the approver's own client);
//   - when the approver has a Len() int method (as approval.Manager does),
//     it reports zero after every check.
//
// "Promptly" is checked with a generous bound (see [Bound]) that only a hung
// approver misses; it is not a speed test. The goroutine check looks at all
// goroutines of the process, so do not run Run in parallel with other tests.
package approvaltest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// Bound is how long an Approve whose context ended may take to return before
// a check fails.
const Bound = 5 * time.Second

// wait is how long the "during the wait" checks let Approve block before
// they cancel its context.
const wait = 20 * time.Millisecond

// Run runs the conformance checks against approvers made by newApprover,
// which is called once per check and must return a fresh, ready approver.
// When the approver is an io.Closer it is closed at the end of each check.
func Run(t *testing.T, newApprover func() agent.Approver) {
	t.Helper()
	checks := []struct {
		name string
		run  func(t *testing.T, a agent.Approver)
	}{
		{"CancelledContext", testCancelledContext},
		{"CancelDuringWait", testCancelDuringWait},
		{"Concurrent", testConcurrent},
		{"PrepareIDs", testPrepareIDs},
		{"PrepareThenCancelledApprove", testPrepareRelease},
		{"PrepareConcurrent", testPrepareConcurrent},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			var a agent.Approver
			leaktest.Check(t, func() { closeIdleConnections(a) })
			a = newApprover()
			if a == nil {
				t.Fatal("newApprover returned nil")
			}
			c.run(t, a)
			if l, ok := a.(interface{ Len() int }); ok {
				if n := l.Len(); n != 0 {
					t.Errorf("Len() = %d after the check, want 0 (an entry leaked)", n)
				}
			}
			if cl, ok := a.(io.Closer); ok {
				if err := cl.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
}

// closeIdleConnections closes the idle keep-alive connections an approver
// may hold: those of http.DefaultTransport and, when a has a
// CloseIdleConnections method, its own. They are a connection pool, not a
// leak.
func closeIdleConnections(a agent.Approver) {
	http.DefaultClient.CloseIdleConnections()
	if c, ok := http.DefaultTransport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if c, ok := a.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Request returns the i-th request the checks use: session "approvaltest",
// tool "approvaltest_tool", call id "call_<i>", arguments {"n":i}.
func Request(i int) agent.ApprovalRequest {
	args, _ := json.Marshal(map[string]int{"n": i})
	return agent.ApprovalRequest{
		SessionID: "approvaltest",
		Round:     1,
		Call: agent.ToolCall{
			ID:        fmt.Sprintf("call_%d", i),
			Name:      "approvaltest_tool",
			State:     agent.StateApprovalRequired,
			Arguments: args,
		},
	}
}

type result struct {
	d   agent.Decision
	err error
}

// approveWithin calls a.Approve in a goroutine and marks t failed when it has
// not returned within Bound after ctx ended. It may be called from any
// goroutine.
func approveWithin(t *testing.T, ctx context.Context, a agent.Approver, req agent.ApprovalRequest) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		d, err := a.Approve(ctx, req)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return r
	case <-time.After(Bound):
		t.Errorf("Approve(%s) did not return within %v after its context ended", req.Call.ID, Bound)
		return result{}
	}
}

func cancelledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func testCancelledContext(t *testing.T, a agent.Approver) {
	r := approveWithin(t, cancelledContext(), a, Request(1))
	if r.err == nil && r.d.Approved {
		t.Logf("Approve with a cancelled context approved the call; the agent treats it as rejected anyway")
	}
}

func testCancelDuringWait(t *testing.T, a agent.Approver) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	approveWithin(t, ctx, a, Request(2))
}

func testConcurrent(t *testing.T, a agent.Approver) {
	const n = 16
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := Request(100 + i)
			if p, ok := a.(agent.Preparer); ok && i%2 == 0 {
				id, err := p.Prepare(ctx, req)
				if err != nil {
					return // ctx may already have ended; nothing was registered
				}
				req.ApprovalID = id
			}
			approveWithin(t, ctx, a, req)
		})
	}
	wg.Wait()
}

func testPrepareIDs(t *testing.T, a agent.Approver) {
	p, ok := a.(agent.Preparer)
	if !ok {
		t.Skip("not an agent.Preparer")
	}
	const n = 8
	ids := make(map[string]int)
	reqs := make([]agent.ApprovalRequest, n)
	for i := range n {
		reqs[i] = Request(200 + i)
		id, err := p.Prepare(context.Background(), reqs[i])
		if err != nil {
			t.Fatalf("Prepare(%s): %v", reqs[i].Call.ID, err)
		}
		if j, dup := ids[id]; dup && id != "" {
			t.Errorf("Prepare returned id %q for calls %d and %d, want distinct ids", id, j, i)
		}
		ids[id] = i
		reqs[i].ApprovalID = id
	}
	// Keep the contract: one Approve per successful Prepare.
	for _, req := range reqs {
		approveWithin(t, cancelledContext(), a, req)
	}
}

func testPrepareRelease(t *testing.T, a agent.Approver) {
	p, ok := a.(agent.Preparer)
	if !ok {
		t.Skip("not an agent.Preparer")
	}
	req := Request(300)
	id, err := p.Prepare(context.Background(), req)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	req.ApprovalID = id
	r := approveWithin(t, cancelledContext(), a, req)
	if r.err == nil && r.d.Approved {
		t.Logf("Approve after Prepare with a cancelled context approved the call")
	}
}

func testPrepareConcurrent(t *testing.T, a agent.Approver) {
	p, ok := a.(agent.Preparer)
	if !ok {
		t.Skip("not an agent.Preparer")
	}
	const n = 32
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var mu sync.Mutex
	ids := make(map[string]bool)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := Request(400 + i)
			id, err := p.Prepare(context.Background(), req)
			if err != nil {
				t.Errorf("Prepare(%s): %v", req.Call.ID, err)
				return
			}
			mu.Lock()
			if ids[id] && id != "" {
				t.Errorf("Prepare returned id %q twice", id)
			}
			ids[id] = true
			mu.Unlock()
			req.ApprovalID = id
			approveWithin(t, ctx, a, req)
		})
	}
	wg.Wait()
}
