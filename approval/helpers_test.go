package approval_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

func request(session string, i int) agent.ApprovalRequest {
	args, _ := json.Marshal(map[string]int{"n": i})
	return agent.ApprovalRequest{
		SessionID: session,
		Round:     1,
		Call: agent.ToolCall{
			ID:        fmt.Sprintf("call_%d", i),
			Name:      "run_command",
			State:     agent.StateApprovalRequired,
			Arguments: args,
		},
	}
}

// outcome is what a ticket's Wait returned.
type outcome struct {
	d   agent.Decision
	err error
}

// decide asks a about req and waits for the decision, as the agent does.
func decide(ctx context.Context, a agent.Approver, req agent.ApprovalRequest) (agent.Decision, error) {
	tk, err := a.Request(ctx, req)
	if err != nil {
		return agent.Decision{}, err
	}
	return tk.Wait(ctx)
}

// person is an Approver whose decisions come later, from answer, as a
// person's do: its tickets are pending.
type person func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error)

func (p person) Request(_ context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) { return p(ctx, req) }), nil
}

// byPolicy returns d as the named policy of this package takes it.
func byPolicy(name string, d agent.Decision) agent.Decision {
	d.By, d.Via = "policy:"+name, approval.ViaPolicy
	return d
}

// timedOut is the decision of an approval nobody answered within d.
func timedOut(d string) agent.Decision {
	return agent.Decision{Reason: "approval timed out after " + d, Cause: agent.CauseTimeout, By: approval.ViaTimeout, Via: approval.ViaTimeout}
}

// cancelledDecision is what the Wait of a cancelled approval returns.
var cancelledDecision = agent.Decision{Reason: agent.CauseApprovalInterrupted.DefaultReason(), Cause: agent.CauseApprovalInterrupted,
	By: approval.ViaSystem, Via: approval.ViaSystem}
