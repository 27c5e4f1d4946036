package person_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// A host sets an Approvals as the agent's approver. The agent calls Request
// before it shows the approval_required chunk and waits with the ticket
// after; the person answers with the chunk's approval id, bound to the call
// the card shows. Here the steps the agent and the person take are written
// out by hand. (A host with a runner has it take the decisions:
// runner.Runner.Decide.)
func ExampleApprovals() {
	m, err := person.StartApprovals(person.ApprovalsConfig{})
	if err != nil {
		panic(err)
	}
	// The agent registers the call; the id travels on the chunk.
	req := agent.ApprovalRequest{
		SessionID: "s1",
		Call:      agent.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
	}
	ticket, _ := m.Request(context.Background(), req)

	// The person approves at once (an auto-approve hit), before the agent
	// waits: the decision is kept. It names the call they saw on the card:
	// call id, tool and the digest of the arguments.
	reply := person.Reply{
		SessionID: "s1", ApprovalID: ticket.ApprovalID(),
		CallID: req.Call.ID, Tool: req.Call.Name, ArgumentsDigest: agent.ArgumentsDigest(req.Call.Arguments),
		Decision: agent.Decision{Approved: true, By: "alice"},
	}
	pending, err := m.Respond(context.Background(), reply)
	fmt.Println("taken:", pending, err)

	// The agent waits and gets the decision.
	d, err := ticket.Wait(context.Background())
	fmt.Println("approved:", d.Approved, "by:", d.By, err)

	// The same card answered again is stale.
	pending, err = m.Respond(context.Background(), reply)
	fmt.Println("taken:", pending, err)
	fmt.Println("pending:", m.Len())
	// Output:
	// taken: true <nil>
	// approved: true by: alice <nil>
	// taken: false <nil>
	// pending: 0
}

// CancelSession ends every pending approval of a session, also one that
// was registered and not yet waited for.
func ExampleApprovals_CancelSession() {
	m, _ := person.StartApprovals(person.ApprovalsConfig{})
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
// (here approvals that a browser answers; the browser's answer with scope
// "always" is remembered by the AllowList, whose policy comes last). Every
// decision, the policies' too, is in the audit trail.
func ExampleApprovals_Approver() {
	m, _ := person.StartApprovals(person.ApprovalsConfig{})
	grants := approval.NewAllowList()
	a := m.Approver(
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("rm is never allowed", "rm"),
		grants.Policy(),
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
		m.Respond(context.Background(), person.ReplyTo(cards[0], agent.Decision{Approved: true, Scope: agent.ScopeAlways, By: "alice"}))
		d, _ := ticket.Wait(context.Background())
		grants.Record(req, d)
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

// Two replicas of a service share one store: here a MemStore, which is also
// the Notifier between them within this process (in production, the
// PostgreSQL store for both). The run waits on replica A; the person's
// click lands on replica B; A's Wait gets the decision at once. B has no
// run waiting for it, so its OnDecided hears of it: a host would try to
// resume the turn there, and the session's lease would tell it that A
// drives it.
func ExampleApprovals_replicas() {
	st := &memory.MemStore{}
	resumeOnB := make(chan string, 1)
	a, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := person.StartApprovals(person.ApprovalsConfig{
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

	pending, _ := b.Respond(context.Background(), person.ReplyTo(cards[0], agent.Decision{Approved: true})) // on B, from the browser
	d, _ := ticket.Wait(context.Background())                                                               // on A
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
func ExampleApprovals_suspend() {
	st := &memory.MemStore{}
	m, err := person.StartApprovals(person.ApprovalsConfig{Store: st, SuspendAfter: time.Hour})
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
	m.Respond(context.Background(), person.ReplyTo(cards[0], agent.Decision{Reason: "not on a Friday"}))

	// The resumed turn asks again about the call, with the same key.
	again, _ := m.Request(context.Background(), req)
	d, decided := again.Decision()
	fmt.Printf("decided: %v, approved: %v, cause: %s, reason: %s\n", decided, d.Approved, d.Cause, d.Reason)
	// Output:
	// suspended: true still pending: 1
	// decided: true, approved: false, cause: user, reason: not on a Friday
}
