package agent

// Cause is the kind of a tool call's rejection, beside the human
// [ToolCall.Reason]: a host branches on the Cause and shows the Reason. In a
// chunk's JSON it is the stable string of its constant ("cause":"timeout").
// Values not listed here may come from a newer version or another source
// and are kept as they are.
type Cause string

// The causes of a rejected tool call.
const (
	// CauseUser: a person rejected the call: a decision a [Pending] ticket
	// waited for, or one taken while no run waited (a suspended turn, a
	// process that stopped) that a resumed turn finds when it asks again,
	// through whatever front end the person used (an HTTP handler, a
	// terminal, a protocol adapter such as ui/aisdk).
	CauseUser Cause = "user"
	// CausePolicy: the approver rejected the call at once, without asking
	// anybody (a [Decided] ticket). No approval_required chunk came first.
	CausePolicy Cause = "policy"
	// CauseTimeout: nobody decided within the approver's time limit.
	CauseTimeout Cause = "timeout"
	// CauseApprovalInterrupted: the run was interrupted, or the approval
	// cancelled, while the call waited for its decision.
	CauseApprovalInterrupted Cause = "approval_interrupted"
	// CauseInterrupted: the run was interrupted while the call ran;
	// [ToolCall.PartialResult] holds what it wrote.
	CauseInterrupted Cause = "interrupted"
	// CauseNotRun: the call never started because the run ended first
	// (after a rejection that ends the run, or an interrupt that came right
	// after its approval).
	CauseNotRun Cause = "not_run"
	// CauseIncomplete: the model's response did not finish (it was
	// interrupted or cut while streaming), so the call's arguments may be
	// incomplete. It never runs and is not in the history.
	CauseIncomplete Cause = "incomplete"
	// CauseInvalidArguments: the call's arguments are not a JSON object.
	// The model reads why, and the run goes on.
	CauseInvalidArguments Cause = "invalid_arguments"
	// CauseUnknownTool: the model called a tool the agent does not have.
	// The model reads so, and the run goes on.
	CauseUnknownTool Cause = "unknown_tool"
	// CauseNoApprover: the tool needs approval and the agent has no
	// [Approver] (a tool added to a shared Config.Tools after New).
	CauseNoApprover Cause = "no_approver"
	// CauseApprovalFailed: the approver failed (an error from Request or
	// Wait, or edited arguments that are not a JSON object), or could not
	// get an answer, as a terminal whose input ended.
	CauseApprovalFailed Cause = "approval_failed"
	// CauseStopped: a call that was running when its process stopped
	// (a crash, a kill): a resumed turn never runs it again, unless its
	// tool is resumable (see [Agent.Resume], [ToolDefinition.Resumable]);
	// a new user message closes it with this cause either way.
	CauseStopped Cause = "stopped"
	// CauseMovedOn: a call still waiting for its approval when a new
	// user message came: the user moved on, and it never runs.
	CauseMovedOn Cause = "moved_on"
)

// DefaultReason is the reason a rejection of cause c carries when nothing
// gave a better one: the text a person and the model read, in
// [ToolCall.Reason] and the call's tool message. A host tells rejections
// apart by their Cause, not by this text; a test or an approver that needs
// the text asks for it here. A cause whose reason is always written for the
// call ([CauseInvalidArguments], [CauseUnknownTool]), and a cause not listed,
// have the default reason of [CauseUser].
func (c Cause) DefaultReason() string {
	switch c {
	case CausePolicy:
		return reasonDenied
	case CauseTimeout:
		return "approval timed out"
	case CauseApprovalInterrupted:
		return reasonApprovalInterrupted
	case CauseInterrupted:
		return reasonInterrupted
	case CauseNotRun:
		return reasonNotRun
	case CauseIncomplete:
		return reasonIncomplete
	case CauseNoApprover:
		return reasonNoApprover
	case CauseApprovalFailed:
		return "approval failed"
	case CauseStopped:
		return reasonStopped
	case CauseMovedOn:
		return reasonMovedOn
	}
	return reasonRejected
}
