package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// A web host sets a Manager as the agent's approver and mounts its handlers.
// The agent calls Request before it shows the approval_required chunk and
// waits with the ticket after; the browser answers with the chunk's approval
// id. Here the steps the agent and the browser take are written out by hand.
func ExampleManager() {
	m, err := approval.NewManager(approval.ManagerConfig{})
	if err != nil {
		panic(err)
	}
	// In a host: agent.Config{Approver: m}, and, with cfg.Authorize
	// checking that the caller owns the session (see HandlerConfig),
	//   mux.Handle("POST /api/tool-approve", m.ApproveHandler(cfg))
	// (A host with a runner has it take the decisions: runner.Runner.Decide.)
	// This example has one user and no network: anyone may decide.
	handler := m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller})
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
	ticket, _ := m.Request(context.Background(), req)

	// The browser approves at once (an auto-approve hit), before the agent
	// waits: the decision is kept. It names the call it saw on the card:
	// call id, tool and the digest of the arguments.
	approved := true
	body, _ := json.Marshal(approval.ApproveRequest{
		SessionID: "s1", ApprovalID: ticket.ApprovalID(),
		CallID: req.Call.ID, Tool: req.Call.Name, ArgumentsDigest: agent.ArgumentsDigest(req.Call.Arguments),
		Approved: &approved,
	})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, post(string(body)))
	fmt.Print(rec.Code, " ", rec.Body.String())

	// The agent waits and gets the decision.
	d, err := ticket.Wait(context.Background())
	fmt.Println("approved:", d.Approved, err)

	// The same card answered again is stale.
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, post(string(body)))
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
// cookie gets 401, one of another owner 403, and the approval stays
// pending. The principal Authorize returns is the decision's By, as the
// audit records it.
func ExampleHandlerConfig() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	owners := map[string]string{"s1": "alice"} // session -> owner, kept by the host
	cfg := approval.HandlerConfig{Authorize: func(r *http.Request, sessionID string) (string, error) {
		c, err := r.Cookie("owner")
		if err != nil {
			return "", fmt.Errorf("%w: no owner cookie", approval.ErrUnauthenticated)
		}
		if owners[sessionID] != c.Value {
			return "", errors.New("not your session")
		}
		return c.Value, nil
	}}
	handler := m.ApproveHandler(cfg)

	req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "call_1", Name: "run_command"}}
	ticket, _ := m.Request(context.Background(), req)
	body := fmt.Sprintf(`{"session_id":"s1","approval_id":%q,"call_id":"call_1","tool":"run_command","arguments_digest":%q,"approved":true}`,
		ticket.ApprovalID(), agent.ArgumentsDigest(req.Call.Arguments))
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
	d, _ := ticket.Wait(context.Background())
	fmt.Println("approved:", d.Approved, "by:", d.By, "via:", d.Via)
	// Output:
	// 401 {"success":false,"error":"approval: not authenticated: no owner cookie"}
	// 403 {"success":false,"error":"not your session"}
	// 200 {"success":true}
	// approved: true by: alice via: http
}

// CancelSession ends every pending approval of a session, also one that
// was registered and not yet waited for.
func ExampleManager_CancelSession() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "call_1", Name: "run_command"}}
	ticket, _ := m.Request(context.Background(), req)

	n, _ := m.CancelSession(context.Background(), "s1")
	fmt.Println("cancelled:", n, "left:", m.Len())
	d, _ := ticket.Wait(context.Background())
	fmt.Printf("approved: %v, cause: %s, reason: %q\n", d.Approved, d.Cause, d.Reason)
	// Output:
	// cancelled: 1 left: 0
	// approved: false, cause: approval_interrupted, reason: "interrupted while waiting for approval"
}

// Approve read-only tools at once, never run "rm", and ask about the rest
// (here a Manager that a browser answers; the browser's answer with scope
// "always" is remembered by the AllowList). Every decision, the policies'
// too, is in the Manager's audit trail.
func ExampleChain() {
	m, _ := approval.NewManager(approval.ManagerConfig{})
	grants := approval.NewAllowList()
	a := approval.Chain(grants.Wrap(m),
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("rm is never allowed", "rm"),
	)

	ask := func(tool string) {
		req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "c", Name: tool}}
		ticket, _ := a.Request(context.Background(), req)
		if d, ok := ticket.Decision(); ok {
			// A policy decided: the agent shows no card.
			fmt.Println(strings.TrimSpace(fmt.Sprintf("%s: policy, approved=%v %s", tool, d.Approved, d.Reason)))
			return
		}
		// The card is shown; the browser answers it, naming the call it
		// shows.
		cards, _ := m.Pending(context.Background(), "s1")
		m.Respond(context.Background(), cards[0].Reply(agent.Decision{Approved: true, Scope: agent.ScopeAlways, By: "alice"}))
		d, _ := ticket.Wait(context.Background())
		fmt.Printf("%s: asked, approved=%v\n", tool, d.Approved)
	}
	ask("read_file")
	ask("rm")
	ask("run_command")
	ask("run_command")
	fmt.Println("always allowed:", grants.Tools("s1"))
	fmt.Println("pending:", m.Len())
	for r, err := range m.Decisions(context.Background(), approval.DecisionQuery{SessionID: "s1"}) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("audit: %s approved=%v by %s via %s\n", r.Tool, r.Decision.Approved, r.Decision.By, r.Decision.Via)
	}
	// Output:
	// read_file: policy, approved=true
	// rm: policy, approved=false rm is never allowed
	// run_command: asked, approved=true
	// run_command: policy, approved=true
	// always allowed: [run_command]
	// pending: 0
	// audit: read_file approved=true by policy:allow-tools via policy
	// audit: rm approved=false by policy:deny-tools via policy
	// audit: run_command approved=true by alice via http
	// audit: run_command approved=true by policy:allowlist via policy
}

