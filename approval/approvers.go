package approval

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/planround/planround/agent"
)

// ErrNilApprover is returned by the Approve method of a wrapper (such as
// [Chain] or [WithTimeout]) that was given a nil [agent.Approver].
var ErrNilApprover = errors.New("approval: nil Approver")

// ReasonDenied is the reason [DenyAll] and [DenyTools] use when given an
// empty one.
const ReasonDenied = "denied by policy"

// ApproveAll returns an [agent.Approver] that approves every call at once.
// It suits tests and trusted tools only.
func ApproveAll() agent.Approver {
	return agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Approved: true}, nil
	})
}

// DenyAll returns an [agent.Approver] that rejects every call at once with
// reason ([ReasonDenied] when empty).
func DenyAll(reason string) agent.Approver {
	if reason == "" {
		reason = ReasonDenied
	}
	return agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Reason: reason}, nil
	})
}

// A Policy decides a call on its own or abstains. decided is false when the
// policy has no opinion; d is then ignored. A Policy must not block and must
// be safe for concurrent use.
type Policy func(ctx context.Context, req agent.ApprovalRequest) (d agent.Decision, decided bool)

// AllowTools returns a [Policy] that approves calls of the named tools (for
// example those known to be read-only) and abstains on every other call.
func AllowTools(names ...string) Policy {
	set := toSet(names)
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		_, ok := set[req.Call.Name]
		return agent.Decision{Approved: ok}, ok
	}
}

// DenyTools returns a [Policy] that rejects calls of the named tools with
// reason ([ReasonDenied] when empty) and abstains on every other call.
func DenyTools(reason string, names ...string) Policy {
	if reason == "" {
		reason = ReasonDenied
	}
	set := toSet(names)
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		_, ok := set[req.Call.Name]
		return agent.Decision{Reason: reason}, ok
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
// returns the decision of the first one that decides; when none does it asks
// next. A nil policy is skipped. A nil next rejects the calls no policy
// decided, with the error [ErrNilApprover].
//
// Use it for "approve the read-only tools, ask a person about the rest":
//
//	approval.Chain(manager, approval.AllowTools("read_file", "list_dir"))
//
// # Preparer
//
// The returned Approver implements [agent.Preparer] exactly when next does.
// Prepare is then forwarded to next, so a decision for next (a browser's) is
// never lost. When a policy decides a prepared call, Chain still calls
// next.Approve once, with an already cancelled context, to release next's
// entry, as the Preparer contract asks; its answer is discarded.
//
// The returned Approver is safe for concurrent use when the policies and next
// are.
func Chain(next agent.Approver, policies ...Policy) agent.Approver {
	return wrap(&chain{next: next, policies: slices.Clone(policies)})
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

func (c *chain) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	for _, p := range c.policies {
		if p == nil {
			continue
		}
		if d, ok := p(ctx, req); ok {
			c.release(req)
			return d, nil
		}
	}
	if c.next == nil {
		return agent.Decision{Reason: ErrNilApprover.Error()}, ErrNilApprover
	}
	d, err := c.ask(ctx, req)
	if err == nil && c.after != nil {
		c.after(req, d)
	}
	return d, err
}

// ask asks next, within c.timeout when it is set.
func (c *chain) ask(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	if c.timeout <= 0 {
		return c.next.Approve(ctx, req)
	}
	errTimedOut := errors.New(TimeoutReason(c.timeout))
	tctx, cancel := context.WithTimeoutCause(ctx, c.timeout, errTimedOut)
	defer cancel()
	d, err := c.next.Approve(tctx, req)
	if err != nil && ctx.Err() == nil && context.Cause(tctx) == errTimedOut {
		// Our timer, not the caller, ended the wait.
		return agent.Decision{Reason: TimeoutReason(c.timeout)}, nil
	}
	return d, err
}

// release keeps the Preparer promise for a prepared call that a policy
// decided: next.Approve is called once with a cancelled context.
func (c *chain) release(req agent.ApprovalRequest) {
	if req.ApprovalID == "" || c.next == nil {
		return
	}
	if _, ok := c.next.(agent.Preparer); !ok {
		return
	}
	release(c.next, req)
}

// release calls a.Approve once with a cancelled context, going past the
// policies and hooks of this package's own wrappers: a released entry's
// decision is discarded, so it must not grant anything either.
func release(a agent.Approver, req agent.ApprovalRequest) {
	for {
		switch c := a.(type) {
		case preparingChain:
			a = c.next
			continue
		case *chain:
			a = c.next
			continue
		}
		break
	}
	if a == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Approve(ctx, req) //nolint:errcheck // the answer to a release is meaningless
}

// preparingChain is a chain whose next is an agent.Preparer.
type preparingChain struct{ *chain }

func (c preparingChain) Prepare(ctx context.Context, req agent.ApprovalRequest) (string, error) {
	return c.next.(agent.Preparer).Prepare(ctx, req)
}

// wrap returns c as an Approver that is a Preparer exactly when c.next is.
func wrap(c *chain) agent.Approver {
	if _, ok := c.next.(agent.Preparer); ok {
		return preparingChain{c}
	}
	return c
}

// WithTimeout returns an [agent.Approver] that gives a its answer within d:
// when a has not decided after d, the call is rejected with the reason
// [TimeoutReason](d), which [IsTimeout] recognises. a must honour the end of
// its context, as every Approver must. A non-positive d means no timeout.
//
// The returned Approver implements [agent.Preparer] exactly when a does, and
// forwards Prepare to it; the time counts from the start of Approve.
func WithTimeout(a agent.Approver, d time.Duration) agent.Approver {
	return wrap(&chain{next: a, timeout: d})
}
