package person_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
)

func startApprovals(t *testing.T, cfg person.ApprovalsConfig) *person.Approvals {
	t.Helper()
	m, err := person.StartApprovals(cfg)
	if err != nil {
		t.Fatalf("StartApprovals: %v", err)
	}
	return m
}

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

// reply returns the reply that gives d to approval id of session, bound to
// the call of req (its call id, tool and arguments digest), as a front end
// that shows req's card sends it.
func reply(session, id string, req agent.ApprovalRequest, d agent.Decision) person.Reply {
	return person.Reply{SessionID: session, ApprovalID: id, CallID: req.Call.ID, Tool: req.Call.Name,
		ArgumentsDigest: agent.ArgumentsDigest(req.Call.Arguments), Decision: d}
}

// respond gives d to approval id of session through m.Respond, bound to
// the call of req.
func respond(m *person.Approvals, session, id string, req agent.ApprovalRequest, d agent.Decision) (bool, error) {
	return m.Respond(context.Background(), reply(session, id, req, d))
}

// cancelSession cancels the pending approvals of session and returns how
// many; a Store error fails t.
func cancelSession(t testing.TB, m *person.Approvals, session string) int {
	t.Helper()
	n, err := m.CancelSession(context.Background(), session)
	if err != nil {
		t.Errorf("CancelSession(%q): %v", session, err)
	}
	return n
}

// pendingList lists the pending approvals of session; a Store error fails t.
func pendingList(t testing.TB, m *person.Approvals, session string) []approval.PendingApproval {
	t.Helper()
	list, err := m.Pending(context.Background(), session)
	if err != nil {
		t.Errorf("Pending(%q): %v", session, err)
	}
	return list
}

// byPerson returns d as decided by a person without a principal nor a
// channel: Respond fills in By "unknown" and Via "http".
func byPerson(d agent.Decision) agent.Decision {
	d.By, d.Via = "unknown", approval.ViaHTTP
	return d
}

// timedOut is the decision of an approval nobody answered within d.
func timedOut(d string) agent.Decision {
	return agent.Decision{Reason: "approval timed out after " + d, Cause: agent.CauseTimeout, By: approval.ViaTimeout, Via: approval.ViaTimeout}
}

// keyed returns request(session, i) with a Key, as the agent asks when the
// run keeps open-call records: a resumed turn asks again with the same key.
func keyed(session string, i int) agent.ApprovalRequest {
	r := request(session, i)
	r.Key = fmt.Sprintf("msg_1/call_%d", i)
	return r
}
