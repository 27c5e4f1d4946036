package agent

import (
	"context"
	"encoding/json"
)

// ApprovalRequest is what an [Approver] decides on: one tool call of one run.
type ApprovalRequest struct {
	// SessionID is the run's session ([Input.SessionID]); empty for a run
	// without one.
	SessionID string
	// ApprovalID is the id a [Preparer] returned for this request; empty
	// when the Approver is not a Preparer.
	ApprovalID string
	// Round is the tool round the call belongs to.
	Round int
	// Call is the call: ID, Name and the complete, valid JSON Arguments.
	Call ToolCall
}

// Scope says how far an approval reaches.
type Scope uint8

const (
	// ScopeOnce approves this call only (the default).
	ScopeOnce Scope = iota
	// ScopeSession approves this tool for the rest of the session.
	ScopeSession
	// ScopeAlways approves this tool from now on.
	ScopeAlways
)

// Decision is an Approver's answer.
type Decision struct {
	// Approved is true when the call may run.
	Approved bool `json:"approved"`
	// Reason says why; for a rejection it becomes the tool message the
	// model reads (a default is used when empty).
	Reason string `json:"reason,omitempty"`
	// Arguments, when not nil, replace the call's arguments (an edit by the
	// person who approved). They must be a JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Scope is how far an approval reaches; approvers that remember grants
	// use it. The agent itself treats every decision as ScopeOnce.
	Scope Scope `json:"scope,omitempty"`
}

// Approver decides whether a tool call may run.
//
// Approve blocks until there is a decision or ctx ends. When ctx ends it
// must return promptly. A non-nil error is treated as a rejection whose
// reason is the error's text ([ReasonRejected] when that is empty), whatever
// the Decision says; it does not end the run with an error. Approve may be
// called from several goroutines for different calls.
//
// When the run was interrupted the call never runs. It is recorded as
// [ReasonApprovalInterrupted], unless Approve returns without error a
// decision taken before the interrupt came: an approval is then recorded as
// [ReasonNotRun], a rejection with its reason (one without a reason cannot be
// told apart from an answer to the interrupt and counts as interrupted).
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to [Approver].
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve calls f(ctx, req).
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// Preparer is an optional interface for an [Approver] whose decisions come
// from elsewhere (a browser, a chat-ops bot) and may arrive at any moment
// after the approval_required chunk was shown.
//
// The agent calls Prepare before it yields the approval_required chunk, so a
// decision that arrives the instant the chunk is shown already has a pending
// entry to land in and is never lost. The returned id is carried on the
// chunk's ToolCall.ApprovalID and in ApprovalRequest.ApprovalID; a front end
// answers with it.
//
// Contract: when Prepare returns without error, the agent calls Approve for
// that request exactly once, even when the run ends in between (the consumer
// stopped ranging, or ctx was cancelled): then Approve gets an already
// cancelled context, so the Preparer can release the entry. When Prepare fails
// the call is rejected with the error's text and Approve is not called.
//
// An Approver that is not a Preparer is simply asked with Approve after the
// chunk was yielded.
type Preparer interface {
	Prepare(ctx context.Context, req ApprovalRequest) (approvalID string, err error)
}
