package approval

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/planround/planround/agent"
)

// ErrNilApprover is returned by the Request method of a wrapper (such as
// [Chain] or [WithTimeout]) that was given a nil [agent.Approver].
var ErrNilApprover = errors.New("approval: nil Approver")

// ApproveAll returns an [agent.Approver] that approves every call at once,
// as a policy: the agent shows no approval card. It suits tests and trusted
// tools only. It approves a call that must be asked about
// ([agent.ToolCall.MustAsk], such as an MCP tool whose definition changed)
// as well: whoever chose it said yes to everything.
func ApproveAll() agent.Approver {
	return agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Approved: true, By: "policy:approve-all", Via: ViaPolicy}, nil
	})
}

// DenyAll returns an [agent.Approver] that rejects every call at once, as a
// policy ([agent.CausePolicy]), with reason (the cause's
// [agent.Cause.DefaultReason] when empty).
func DenyAll(reason string) agent.Approver {
	return agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Reason: reason, By: "policy:deny-all", Via: ViaPolicy}, nil
	})
}

// A Policy decides a call on its own or abstains. decided is false when the
// policy has no opinion; d is then ignored. A Policy must not block and must
// be safe for concurrent use. Its decisions are a policy's: the agent shows
// no approval card for them, and a rejection has [agent.CausePolicy]. A
// decision names the policy in its By ("policy:<name>", see [Named]) for
// the audit.
type Policy func(ctx context.Context, req agent.ApprovalRequest) (d agent.Decision, decided bool)

// Named returns p with a name for the audit: its decisions that do not say
// who took them get By "policy:<name>" and Via [ViaPolicy].
func Named(name string, p Policy) Policy {
	return func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		d, ok := p(ctx, req)
		if ok && d.By == "" {
			d.By, d.Via = "policy:"+name, ViaPolicy
		}
		return d, ok
	}
}

// AllowTools returns a [Policy] that approves calls of the named tools (for
// example those known to be read-only) and abstains on every other call.
func AllowTools(names ...string) Policy {
	set := toSet(names)
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		_, ok := set[req.Call.Name]
		return agent.Decision{Approved: ok, By: "policy:allow-tools", Via: ViaPolicy}, ok
	}
}

// DenyTools returns a [Policy] that rejects calls of the named tools with
// reason ([agent.CausePolicy]'s [agent.Cause.DefaultReason] when empty) and
// abstains on every other call.
func DenyTools(reason string, names ...string) Policy {
	set := toSet(names)
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		_, ok := set[req.Call.Name]
		return agent.Decision{Reason: reason, By: "policy:deny-tools", Via: ViaPolicy}, ok
	}
}

// ReadOnlyHints returns a [Policy] that approves the calls whose tool says,
// with hints the host trusts, that it only reads, in a closed world, and
// destroys nothing ([agent.ToolHints.SafeToRun]: an MCP tool with
// readOnlyHint true and no openWorldHint true, of a server configured as
// trusted), and abstains on every other call: a destructive or open-world
// tool, a tool without hints, hints of an untrusted server, and a call
// that must be asked about ([agent.ToolCall.MustAsk]). It is an opt-in:
//
//	approval.Chain(approval.NewTerminal(os.Stdin, os.Stderr), approval.ReadOnlyHints())
func ReadOnlyHints() Policy {
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		if req.Call.MustAsk || !req.Call.Hints.SafeToRun() {
			return agent.Decision{}, false
		}
		return agent.Decision{Approved: true, By: "policy:read-only-hints", Via: ViaPolicy}, true
	}
}

func toSet(names []string) map[string]struct{} {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set
}

