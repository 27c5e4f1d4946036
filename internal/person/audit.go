package person

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// auditPage is how many records Decisions reads from the Store at a time.
const auditPage = 256

// Decisions returns the audit trail: the decisions on approvals that q
// selects, oldest first, read from the Store page by page as the loop
// goes. Every decision is there: a person's (through a handler, with the
// principal the host's authentication knows), a policy's taken through
// [Approvals.Approver] ("policy:<name>"), a timeout, an
// interruption. A Store that fails ends the sequence with its error.
func (m *Approvals) Decisions(ctx context.Context, q approval.DecisionQuery) iter.Seq2[approval.DecisionRecord, error] {
	return func(yield func(approval.DecisionRecord, error) bool) {
		mq := memory.DecisionQuery{SessionID: q.SessionID, Kind: memory.KindApproval, Since: q.Since, Until: q.Until, Limit: auditPage}
		for {
			page, err := m.core.Store().Decisions(ctx, mq)
			if err != nil {
				yield(approval.DecisionRecord{}, fmt.Errorf("approval: read the decisions: %w", err))
				return
			}
			for _, a := range page {
				if !yield(recordFrom(a), nil) {
					return
				}
			}
			if len(page) < auditPage {
				return
			}
			last := page[len(page)-1]
			mq.Since, mq.AfterID = last.DecidedAt, last.ID
		}
	}
}

// recordFrom returns the audit record of the decided approval a.
func recordFrom(a memory.Approval) approval.DecisionRecord {
	return approval.DecisionRecord{
		ApprovalID: a.ID, SessionID: a.SessionID, CallID: a.CallID, Tool: a.Tool, Round: a.Round,
		Arguments: a.Arguments, ArgumentsDigest: digestOf(a),
		Decision: DecodeDecision(a.Decision), Asked: a.CreatedAt, Decided: a.DecidedAt,
	}
}

// recordDecision records the policy's decision d on req in the Store for
// the audit, and returns the decision that stands: when req's Key names an
// approval the session has (a resumed turn), a decision taken on it before
// stands (a policy never overrules a person), and a pending one is decided
// with d.
func (m *Approvals) recordDecision(ctx context.Context, req agent.ApprovalRequest, d agent.Decision) (agent.Decision, error) {
	if req.SessionID == "" {
		return d, nil // nothing to keep it under; the policy's decision stands
	}
	if d.Via == "" {
		d.Via = approval.ViaPolicy
	}
	if d.By == "" {
		d.By = "policy:unnamed"
	}
	a, err := m.core.Record(ctx, recordOf(req), EncodeDecision(d))
	if err != nil {
		return agent.Decision{}, fmt.Errorf("approval: record the policy's decision on call %s: %w", req.Call.ID, err)
	}
	if a.Decision.Channel != approval.ViaPolicy {
		return resumedDecision(a.Decision), nil // a person's, taken before the turn resumed
	}
	return DecodeDecision(a.Decision), nil
}

// Approver returns the agent.Approver of the runs: it asks the policies in
// order and returns the decision of the first one that decides, as a
// decided ticket (no approval card), recorded in the Store for the audit
// ([Approvals.Decisions]); when none decides it registers the call with a
// ([Approvals.Request]) for a person to decide. A nil policy is skipped.
//
// A call that must be asked about ([agent.ToolCall.MustAsk]) is never
// approved by a policy: a policy's approval of it counts as abstaining (a
// policy's rejection stands). When the call was asked about before (a
// resumed turn whose request names an approval the Store has, by its Key),
// the decision taken on that approval stands: a policy never overrules a
// person. The Approver passes CancelApproval (agent.ApprovalCanceler) on to
// a.
func (m *Approvals) Approver(policies ...approval.Policy) agent.Approver {
	return &policyStage{m: m, policies: slices.Clone(policies)}
}

// policyStage is the Approver of [Approvals.Approver].
type policyStage struct {
	m        *Approvals
	policies []approval.Policy
}

func (p *policyStage) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	for _, pol := range p.policies {
		if pol == nil {
			continue
		}
		d, ok := pol(ctx, req)
		if !ok {
			continue
		}
		if d.Approved && req.Call.MustAsk {
			continue // for a person to decide
		}
		d, err := p.m.recordDecision(ctx, req, d)
		if err != nil {
			return agent.Ticket{}, err
		}
		return agent.Decided(d), nil
	}
	return p.m.Request(ctx, req)
}

// CancelApproval implements agent.ApprovalCanceler.
func (p *policyStage) CancelApproval(ctx context.Context, sessionID, approvalID string) error {
	return p.m.CancelApproval(ctx, sessionID, approvalID)
}
