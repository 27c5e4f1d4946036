// Package approval decides whether an agent's tool calls may run: the
// register / wait / respond / cancel service behind a browser's approval
// cards, ready-made approvers and policies, and a terminal prompt.
//
// Every approver here is an [agent.Approver]; they compose by wrapping.
//
// # Manager: approvals answered from elsewhere
//
// A [Manager] holds the approvals that wait for a person. Set it as the
// agent's approver: the agent registers each call ([Manager.Request]) before
// it shows the approval_required chunk, so a decision that arrives the
// instant the card is drawn, such as a browser's auto-approval, is never
// lost. The chunk carries the approval id (agent.ToolCall.ApprovalID) and
// the digest of the arguments it shows (agent.ToolCall.ArgumentsDigest);
// the front end answers with both, and the call's id and tool, through
// [Manager.Respond] (a host with a runner: runner.Runner.Decide, behind the
// handlers of package ui).
//
// A decision is bound to what the person saw: a reply whose session, call
// id, tool or arguments digest is not the approval's is refused
// ([ErrMismatch]), so a decision can never be applied to
// another call, or to other arguments than the card showed. Arguments the
// person edits are checked by the agent against the tool's schema before
// the tool runs.
//
// Approvals belong to a session: a run needs an agent.Input.SessionID, and
// one without is refused at once ([ErrNoSession]) rather than left to time
// out.
//
// A decision is taken once: the first wins, and Respond reports false for an
// approval that is no longer pending, so a front end can invalidate stale
// cards. A decision for another session's approval is refused. An approval
// that gets no decision within the timeout (300 s by default), counted
// from its creation, is rejected with the cause agent.CauseTimeout.
// [Manager.CancelSession] (which runner.Runner.Stop calls) rejects every pending approval of a session with the cause
// agent.CauseApprovalInterrupted, including one registered but not yet
// waited for.
//
// Waiting costs no goroutine and a few hundred bytes per approval; see
// docs/BENCHMARKS.md in the repository.
//
// # One path: the Store, restarts and replicas
//
// Every approval is a record of the Manager's [ManagerConfig.Store]: a
// memory.MemStore of its own when none is given, the SQLite store across
// restarts, the PostgreSQL one across machines. The record is created
// before the agent shows its card, every decision is taken there, first
// wins across all the processes that share it, and an approval outlives
// the run that asked for it. Forms (package interact) are records of the
// same kind of store, kept and answered the same way.
//
//   - [ManagerConfig.Notifier] (PostgreSQL's LISTEN/NOTIFY, the SQLite
//     store's notes through its file, or MemStore in one process) carries
//     each decision to the other processes, so a decision posted to any
//     replica wakes the Wait on the replica that runs the turn at once.
//     Such a Manager must be closed ([Manager.Close]).
//   - [ManagerConfig.SuspendAfter] ends a wait that has lasted long enough
//     with agent.ErrSuspended instead of holding the run for hours: the
//     run ends suspended and the approval stays pending.
//   - A decision that no Wait of the process waits for (the run was
//     suspended, or its process died) resumes the turn: a runner (package
//     runner) hears the notes and resumes it; a host without one uses
//     [ManagerConfig.OnDecided]. The resumed turn asks about the same call
//     with the same key (agent.ApprovalRequest.Key) and gets the approval
//     asked before: its decision, or the same card again. There is one
//     approval per call, never a second one beside it.
//
// A run whose context is cancelled with the cause agent.ErrSuspended (a host
// shutting down) leaves its approvals pending; any other end of the wait
// records the approval as interrupted.
//
// # Audit
//
// Every decision keeps who took it (agent.Decision.By: the principal the
// host's authentication knows, "policy:<name>" for a policy's, "timeout"
// or "system"), through what (agent.Decision.Via: [ViaHTTP], [ViaTerminal],
// [ViaPolicy], [ViaTimeout], [ViaSystem]), when, the reason and the edit.
// [Manager.Decisions] iterates over a session's decisions or a time
// range's, from the Store; a policy's decision taken through [Chain] or
// [AllowList.Wrap] over a Manager is recorded there too. The agent adds
// each decision as an event to the call's span.
//
// # Policies and ready approvers
//
// [ApproveAll] and [DenyAll] decide alone. A [Policy] decides or abstains;
// [Chain] asks policies in order and falls back to an approver, so "approve
// the read-only tools, ask a person about the rest" is
//
//	approval.Chain(manager, approval.AllowTools("read_file", "list_dir"))
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
//	approval.Chain(manager, approval.ReadOnlyHints())
//
// runs such tools without a card and asks about everything else, including
// the same tool from an MCP server not configured as trusted. Untrusted
// hints only inform the person who decides ([HintLabels] names them for a
// prompt or a card).
//
// A call with agent.ToolCall.MustAsk (an MCP tool whose definition changed
// since the user approved it) goes to a person whatever the policies say:
// [Chain], [AllowList.Wrap] and the Terminal's "always" never approve it,
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
// [agent.Approver]; every approver of this package passes it.
package approval
