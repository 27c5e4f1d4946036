package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// ApprovalRequest is what an [Approver] decides on: one tool call of one run.
type ApprovalRequest struct {
	// SessionID is the run's session ([Input.SessionID]); empty for a run
	// without one.
	SessionID string
	// Round is the tool round the call belongs to.
	Round int
	// Call is the call: ID, Name, the complete, valid JSON Arguments and
	// their ArgumentsDigest, the one the approval_required chunk shows.
	Call ToolCall
	// Key names the call durably when the run keeps open-call records
	// (a Config.Store that is a memory.CallLog): the same key for the same
	// call in every turn that asks about it, the first and the resumed
	// ones ("<stored message id>/<call id>"); empty otherwise. A durable
	// Approver keeps one approval per key (a runner's approvals do): a
	// resumed turn that asks again about a call gets the approval asked
	// before, decided meanwhile or not, and never a second one beside it.
	Key string
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

// Decision is an approval's outcome.
type Decision struct {
	// Approved is true when the call may run.
	Approved bool `json:"approved"`
	// Reason says why; for a rejection it becomes the tool message the
	// model reads (a default that fits the Cause is used when empty).
	Reason string `json:"reason,omitempty"`
	// Cause is the kind of a rejection, when the approver knows it better
	// than the agent, such as [CauseTimeout] for a wait nobody answered in
	// time. Empty means the agent's default: [CausePolicy] for a decision
	// of [Decided], [CauseUser] for one a [Pending] ticket waited for. It
	// is ignored when Approved is true.
	Cause Cause `json:"cause,omitempty"`
	// Arguments, when not nil, replace the call's arguments (an edit by the
	// person who approved). They must be a JSON object that fits the
	// tool's parameters, else the call is rejected (CauseApprovalFailed).
	// The tool runs with them, the chunks from executing on show them, and
	// the history stores them in the call's assistant message.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Scope is how far an approval reaches; approvers that remember grants
	// use it. The agent itself treats every decision as ScopeOnce.
	Scope Scope `json:"scope,omitempty"`
	// By is who decided, for the audit: the principal a handler's
	// Authorize returned for a person's decision, "policy:<name>" for a
	// policy's, "timeout" or "system" for one nobody took. Empty when the
	// approver does not say. The agent records it on the call's span.
	By string `json:"by,omitempty"`
	// Via is the channel the decision came through: "http", "terminal",
	// "policy", "timeout", "system" (an interruption or a cancel), or a
	// host's own. Empty when the approver does not say.
	Via string `json:"via,omitempty"`
}

// Approver decides whether a tool call may run.
//
// The agent calls Request for each call that needs approval, before anything
// shows the call as waiting for approval. Request registers the call wherever
// its decision will come from and returns at once with a [Ticket]; it does
// not wait for the decision. The ticket is either
//
//   - [Decided]: a decision taken without asking anybody, such as a policy's.
//     The agent yields no approval_required chunk: an approved call goes on
//     to executing, a rejected one is rejected with [CausePolicy].
//   - [Pending]: the decision comes later, from a person or a service. The
//     agent yields the approval_required chunk, carrying the ticket's
//     approval id for a front end to answer with, then waits with the
//     ticket's Wait. The request was registered before the chunk was
//     yielded, so a decision that arrives at any moment after the chunk is
//     shown has a place to land.
//
// The agent calls Wait exactly once for every pending ticket, also when the
// run ends first (its consumer stopped ranging, or its context was
// cancelled): Wait then gets an already cancelled context, so the approver
// releases what it registered and nothing stays pending after a run.
//
// An Approver that wraps another (to log, to count, to put policies in front)
// calls the wrapped Request and returns its ticket, or a [Pending] ticket
// with the same approval id that waits with the wrapped one's Wait. There is
// no other way to get that ticket, so a wrapper cannot lose the registration.
//
// An error from Request or Wait rejects the call with the error's text
// ([CauseApprovalFailed]); it does not end the run with an error. Request
// and Wait must return promptly when ctx ends. Request may be called from
// several goroutines (for the calls of concurrent runs).
//
// When the run was interrupted while Wait waited, the call never runs. It is
// recorded as interrupted ([CauseApprovalInterrupted]), unless Wait returns
// without error a decision taken before the interrupt came: an approval is
// then recorded as not run ([CauseNotRun]), a rejection with its reason (one
// without a reason cannot be told apart from an answer to the interrupt and
// counts as interrupted).
type Approver interface {
	Request(ctx context.Context, req ApprovalRequest) (Ticket, error)
}

// ApproverFunc adapts a policy, a function that decides at once without
// asking anybody, to [Approver]: Request returns [Decided] with its decision,
// so the agent shows no approval card for the call.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Request returns Decided(f(ctx, req)), or f's error.
func (f ApproverFunc) Request(ctx context.Context, req ApprovalRequest) (Ticket, error) {
	d, err := f(ctx, req)
	if err != nil {
		return Ticket{}, err
	}
	return Decided(d), nil
}

// Ticket is an [Approver]'s answer to a request: a decision taken at once
// ([Decided]), or a pending approval whose decision the agent waits for
// ([Pending]). The zero Ticket is Decided(Decision{}), a rejection.
type Ticket struct {
	approvalID string
	decision   Decision                                    // of a decided ticket
	wait       func(ctx context.Context) (Decision, error) // of a pending ticket
	pending    bool
}

// Decided returns a ticket that holds d, a decision taken without asking
// anybody.
func Decided(d Decision) Ticket { return Ticket{decision: d} }

// Pending returns a ticket for an approval that was registered and waits for
// its decision. approvalID names it for whoever answers (a front end gets it
// on the approval_required chunk); it may be empty when the decision is not
// answered by id, as at a terminal. wait waits for the decision and must
// return promptly when its ctx ends; it is called exactly once (see
// [Approver]).
func Pending(approvalID string, wait func(ctx context.Context) (Decision, error)) Ticket {
	return Ticket{approvalID: approvalID, wait: wait, pending: true}
}

// ApprovalID returns the id of a pending ticket: "" for a decided one.
func (t Ticket) ApprovalID() string { return t.approvalID }

// Decision returns the decision of a ticket made by [Decided]; ok is false
// for a pending ticket.
func (t Ticket) Decision() (d Decision, ok bool) {
	return t.decision, !t.pending
}

// errNoWait is what Wait returns for a Pending ticket made with a nil wait.
var errNoWait = errors.New("agent: a Pending ticket without a wait function")

// Wait waits for the decision of a pending ticket, and returns the decision
// of a decided one at once. The agent calls it once per ticket; so should a
// wrapper that waits with the ticket of the approver it wraps.
func (t Ticket) Wait(ctx context.Context) (Decision, error) {
	switch {
	case !t.pending:
		return t.decision, nil
	case t.wait == nil:
		return Decision{}, errNoWait
	}
	return t.wait(ctx)
}
