// Package person holds the waiting services of the person in the loop,
// which the runner (package runner) builds on its store: [Approvals], the
// approvals that wait for a person's decision, with their audit trail and
// the policy stage in front of them ([Approvals.Approver]), and [Forms],
// the forms of ask_user_question and MCP servers' requests for input that
// wait for a person's answers (the runs' interact.Asker).
//
// Both are records of a memory.ApprovalStore, on the waiting core of
// internal/waiting: created before the agent shows them, decided there
// (the first decision wins across the processes that share the store),
// outliving the run that asked, so a run can suspend while it waits and
// resume on the answer, in any process.
//
// The package is the runner's own: outside tests only package runner uses
// it (and the conformance kits approvaltest and upgradetest, whose users
// are tests), so that approval and interact keep only what decides or asks
// without a store, and the vocabulary users see (approval.PendingApproval,
// approval.DecisionRecord, interact.PendingForm, their errors). The tests
// of agent, mcpclient, interact and demo use it as a real person.
package person
