// Package approvaltest checks that an [agent.Approver] keeps the contract the
// agent relies on.
//
// [Run] runs the checks as subtests. They need no decision from the approver:
// they cancel contexts and look at how it behaves, so they apply equally to
// approvers that decide alone (a policy), ask a person (a terminal) or wait
// for a decision from elsewhere (a browser, through a runner):
//
//   - Request returns promptly, whatever its context: it registers the call
//     and does not wait for a decision (a wrapper that waits inside Request
//     fails here);
//   - the Wait of a pending ticket returns promptly when its context has
//     already ended, and when it ends during the wait;
//   - a Wait with an already cancelled context (the release the agent owes
//     for a ticket it no longer waits for) releases what Request registered;
//   - the pending tickets of different calls have distinct approval ids
//     (when they have one);
//   - Request and Wait may be called from many goroutines at once for
//     different calls (run the tests with -race);
//   - no goroutine started by a check outlives it (after the approver is
//     closed, when it is an io.Closer). Idle keep-alive connections are
//     not counted: those of http.DefaultTransport (an approver that posts
//     with http.DefaultClient) are closed before the goroutines are
//     counted, and so are those of an approver that has a
//     CloseIdleConnections() method, as http.Client does (forward it to
//     the approver's own client);
//   - when the approver has a Len() int method (as the approvals a runner
//     keeps do), it reports zero after every check.
//
// "Promptly" is checked with a generous bound (see [Bound]) that only a hung
// approver misses; it is not a speed test. The goroutine check looks at all
// goroutines of the process, so do not run Run in parallel with other tests.
//
// [RunStore] checks a store (a memory.ApprovalStore) under the approvals a
// runner keeps on it: the first decision wins, cancelling, the timeout,
// listing, binding a decision to the call, and the audit.
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

// Bound is how long Request, or a Wait whose context ended, may take to
// return before a check fails.
const Bound = 5 * time.Second

// wait is how long the "during the wait" checks let Wait block before they
// cancel its context.
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
		{"RequestDoesNotWait", testRequestDoesNotWait},
		{"CancelledContext", testCancelledContext},
		{"CancelDuringWait", testCancelDuringWait},
		{"ReleaseWithoutWaiting", testRelease},
		{"ApprovalIDs", testApprovalIDs},
		{"Concurrent", testConcurrent},
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

// request calls a.Request in a goroutine and marks t failed when it has not
// returned within Bound. ok is false when it failed or did not return: there
// is no ticket to wait for. It may be called from any goroutine.
func request(t *testing.T, ctx context.Context, a agent.Approver, req agent.ApprovalRequest) (tk agent.Ticket, ok bool) {
	t.Helper()
	type answer struct {
		t   agent.Ticket
		err error
	}
	done := make(chan answer, 1)
	go func() {
		tk, err := a.Request(ctx, req)
		done <- answer{tk, err}
	}()
	select {
	case r := <-done:
		return r.t, r.err == nil
	case <-time.After(Bound):
		t.Errorf("Request(%s) did not return within %v: it must register the call, not wait for a decision", req.Call.ID, Bound)
		return agent.Ticket{}, false
	}
}

// waitWithin calls tk.Wait in a goroutine and marks t failed when it has not
// returned within Bound after ctx ended. It may be called from any
// goroutine.
func waitWithin(t *testing.T, ctx context.Context, tk agent.Ticket, id string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk.Wait(ctx) //nolint:errcheck // only the return is checked
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(Bound):
		t.Errorf("the Wait of %s's ticket did not return within %v after its context ended", id, Bound)
	}
}

func cancelledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// release keeps the contract for a ticket the check does not wait for: one
// Wait, with a cancelled context.
func release(t *testing.T, tk agent.Ticket, id string) {
	t.Helper()
	waitWithin(t, cancelledContext(), tk, id)
}

func testRequestDoesNotWait(t *testing.T, a agent.Approver) {
	req := Request(1)
	if tk, ok := request(t, context.Background(), a, req); ok {
		release(t, tk, req.Call.ID)
	}
}

func testCancelledContext(t *testing.T, a agent.Approver) {
	req := Request(2)
	ctx := cancelledContext()
	if tk, ok := request(t, ctx, a, req); ok {
		waitWithin(t, ctx, tk, req.Call.ID)
	}
}

func testCancelDuringWait(t *testing.T, a agent.Approver) {
	req := Request(3)
	tk, ok := request(t, context.Background(), a, req)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	waitWithin(t, ctx, tk, req.Call.ID)
}

func testRelease(t *testing.T, a agent.Approver) {
	req := Request(4)
	tk, ok := request(t, context.Background(), a, req)
	if !ok {
		return
	}
	if _, decided := tk.Decision(); decided {
		t.Skip("the approver decides at once: nothing to release")
	}
	release(t, tk, req.Call.ID)
}

func testApprovalIDs(t *testing.T, a agent.Approver) {
	const n = 8
	ids := make(map[string]int)
	for i := range n {
		req := Request(200 + i)
		tk, ok := request(t, context.Background(), a, req)
		if !ok {
			continue
		}
		if id := tk.ApprovalID(); id != "" {
			if j, dup := ids[id]; dup {
				t.Errorf("Request returned approval id %q for calls %d and %d, want distinct ids", id, j, i)
			}
			ids[id] = i
		}
		defer release(t, tk, req.Call.ID)
	}
}

func testConcurrent(t *testing.T, a agent.Approver) {
	const n = 32
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var (
		mu  sync.Mutex
		ids = make(map[string]bool)
		wg  sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			req := Request(400 + i)
			tk, ok := request(t, context.Background(), a, req)
			if !ok {
				return
			}
			if id := tk.ApprovalID(); id != "" {
				mu.Lock()
				if ids[id] {
					t.Errorf("Request returned approval id %q twice", id)
				}
				ids[id] = true
				mu.Unlock()
			}
			waitWithin(t, ctx, tk, req.Call.ID)
		})
	}
	wg.Wait()
}