// A CLI asks at the terminal. Here the answers come from a string.
func ExampleTerminal() {
	var out strings.Builder
	term := approval.NewTerminal(strings.NewReader("maybe\nn too risky\n"), &out)
	defer term.Close()
	ticket, _ := term.Request(context.Background(), agent.ApprovalRequest{
		Call: agent.ToolCall{Name: "run_command", Arguments: json.RawMessage(`{"command":"rm -rf build"}`)},
	})
	// The agent has shown the approval_required chunk; now it waits.
	d, err := ticket.Wait(context.Background())
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

// nobody is an Approver whose calls wait for a person who never answers.
type nobody struct{}

func (nobody) Request(context.Context, agent.ApprovalRequest) (agent.Ticket, error) {
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) {
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	}), nil
}

// WithTimeout bounds any approver's wait; the rejection's cause tells the
// timeout apart from a person's rejection.
func ExampleWithTimeout() {
	ticket, _ := approval.WithTimeout(nobody{}, 1).Request(context.Background(), agent.ApprovalRequest{})
	d, _ := ticket.Wait(context.Background())
	fmt.Printf("%s: %q\n", d.Cause, d.Reason)
	// Output:
	// timeout: "approval timed out after 1ns"
}

// Two replicas of a service share one store: here a MemStore, which is also
// the Notifier between them within this process (in production, the
// PostgreSQL store for both). The run waits on replica A; the person's
// click lands on replica B; A's Wait gets the decision at once. B has no
// run waiting for it, so its OnDecided hears of it: a host would try to
// resume the turn there, and the session's lease would tell it that A
// drives it.
func ExampleManager_replicas() {
	st := &memory.MemStore{}
	resumeOnB := make(chan string, 1)
	a, err := approval.NewManager(approval.ManagerConfig{Store: st, Notifier: st})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := approval.NewManager(approval.ManagerConfig{
		Store:     st,
		Notifier:  st,
		OnDecided: func(ap memory.Approval) { resumeOnB <- ap.SessionID },
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	req := agent.ApprovalRequest{
		SessionID: "s1",
		Call:      agent.ToolCall{ID: "call_1", Name: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`)},
	}
	ticket, _ := a.Request(context.Background(), req) // on A, by the agent
	cards, _ := b.Pending(context.Background(), "s1")
	fmt.Println("pending on B:", len(cards))

	pending, _ := b.Respond(context.Background(), cards[0].Reply(agent.Decision{Approved: true})) // on B, from the browser
	d, _ := ticket.Wait(context.Background())                                                     // on A
	fmt.Println("taken:", pending, "approved on A:", d.Approved)
	fmt.Println("B would resume session:", <-resumeOnB)
	// Output:
	// pending on B: 1
	// taken: true approved on A: true
	// B would resume session: s1
}

// A run suspended at its approval (SuspendAfter, or a host shutting down)
// ends; the decision comes later, maybe to another process, and the resumed
// turn asks again about the call, with the same Key: it gets the decision
// at once.
func ExampleManager_suspend() {
	st := &memory.MemStore{}
	m, err := approval.NewManager(approval.ManagerConfig{Store: st, SuspendAfter: time.Hour})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// The agent names the call durably: the stored message and the call id.
	req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "call_1", Name: "deploy"}, Key: "msg_7/call_1"}
	ticket, _ := m.Request(context.Background(), req)

	// The host shuts down: the run's context ends with ErrSuspended.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(agent.ErrSuspended)
	_, err = ticket.Wait(ctx)
	cards, _ := m.Pending(context.Background(), "s1")
	fmt.Println("suspended:", errors.Is(err, agent.ErrSuspended), "still pending:", len(cards))

	// The person answers the card, after the restart.
	m.Respond(context.Background(), cards[0].Reply(agent.Decision{Reason: "not on a Friday"}))

	// The resumed turn asks again about the call, with the same key.
	again, _ := m.Request(context.Background(), req)
	d, decided := again.Decision()
	fmt.Printf("decided: %v, approved: %v, cause: %s, reason: %s\n", decided, d.Approved, d.Cause, d.Reason)
	// Output:
	// suspended: true still pending: 1
	// decided: true, approved: false, cause: user, reason: not on a Friday
}