// Chain returns an [agent.Approver] that asks the policies in order and
// returns the decision of the first one that decides, as a decided ticket
// (no approval card); when none does it passes the request to next and
// returns next's ticket. A nil policy is skipped. A nil next fails the
// requests no policy decided with [ErrNilApprover].
//
// Use it for "approve the read-only tools, ask a person about the rest":
//
//	approval.Chain(approval.NewTerminal(os.Stdin, os.Stderr), approval.AllowTools("read_file", "list_dir"))
//
// A call that must be asked about ([agent.ToolCall.MustAsk]) is never
// approved by a policy: a policy's approval of it counts as abstaining, and
// next asks (a policy's rejection stands).
//
// next is asked only about the calls no policy decided, so nothing is
// registered with it for the others. Chain keeps nothing: a policy's
// decision is the ticket it returns, which the agent adds to the call's
// span (a runner records its policies' decisions, Config.Policies, in its
// audit trail itself). The returned Approver passes CancelApproval
// (agent.ApprovalCanceler) on to next, and is safe for concurrent use when
// the policies and next are.
func Chain(next agent.Approver, policies ...Policy) agent.Approver {
	return &chain{next: next, policies: slices.Clone(policies)}
}

// chain is the Approver of [Chain], [AllowList.Wrap] and [WithTimeout].
type chain struct {
	next     agent.Approver
	policies []Policy
	// timeout, when positive, bounds the wait for next's decision.
	timeout time.Duration
	// after, when not nil, sees every decision next returned without
	// error.
	after func(agent.ApprovalRequest, agent.Decision)
}

func (c *chain) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	for _, p := range c.policies {
		if p == nil {
			continue
		}
		if d, ok := p(ctx, req); ok {
			if d.Approved && req.Call.MustAsk {
				continue // for a person to decide
			}
			return agent.Decided(d), nil
		}
	}
	if c.next == nil {
		return agent.Ticket{}, ErrNilApprover
	}
	t, err := c.next.Request(ctx, req)
	if err != nil || (c.timeout <= 0 && c.after == nil) {
		return t, err
	}
	if d, ok := t.Decision(); ok {
		// next decided at once: there is nothing to wait for, or to time.
		c.record(req, d, nil)
		return t, nil
	}
	return agent.Pending(t.ApprovalID(), func(ctx context.Context) (agent.Decision, error) {
		d, err := c.wait(ctx, t)
		c.record(req, d, err)
		return d, err
	}), nil
}

// CancelApproval implements agent.ApprovalCanceler for the wrappers of this
// package: it passes the call to next when next is an ApprovalCanceler,
// and does nothing otherwise.
func (c *chain) CancelApproval(ctx context.Context, sessionID, approvalID string) error {
	if ac, ok := c.next.(agent.ApprovalCanceler); ok {
		return ac.CancelApproval(ctx, sessionID, approvalID)
	}
	return nil
}

// record shows c.after a decision next returned without error.
func (c *chain) record(req agent.ApprovalRequest, d agent.Decision, err error) {
	if err == nil && c.after != nil {
		c.after(req, d)
	}
}

// wait waits for t, next's ticket, within c.timeout when it is set.
func (c *chain) wait(ctx context.Context, t agent.Ticket) (agent.Decision, error) {
	if c.timeout <= 0 {
		return t.Wait(ctx)
	}
	errTimedOut := errors.New("approval timed out")
	tctx, cancel := context.WithTimeoutCause(ctx, c.timeout, errTimedOut)
	defer cancel()
	d, err := t.Wait(tctx)
	if ctx.Err() == nil && context.Cause(tctx) == errTimedOut && (err != nil || d.Cause == agent.CauseApprovalInterrupted) {
		// Our timer, not the caller, ended the wait.
		return timedOut(c.timeout), nil
	}
	return d, err
}

// WithTimeout returns an [agent.Approver] that gives a its answer within d:
// when a pending ticket of a is not decided after d, the call is rejected
// with [agent.CauseTimeout]. a must honour the end of its context, as every
// Approver must. A non-positive d means no timeout.
//
// The returned Approver passes a's tickets through; the time counts from the
// start of their Wait.
func WithTimeout(a agent.Approver, d time.Duration) agent.Approver {
	return &chain{next: a, timeout: d}
}
