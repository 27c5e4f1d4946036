package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// Approve read-only tools at once, never run "rm", and ask a person about
// the rest (here a function stands for the person, who approves with scope
// "always": the AllowList remembers it, and is not asked again). A
// decision says who took it: a policy, or the person.
func ExampleChain() {
	asked := 0
	alice := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		asked++
		return agent.Decision{Approved: true, Scope: agent.ScopeAlways, By: "alice"}, nil
	})
	grants := approval.NewAllowList()
	a := approval.Chain(grants.Wrap(alice),
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("rm is never allowed", "rm"),
	)
	for _, tool := range []string{"read_file", "rm", "run_command", "run_command"} {
		req := agent.ApprovalRequest{SessionID: "s1", Call: agent.ToolCall{ID: "c", Name: tool}}
		ticket, _ := a.Request(context.Background(), req)
		d, _ := ticket.Wait(context.Background())
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s: approved=%v by %s %s", tool, d.Approved, d.By, d.Reason)))
	}
	fmt.Println("always allowed:", grants.Tools("s1"), "asked:", asked)
	// Output:
	// read_file: approved=true by policy:allow-tools
	// rm: approved=false by policy:deny-tools rm is never allowed
	// run_command: approved=true by alice
	// run_command: approved=true by policy:allowlist
	// always allowed: [run_command] asked: 1
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
