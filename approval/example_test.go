package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// A web host sets a Manager as the agent's approver and mounts its handlers.
// The agent calls Prepare before it shows the approval_required chunk and
// Approve after; the browser answers with the chunk's approval id. Here the
// steps the agent and the browser take are written out by hand.
func ExampleManager() {
	m, err := approval.NewManager(approval.ManagerConfig{})
	if err != nil {
		panic(err)
	}
	// In a host: agent.Config{Approver: m}, and, with cfg.Authorize
	// checking that the caller owns the session (see HandlerConfig),
	//   mux.Handle("POST /api/tool-approve", m.ApproveHandler(cfg))
	//   mux.Handle("POST /api/interrupt", m.InterruptHandler(cancelRun, cfg))
	handler := m.ApproveHandler(approval.HandlerConfig{})
	post := func(body string) *http.Request {
		r := httptest.NewRequest("POST", "/api/tool-approve", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}

	// The agent registers the call; the id travels on the chunk.
	req := agent.ApprovalRequest{
		SessionID: "s1",
		Call:      agent.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
	}
	id, _ := m.Prepare(context.Background(), req)
	req.ApprovalID = id

	// The browser approves at once (an auto-approve hit), before the agent
	// waits: the decision is kept.
	body := fmt.Sprintf(`{"session_id":"s1","task_id":%q,"approved":true}`, id)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, post(body))
	fmt.Print(rec.Code, " ", rec.Body.String())

	// The agent waits and gets the decision.
	d, err := m.Approve(context.Background(), req)
	fmt.Println("approved:", d.Approved, err)

	// The same card answered again is stale.
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, post(body))
	fmt.Print(rec.Code, " ", rec.Body.String())
	fmt.Println("pending:", m.Len())
	// Output:
	// 200 {"success":true}
	// approved: true <nil>
	// 200 {"success":false,"error":"approval is not pending (answered, timed out, cancelled, or lost in a server restart)"}
	// pending: 0
}

// Authorize binds the handlers to the host's notion of who owns a session:
// here a cookie that must name the session's owner. A request without the
// cookie gets 401, one of another owner 403, and the approval stays pending.
func ExampleHandlerConfig() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	owners := map[string]string{"s1": "alice"} // session -> owner, kept by the host
	cfg := approval.HandlerConfig{Authorize: func(r *http.Request, sessionID string) error {
		c, err := r.Cookie("owner")
		if err != nil {
			return fmt.Errorf("%w: no owner cookie", approval.ErrUnauthenticated)
		}
		if owners[sessionID] != c.Value {
			return errors.New("not your session")
		}
		return nil
	}}
	handler := m.ApproveHandler(cfg)

	req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "call_1", Name: "run_command"}}
	id, _ := m.Prepare(context.Background(), req)
	body := fmt.Sprintf(`{"session_id":"s1","task_id":%q,"approved":true}`, id)
	for _, owner := range []string{"", "mallory", "alice"} {
		r := httptest.NewRequest("POST", "/api/tool-approve", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if owner != "" {
			r.AddCookie(&http.Cookie{Name: "owner", Value: owner})
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	m.CancelSession("s1")
	// Output:
	// 401 {"success":false,"error":"approval: not authenticated: no owner cookie"}
	// 403 {"success":false,"error":"not your session"}
	// 200 {"success":true}
}

// CancelSession ends every pending approval of a session, also one that
// was registered and not yet waited for.
func ExampleManager_CancelSession() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "call_1", Name: "run_command"}}
	req.ApprovalID, _ = m.Prepare(context.Background(), req)

	fmt.Println("cancelled:", m.CancelSession("s1"), "left:", m.Len())
	d, _ := m.Approve(context.Background(), req)
	fmt.Printf("approved: %v, reason: %q\n", d.Approved, d.Reason)
	// Output:
	// cancelled: 1 left: 0
	// approved: false, reason: "interrupted while waiting for approval"
}

// Approve read-only tools at once, never run "rm", and ask about the rest
// (here a Manager that a browser answers; the browser's answer with scope
// "always" is remembered by the AllowList).
func ExampleChain() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	grants := approval.NewAllowList()
	a := approval.Chain(grants.Wrap(m),
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("rm is never allowed", "rm"),
	)

	ask := func(tool string) {
		req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "c", Name: tool}}
		if p, ok := a.(agent.Preparer); ok {
			req.ApprovalID, _ = p.Prepare(context.Background(), req)
		}
		// The browser answers whatever reaches it.
		m.Respond("s1", req.ApprovalID, agent.Decision{Approved: true, Scope: agent.ScopeAlways})
		d, _ := a.Approve(context.Background(), req)
		fmt.Printf("%s: approved=%v", tool, d.Approved)
		if d.Reason != "" {
			fmt.Printf(" (%s)", d.Reason)
		}
		fmt.Println()
	}
	ask("read_file")
	ask("rm")
	ask("run_command")
	fmt.Println("always allowed:", grants.Tools("s1"))
	fmt.Println("pending:", m.Len())
	// Output:
	// read_file: approved=true
	// rm: approved=false (rm is never allowed)
	// run_command: approved=true
	// always allowed: [run_command]
	// pending: 0
}

// A CLI asks at the terminal. Here the answers come from a string.
func ExampleTerminal() {
	var out strings.Builder
	term := approval.NewTerminal(strings.NewReader("maybe\nn too risky\n"), &out)
	defer term.Close()
	d, err := term.Approve(context.Background(), agent.ApprovalRequest{
		Call: agent.ToolCall{Name: "run_command", Arguments: json.RawMessage(`{"command":"rm -rf build"}`)},
	})
	for line := range strings.Lines(out.String()) {
		fmt.Println(strings.TrimRight(line, " \n"))
	}
	fmt.Printf("approved: %v, reason: %q, err: %v\n", d.Approved, d.Reason, err)
	// Output:
	//
	// Tool call run_command wants to run with:
	//   {
	//     "command": "rm -rf build"
	//   }
	// approve [y] / reject [n] / always approve this tool [a]: please answer y (approve), n (reject, optionally followed by a reason) or a (always approve this tool):
	// approved: false, reason: "rejected by user: too risky", err: <nil>
}

// WithTimeout bounds any approver's wait; IsTimeout tells the timeout apart
// from a person's rejection.
func ExampleWithTimeout() {
	slow := agent.ApproverFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
		<-ctx.Done() // nobody answers
		return agent.Decision{}, ctx.Err()
	})
	d, _ := approval.WithTimeout(slow, 1).Approve(context.Background(), agent.ApprovalRequest{})
	fmt.Printf("%q timeout=%v\n", d.Reason, approval.IsTimeout(d.Reason))
	// Output:
	// "approval timed out after 1ns" timeout=true
}
