// Package approval decides whether an agent's tool calls may run:
// ready-made approvers and policies, a terminal prompt, and the vocabulary
// of the approvals a runner keeps for a person to decide.
//
// Every approver here is an [agent.Approver]; they compose by wrapping.
//
// # Approvals answered from elsewhere: the runner
//
// The approvals that wait for a person behind a browser are kept by a
// runner (package runner): the agent registers each call with it before it
// shows the approval_required chunk, so a decision that arrives the instant
// the card is drawn, such as a browser's auto-approval, is never lost. The
// chunk carries the approval id (agent.ToolCall.ApprovalID) and the digest
// of the arguments it shows (agent.ToolCall.ArgumentsDigest); the front end
// answers with both, and the call's id and tool, through
// runner.Runner.Decide (behind the handlers of package ui).
// runner.Runner.Pending lists a session's pending approvals
// ([PendingApproval]) for a front end that reconnects.
//
// A decision is bound to what the person saw: a reply whose session, call
// id, tool or arguments digest is not the approval's is refused
// ([ErrMismatch]), so a decision can never be applied to another call, or
// to other arguments than the card showed. Arguments the person edits are
// checked by the agent against the tool's schema before the tool runs.
//
// Approvals belong to a session: a run needs an agent.Input.SessionID, and
// one without is refused at once ([ErrNoSession]) rather than left to time
// out.
//
// A decision is taken once: the first wins, and runner.Runner.Decide
// reports false for an approval that is no longer pending, so a front end
// can invalidate stale cards. A decision for another session's approval is
// refused ([ErrWrongSession]). An approval that gets no decision within the
// timeout ([DefaultTimeout] unless runner.Config.ApprovalTimeout says
// otherwise), counted from its creation, is rejected with the cause
// agent.CauseTimeout. runner.Runner.Stop rejects every pending approval of
// a session with the cause agent.CauseApprovalInterrupted, including one
// registered but not yet waited for.
//
// Every approval is a record of the runner's store: a memory.MemStore of
// its own when none is given, the SQLite store across restarts, the
// PostgreSQL one across machines. The record is created before the agent
// shows its card, every decision is taken there, first wins across all the
// processes that share it, and an approval outlives the run that asked for
// it: a run that waits long enough (runner.Config.SuspendAfter) ends
// suspended, and the decision, posted to any replica, resumes the turn,
// which gets the approval asked before. Forms (package interact) are
// records of the same store, kept and answered the same way.
//
// Waiting costs no goroutine and a few hundred bytes per approval; see
// docs/BENCHMARKS.md in the repository.
//
// # Audit
//
// Every decision keeps who took it (agent.Decision.By: the principal the
// host's authentication knows, "policy:<name>" for a policy's, "timeout"
// or "system"), through what (agent.Decision.Via: [ViaHTTP], [ViaTerminal],
// [ViaPolicy], [ViaTimeout], [ViaSystem]), when, the reason and the edit.
// runner.Runner.Decisions iterates over a session's decisions or a time
// range's ([DecisionQuery], [DecisionRecord]), from the store; a decision
// of the runner's policies (runner.Config.Policies) is recorded there too,
// and a policy never overrules a decision a person took on the same call
// before (a resumed turn). The agent adds each decision as an event to the
// call's span.
//
// # Policies and ready approvers
//
// [ApproveAll] and [DenyAll] decide alone. A [Policy] decides or abstains;
// [Chain] asks policies in order and falls back to an approver, so "approve
// the read-only tools, ask a person about the rest" is
//
//	approval.Chain(approval.NewTerminal(os.Stdin, os.Stderr), approval.AllowTools("read_file", "list_dir"))
//
// (a runner takes the policies themselves, runner.Config.Policies, and
// asks the person after them).
//
// An [AllowList] remembers grants: tools allowed always or for one session,
// set by the host or learned from decisions whose agent.Decision.Scope is
// agent.ScopeSession or agent.ScopeAlways. [WithTimeout] bounds any
// approver's wait.
//
// A decision of a policy is taken without asking anybody: the agent shows no
// approval card for it, and a rejection has the cause agent.CausePolicy. The
// wrappers ([Chain], [AllowList.Wrap], [WithTimeout]) ask the approver they
// wrap only about the calls no policy decided, and pass its ticket through,
// so a person's approval keeps its registration and its id.
//
// # Hints and calls that must ask
//
// A call carries what its tool says about itself (agent.ToolCall.Hints:
// read-only, destructive, idempotent, open world, and whether the host
// trusts whoever said so). [ReadOnlyHints] is the opt-in policy that acts on
// them: it approves a tool whose trusted hints say read-only and closed
// world, and abstains on the rest, so
//
//	approval.Chain(approval.NewTerminal(os.Stdin, os.Stderr), approval.ReadOnlyHints())
//
// runs such tools without a card and asks about everything else, including
// the same tool from an MCP server not configured as trusted. Untrusted
// hints only inform the person who decides ([HintLabels] names them for a
// prompt or a card).
//
// A call with agent.ToolCall.MustAsk (an MCP tool whose definition changed
// since the user approved it) goes to a person whatever the policies say:
// [Chain], [AllowList.Wrap], a runner's policies and the Terminal's
// "always" never approve it,
// though a policy may still reject it. Only [ApproveAll], whose user said
// yes to everything, approves it at once. Its agent.ToolCall.Details say
// what the person decides on.
//
// # Terminal
//
// A [Terminal] asks at a terminal: approve [y], reject [n] with an optional
// reason, or always approve the tool [a]. It is what a CLI agent uses.
//
// # Conformance
//
// Package approvaltest checks that an Approver honours the contract of
// [agent.Approver]; every approver of this package passes it. Its RunStore
// checks a memory.ApprovalStore under the approvals a runner keeps on it.
package approval
