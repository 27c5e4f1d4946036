package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// DecisionRecord is one decision of the audit trail ([Manager.Decisions]):
// what was decided, on what the person saw, by whom, when and through what.
type DecisionRecord struct {
	// ApprovalID, SessionID, CallID, Tool and Round name the call.
	ApprovalID string `json:"approval_id"`
	SessionID  string `json:"session_id"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Round      int    `json:"round"`
	// Arguments are the arguments the approval showed, and
	// ArgumentsDigest their digest (agent.ArgumentsDigest). An edit by the
	// person who approved is Decision.Arguments.
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsDigest string          `json:"arguments_digest,omitempty"`
	// Decision is the decision: Approved, Reason, Cause, the edit
	// (Arguments), Scope, who took it (By: the principal a handler's
	// Authorize returned, "policy:<name>", "timeout" or "system") and
	// through what (Via: [ViaHTTP], [ViaTerminal], [ViaPolicy],
	// [ViaTimeout], [ViaSystem] or a host's own).
	Decision agent.Decision `json:"decision"`
	// Asked is when the approval was created, Decided when it was decided.
	Asked   time.Time `json:"asked"`
	Decided time.Time `json:"decided"`
}

// DecisionQuery selects the decisions [Manager.Decisions] returns: one
// session's (SessionID), or every session's within a time range of their
// decision (Since <= decided < Until; a zero time leaves that end open),
// or both.
type DecisionQuery struct {
	SessionID    string
	Since, Until time.Time
}

// auditPage is how many records Decisions reads from the Store at a time.
const auditPage = 256

// Decisions returns the audit trail: the decisions on approvals that q
// selects, oldest first, read from the Store page by page as the loop
// goes. Every decision is there: a person's (through a handler, with the
// principal its Authorize returned), a policy's taken through [Chain] or
// [AllowList.Wrap] over this Manager ("policy:<name>"), a timeout, an
// interruption. A Store that fails ends the sequence with its error.
func (m *Manager) Decisions(ctx context.Context, q DecisionQuery) iter.Seq2[DecisionRecord, error] {
	return func(yield func(DecisionRecord, error) bool) {
		mq := memory.DecisionQuery{SessionID: q.SessionID, Kind: memory.KindApproval, Since: q.Since, Until: q.Until, Limit: auditPage}
		for {
			page, err := m.core.Store().Decisions(ctx, mq)
			if err != nil {
				yield(DecisionRecord{}, fmt.Errorf("approval: read the decisions: %w", err))
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
func recordFrom(a memory.Approval) DecisionRecord {
	return DecisionRecord{
		ApprovalID: a.ID, SessionID: a.SessionID, CallID: a.CallID, Tool: a.Tool, Round: a.Round,
		Arguments: a.Arguments, ArgumentsDigest: digestOf(a),
		Decision: DecodeDecision(a.Decision), Asked: a.CreatedAt, Decided: a.DecidedAt,
	}
}

// recorder is implemented by a Manager, and passed on by the wrappers of
// this package: it records a decision taken without asking anybody.
type recorder interface {
	recordDecision(ctx context.Context, req agent.ApprovalRequest, d agent.Decision) (agent.Decision, error)
}

// recordDecision records the policy's decision d on req in the Store for
// the audit, and returns the decision that stands: when req's Key names an
// approval the session has (a resumed turn), a decision taken on it before
// stands (a policy never overrules a person), and a pending one is decided
// with d.
func (m *Manager) recordDecision(ctx context.Context, req agent.ApprovalRequest, d agent.Decision) (agent.Decision, error) {
	if req.SessionID == "" {
		return d, nil // nothing to keep it under; the policy's decision stands
	}
	if d.Via == "" {
		d.Via = ViaPolicy
	}
	if d.By == "" {
		d.By = "policy:unnamed"
	}
	a, err := m.core.Record(ctx, recordOf(req), EncodeDecision(d))
	if err != nil {
		return agent.Decision{}, fmt.Errorf("approval: record the policy's decision on call %s: %w", req.Call.ID, err)
	}
	if a.Decision.Channel != ViaPolicy {
		return resumedDecision(a.Decision), nil // a person's, taken before the turn resumed
	}
	return DecodeDecision(a.Decision), nil
}
