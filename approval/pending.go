package approval

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/planround/planround/agent"
)

// DefaultTimeout is how long an approval of a runner (package runner) waits
// for a decision when its Config.ApprovalTimeout is zero.
const DefaultTimeout = 300 * time.Second

// The channels a decision comes through (agent.Decision.Via), as the audit
// records them.
const (
	ViaHTTP     = "http"     // a host's own HTTP handler
	ViaTerminal = "terminal" // a person at the terminal the run is ranged in
	ViaPolicy   = "policy"   // a Policy, without asking anybody
	ViaTimeout  = "timeout"  // nobody decided within the timeout
	ViaSystem   = "system"   // an interruption, a cancelled session, a new user message
)

// Errors of the approvals a runner (package runner) keeps: of its Decide,
// and of the calls its runs register.
var (
	// ErrWrongSession is returned for a decision on an approval id that
	// belongs to another session. The approval stays pending.
	ErrWrongSession = errors.New("approval: approval id belongs to another session")
	// ErrMismatch is wrapped by the error of a decision that does not name
	// the call the approval shows: another call id, another tool, or
	// arguments with another digest (or none of them: a decision must say
	// what it decides). The approval stays pending.
	ErrMismatch = errors.New("approval: the decision is not for the call the approval shows")
	// ErrInvalidArguments is returned for a decision whose edited
	// Arguments are not a JSON object. The approval stays pending.
	ErrInvalidArguments = errors.New("approval: edited arguments must be a JSON object")
	// ErrInvalidScope is returned for a decision whose Scope is not one of
	// the agent.Scope constants.
	ErrInvalidScope = errors.New("approval: unknown scope")
	// ErrAlreadyWaiting is returned by the Wait of a pending ticket that
	// was called before: a ticket is waited for once.
	ErrAlreadyWaiting = errors.New("approval: Wait called twice for one approval")
	// ErrNoSession is wrapped by the error of a request without a session
	// id: approvals are answered, listed and cancelled per session, so one
	// registered without a session could only time out.
	ErrNoSession = errors.New("approval: the request has no session id")
)

// PendingApproval describes an approval that waits for a decision, as a
// runner lists it (runner.Runner.Pending).
type PendingApproval struct {
	// ApprovalID is the approval id a front end answers with, as on the
	// approval_required chunk (agent.ToolCall.ApprovalID).
	ApprovalID string `json:"approval_id"`
	// SessionID is the run's session.
	SessionID string `json:"session_id"`
	// Round is the tool round of the call.
	Round int `json:"round"`
	// Call is the tool call waiting for approval; its ArgumentsDigest is
	// set.
	Call agent.ToolCall `json:"call"`
	// Created is when the approval was registered.
	Created time.Time `json:"created"`
}

// DecisionRecord is one decision of the audit trail (runner.Runner.Decisions):
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
	// (Arguments), Scope, who took it (By: the principal the host's
	// authentication knows, "policy:<name>", "timeout" or "system") and
	// through what (Via: [ViaHTTP], [ViaTerminal], [ViaPolicy],
	// [ViaTimeout], [ViaSystem] or a host's own).
	Decision agent.Decision `json:"decision"`
	// Asked is when the approval was created, Decided when it was decided.
	Asked   time.Time `json:"asked"`
	Decided time.Time `json:"decided"`
}

// DecisionQuery selects the decisions of the audit trail
// (runner.Runner.Decisions): one session's (SessionID), or every
// session's within a time range of their decision (Since <= decided <
// Until; a zero time leaves that end open), or both.
type DecisionQuery struct {
	SessionID    string
	Since, Until time.Time
}

// timedOut is the decision of an approval nobody answered within d.
func timedOut(d time.Duration) agent.Decision {
	return agent.Decision{Reason: "approval timed out after " + d.String(), Cause: agent.CauseTimeout, By: ViaTimeout, Via: ViaTimeout}
}

// cancelled is the decision of an approval whose wait was interrupted.
func cancelled() agent.Decision {
	return agent.Decision{Reason: agent.CauseApprovalInterrupted.DefaultReason(), Cause: agent.CauseApprovalInterrupted, By: ViaSystem, Via: ViaSystem}
}
