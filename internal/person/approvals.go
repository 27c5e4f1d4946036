package person

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/waiting"
	"github.com/planround/planround/memory"
)

// ApprovalsConfig configures an [Approvals]. The zero value is ready to use.
type ApprovalsConfig struct {
	// Timeout is how long an approval waits for a decision, counted from
	// its creation (a resumed turn gets no fresh timeout): then it is
	// rejected with [agent.CauseTimeout], and a decision that comes later
	// is refused. Zero means [approval.DefaultTimeout]; negative values are
	// invalid.
	Timeout time.Duration

	// OnRegister, when not nil, is called with every new pending approval
	// (also with a pending one a resumed turn asks about again, whose card
	// is shown again), synchronously, in the goroutine that registered it
	// (the agent's, in Request), after the approval can be answered and
	// before the agent shows the approval_required chunk. It may call
	// [Approvals.Respond] (an auto-approval) but must not block. It must be
	// safe for concurrent use.
	OnRegister func(approval.PendingApproval)

	// Store keeps the approvals and their decisions: the SQLite store
	// across restarts, the PostgreSQL one across machines. Nil means a
	// memory.MemStore of the Approvals' own, which keeps the most recent
	// few thousand decisions for [Approvals.Decisions]. Every approval is
	// created in Store before Request returns, every decision is taken
	// there (the first wins, across all the processes that share Store),
	// and an approval outlives its Wait and its process, so a run can be
	// suspended and resumed (see [agent.ErrSuspended]).
	Store memory.ApprovalStore

	// Notifier, when not nil, carries the Approvals' decisions to the other
	// processes that share Store, and theirs to this one, so that a
	// decision posted to any process wakes the Wait that waits for it at
	// once. It requires Store. An Approvals with a
	// Notifier listens from StartApprovals on and must be closed
	// ([Approvals.Close]).
	Notifier memory.Notifier

	// OnDecided, when not nil, is called with every decision this Approvals
	// learns of for an approval that no ticket of this Approvals waits for:
	// one taken by its own Respond or CancelSession, or one another
	// process took and announced through Notifier. Such a decision
	// belongs to a run that was suspended or whose process stopped; a
	// host that drives its sessions with a runner (package runner) needs
	// none: the runner hears the notes and resumes the turn. OnDecided is
	// called outside the Approvals' locks, at most once per decision in each
	// Approvals, and must not block.
	OnDecided func(a memory.Approval)

	// SuspendAfter, when positive, is how long a ticket's Wait waits for a
	// decision before it gives up for now: it returns
	// [agent.ErrSuspended] and the approval stays pending in Store, to be
	// decided later, in any process (the run ends suspended and is resumed
	// after the decision). Zero means never; a value not shorter than the
	// time left before the timeout has no effect.
	SuspendAfter time.Duration
}

// ReplyTo returns the reply that gives d to p: a decision bound to the call
// p shows.
func ReplyTo(p approval.PendingApproval, d agent.Decision) Reply {
	return Reply{SessionID: p.SessionID, ApprovalID: p.ApprovalID, CallID: p.Call.ID, Tool: p.Call.Name,
		ArgumentsDigest: p.Call.ArgumentsDigest, Decision: d}
}

// Reply is a decision on one approval, bound to what the person deciding
// saw: the approval's session, call id, tool and the digest of its
// arguments (agent.ToolCall.ArgumentsDigest on the approval_required
// chunk). A reply whose binding differs from the approval's is refused.
type Reply struct {
	SessionID  string
	ApprovalID string
	// CallID, Tool and ArgumentsDigest name the call the person saw; all
	// three are required.
	CallID, Tool, ArgumentsDigest string
	// Decision is the decision. Its By (who decided: the principal the
	// host's authentication knows) and Via (through what: [approval.ViaHTTP],
	// [approval.ViaTerminal] or a host's own) go to the audit; Via defaults to
	// [approval.ViaHTTP] when By is set, and By to "unknown".
	Decision agent.Decision
}

// Approvals is the register / wait / respond / cancel service behind an
// approval UI that lives elsewhere, such as a browser.
//
// An Approvals is an [agent.Approver]: set it as the agent's approver and the
// agent registers each call ([Approvals.Request]) before it shows the
// approval_required chunk, then waits with the ticket it got. Decisions come
// in through [Approvals.Respond];
// [Approvals.CancelSession] ends every pending approval of a session.
//
// Every approval is a record of its Store (a MemStore of the Approvals' own
// when none is configured): there is one path, in one process or many.
// Waiting costs no goroutine: a ticket's Wait blocks in its caller's
// goroutine, and the Approvals holds only the approvals its own tickets wait
// for ([Approvals.Len] returns to zero after every run).
//
// All methods are safe for concurrent use.
type Approvals struct {
	core       *waiting.Core
	onRegister func(approval.PendingApproval)
}

// StartApprovals returns an Approvals configured by cfg. It fails when cfg is
// invalid (a negative duration; a Notifier without a Store), and when the
// Notifier cannot listen. An Approvals with a Notifier must be closed with
// [Approvals.Close].
func StartApprovals(cfg ApprovalsConfig) (*Approvals, error) {
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("approval: negative timeout %v", cfg.Timeout)
	case cfg.SuspendAfter < 0:
		return nil, fmt.Errorf("approval: negative SuspendAfter %v", cfg.SuspendAfter)
	case cfg.Notifier != nil && cfg.Store == nil:
		return nil, errors.New("approval: ApprovalsConfig.Notifier needs a Store (the notes name approvals kept there)")
	}
	timeout := cmp.Or(cfg.Timeout, approval.DefaultTimeout)
	core, err := waiting.New(waiting.Config{
		Kind:         memory.KindApproval,
		Store:        cfg.Store,
		Notifier:     cfg.Notifier,
		Timeout:      timeout,
		SuspendAfter: cfg.SuspendAfter,
		OnDecided:    cfg.OnDecided,
		TimedOut:     EncodeDecision(timedOut(timeout)),
		Interrupted:  EncodeDecision(cancelled()),
	})
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return &Approvals{core: core, onRegister: cfg.OnRegister}, nil
}

// Close stops an Approvals with a [ApprovalsConfig.Notifier] from listening for
// the other processes' decisions; no goroutine of the Approvals runs after it
// returned. An Approvals without a Notifier has nothing to close. Close does
// not end the Waits that wait (cancel their runs first). It must not be
// called from OnDecided. Close always returns nil; calling it again does
// nothing.
func (m *Approvals) Close() error {
	m.core.Close()
	return nil
}

// Timeout returns how long an approval waits for a decision.
func (m *Approvals) Timeout() time.Duration { return m.core.Timeout() }

// Len returns the number of approvals this Approvals' tickets hold: waiting
// for a decision, or decided and not yet taken by their Wait. It returns to
// zero when every run has ended.
func (m *Approvals) Len() int { return m.core.Len() }

// timedOut is the decision of an approval nobody answered within d.
func timedOut(d time.Duration) agent.Decision {
	return agent.Decision{Reason: "approval timed out after " + d.String(), Cause: agent.CauseTimeout, By: approval.ViaTimeout, Via: approval.ViaTimeout}
}

// cancelled is the decision of an approval that was cancelled, by
// [Approvals.CancelSession] or because the waiting context ended.
func cancelled() agent.Decision {
	return agent.Decision{Reason: agent.CauseApprovalInterrupted.DefaultReason(), Cause: agent.CauseApprovalInterrupted, By: approval.ViaSystem, Via: approval.ViaSystem}
}

// movedOn is the decision of an approval whose call the agent closed
// because the user moved on (see Approvals.CancelApproval).
func movedOn() agent.Decision {
	return agent.Decision{Reason: agent.CauseMovedOn.DefaultReason(), Cause: agent.CauseMovedOn, By: approval.ViaSystem, Via: approval.ViaSystem}
}

// Request registers req as a pending approval and returns its ticket, which
// carries the approval id a front end answers with. It implements
// [agent.Approver]: the approval is created in the Store before Request
// returns, so a decision for it that comes at any moment after is kept
// until the ticket's Wait takes it.
//
// A request with a Key (agent.ApprovalRequest.Key: a run that keeps
// open-call records) that the Store has an approval for already is a
// resumed turn asking again about the same call: it gets that approval, a
// Decided ticket with its decision when it was decided (a rejection
// without a cause was a person's: [agent.CauseUser]), else a Pending
// ticket with the same id (whose card is shown again).
//
// Request fails, and registers nothing, when ctx has already ended, when
// the Store fails, and with an error wrapping [approval.ErrNoSession] when
// req.SessionID is empty: the agent then rejects the call at once with the
// error's text instead of waiting for a decision nobody can send.
//
// The ticket's Wait returns:
//   - the decision given to [Approvals.Respond], also one given before Wait
//     was called;
//   - a rejection with [agent.CauseApprovalInterrupted] and a nil error when
//     the approval was cancelled ([Approvals.CancelSession]);
//   - a rejection with [agent.CauseTimeout] and a nil error when no decision
//     came within the timeout, counted from the approval's creation;
//   - with [ApprovalsConfig.SuspendAfter], [agent.ErrSuspended] after
//     waiting that long (the approval stays pending), and the same when
//     ctx was cancelled with the cause agent.ErrSuspended (a host that
//     shuts down suspends its runs; the approval stays as it is);
//   - a rejection with [agent.CauseApprovalInterrupted] and ctx.Err() when
//     ctx ended otherwise, also when it had already ended at the call (the
//     release the agent owes for a ticket it no longer waits for); the
//     approval is then recorded as interrupted and a later decision is
//     refused.
//
// Whichever of these happens first wins. Wait is called once: a second
// call returns [approval.ErrAlreadyWaiting].
func (m *Approvals) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return agent.Ticket{}, err
	}
	if req.SessionID == "" {
		return agent.Ticket{}, fmt.Errorf("%w (set agent.Input.SessionID: approvals are answered per session)", approval.ErrNoSession)
	}
	w, existing, err := m.core.Open(ctx, recordOf(req))
	if err != nil {
		return agent.Ticket{}, fmt.Errorf("approval: store the approval of call %s: %w", req.Call.ID, err)
	}
	if w.Record.Decided {
		return agent.Decided(resumedDecision(w.Record.Decision)), nil
	}
	p := pendingOf(*w.Record)
	if !existing {
		p.Round, p.Call = req.Round, req.Call // as asked, not as stored
		p.Call.ApprovalID, p.Call.ArgumentsDigest = w.Record.ID, w.Record.Digest
	}
	if m.onRegister != nil {
		m.onRegister(p)
	}
	id := w.Record.ID
	w.Record = nil // the store has it: a run paused here holds only its Wait
	return agent.Pending(id, func(ctx context.Context) (agent.Decision, error) {
		a, err := w.Wait(ctx)
		switch {
		case errors.Is(err, waiting.ErrAlreadyWaiting):
			return agent.Decision{Reason: approval.ErrAlreadyWaiting.Error()}, approval.ErrAlreadyWaiting
		case err != nil && errors.Is(err, agent.ErrSuspended):
			return agent.Decision{Reason: err.Error()}, err
		}
		return DecodeDecision(a.Decision), err
	}), nil
}

// recordOf returns the Store's record of a new approval for req.
func recordOf(req agent.ApprovalRequest) memory.Approval {
	digest := agent.ArgumentsDigest(req.Call.Arguments)
	if req.Call.ArgumentsDigest == digest {
		// The agent's own: the record keeps that string, not a second
		// copy of it, while it waits.
		digest = req.Call.ArgumentsDigest
	}
	return memory.Approval{
		SessionID: req.SessionID,
		CallID:    req.Call.ID,
		Tool:      req.Call.Name,
		Arguments: req.Call.Arguments,
		Digest:    digest,
		Round:     req.Round,
		Key:       req.Key,
	}
}

// digestOf returns the digest of the stored approval a's arguments: the
// one stored with it, or, for a record stored without one (by a version
// from before records kept digests, whose pending approvals outlive the
// upgrade), the digest of its stored arguments, which are those its card
// shows.
func digestOf(a memory.Approval) string {
	if a.Digest != "" {
		return a.Digest
	}
	return agent.ArgumentsDigest(a.Arguments)
}

// pendingOf returns how Pending lists the stored approval a.
func pendingOf(a memory.Approval) approval.PendingApproval {
	return approval.PendingApproval{
		ApprovalID: a.ID,
		SessionID:  a.SessionID,
		Round:      a.Round,
		Call: agent.ToolCall{
			ID:               a.CallID,
			Name:             a.Tool,
			State:            agent.StateApprovalRequired,
			Arguments:        a.Arguments,
			ApprovalRequired: true,
			ApprovalID:       a.ID,
			ArgumentsDigest:  digestOf(a),
		},
		Created: a.CreatedAt,
	}
}

// resumedDecision is the decision of a Decided ticket for an approval that
// was decided before the turn resumed: a rejection without a cause was a
// person's, not a policy's.
func resumedDecision(d memory.ApprovalDecision) agent.Decision {
	out := DecodeDecision(d)
	if !out.Approved && out.Cause == "" {
		out.Cause = agent.CauseUser
	}
	return out
}

// Respond gives the decision r.Decision to the pending approval
// r.ApprovalID of session r.SessionID, bound to the call r names. It
// reports whether the approval was pending: false means the id is unknown,
// was already answered, timed out or was cancelled (a stale card); the
// first decision wins, in every process that shares the Store, and later
// ones change nothing. A decision that comes after the approval's timeout
// is refused (false) and the approval is recorded as timed out.
//
// Respond fails, and leaves the approval pending, with [approval.ErrWrongSession]
// when the id belongs to another session, with an error wrapping
// [approval.ErrMismatch] when r's call id, tool or arguments digest is not the
// approval's (fail closed: a decision is taken only for what the person
// saw; an approval stored without a digest, by a version before digests,
// is bound to the digest of its stored arguments, which its card shows), with [approval.ErrInvalidArguments] when the edited d.Arguments are not a
// JSON object, with [approval.ErrInvalidScope] for an unknown scope, and when the
// Store fails. The decision wakes the Wait of this Approvals that waits for
// the approval or, when none does, goes to [ApprovalsConfig.OnDecided]; it
// is announced to the other processes through the Notifier (a note that
// cannot be sent is no error: a waiter finds the decision in the Store
// when it suspends or times out). ctx bounds the Store calls.
func (m *Approvals) Respond(ctx context.Context, r Reply) (pending bool, err error) {
	d := r.Decision
	if d.Scope > agent.ScopeAlways {
		return false, fmt.Errorf("%w: %d", approval.ErrInvalidScope, d.Scope)
	}
	if d.Arguments != nil {
		if !memory.IsObject(d.Arguments) {
			return false, fmt.Errorf("%w: %s", approval.ErrInvalidArguments, describe(d.Arguments))
		}
		d.Arguments = slices.Clone(d.Arguments)
	}
	if r.CallID == "" || r.Tool == "" || r.ArgumentsDigest == "" {
		return false, fmt.Errorf("%w: the reply names no call id, tool or arguments digest", approval.ErrMismatch)
	}
	if d.By == "" {
		d.By = "unknown"
	}
	if d.Via == "" {
		d.Via = approval.ViaHTTP
	}
	pending, err = m.core.Decide(ctx, r.SessionID, r.ApprovalID, EncodeDecision(d), func(a memory.Approval, _ *memory.ApprovalDecision) error {
		switch {
		case a.CallID != r.CallID:
			return fmt.Errorf("%w: call %q, the approval is for call %q", approval.ErrMismatch, r.CallID, a.CallID)
		case a.Tool != r.Tool:
			return fmt.Errorf("%w: tool %q, the approval is for tool %q", approval.ErrMismatch, r.Tool, a.Tool)
		case digestOf(a) != r.ArgumentsDigest:
			return fmt.Errorf("%w: arguments digest %q, the approval shows arguments with digest %q", approval.ErrMismatch, r.ArgumentsDigest, digestOf(a))
		}
		return nil
	})
	switch {
	case errors.Is(err, waiting.ErrWrongSession):
		return false, approval.ErrWrongSession
	case err != nil && !errors.Is(err, approval.ErrMismatch):
		return false, fmt.Errorf("approval: decide approval %s: %w", r.ApprovalID, err)
	}
	return pending, err
}

func describe(raw []byte) string {
	const limit = 40
	if len(raw) > limit {
		return fmt.Sprintf("%q...", raw[:limit])
	}
	return fmt.Sprintf("%q", raw)
}

// CancelSession rejects every pending approval of sessionID with
// [agent.CauseApprovalInterrupted] (the reason is that cause's
// [agent.Cause.DefaultReason]), in the Store: also those no ticket of this
// Approvals waits for (their decision goes to
// [ApprovalsConfig.OnDecided] and, through the Notifier, to the processes
// that wait), and those registered whose Wait has not started yet (that
// Wait then returns the cancellation at once). Approvals already decided
// keep their decision. It returns the number of approvals it cancelled,
// also when the Store fails for some of them.
func (m *Approvals) CancelSession(ctx context.Context, sessionID string) (int, error) {
	n, err := m.core.CancelSession(ctx, sessionID)
	if err != nil {
		return n, fmt.Errorf("approval: cancel the approvals of session %q: %w", sessionID, err)
	}
	return n, nil
}

// Pending lists the approvals of sessionID that wait for a decision, oldest
// first, so a reconnecting front end can draw their cards again: every
// pending approval of the session in the Store, also those whose run is
// suspended or driven by another process. An approval past its timeout is
// recorded as timed out instead of listed.
func (m *Approvals) Pending(ctx context.Context, sessionID string) ([]approval.PendingApproval, error) {
	list, err := m.core.Pending(ctx, sessionID)
	if err != nil {
		return []approval.PendingApproval{}, fmt.Errorf("approval: list the pending approvals of session %q: %w", sessionID, err)
	}
	out := make([]approval.PendingApproval, len(list))
	for i, a := range list {
		out[i] = pendingOf(a)
	}
	return out, nil
}

// CancelApproval implements [agent.ApprovalCanceler]. The agent calls it for
// each pending approval (or form) of a session's open calls that it closed
// because a new user message came: the approval is decided as that
// rejection ([agent.CauseMovedOn]), so that it is no longer pending or
// answerable, and a ticket of this Approvals that still holds it gets that
// decision. Nobody is told otherwise (no OnDecided): the agent closed the
// call itself.
//
// An unknown approval, or one already decided, is left as it is and
// CancelApproval returns nil; one of another session is refused with
// [approval.ErrWrongSession]; a failing Store's error is returned.
func (m *Approvals) CancelApproval(ctx context.Context, sessionID, approvalID string) error {
	err := m.core.Cancel(ctx, sessionID, approvalID, EncodeDecision(movedOn()))
	switch {
	case errors.Is(err, waiting.ErrWrongSession):
		return approval.ErrWrongSession
	case err != nil:
		return fmt.Errorf("approval: cancel approval %s: %w", approvalID, err)
	}
	return nil
}

var _ agent.ApprovalCanceler = (*Approvals)(nil)

// EncodeDecision returns d in the vocabulary of a [memory.ApprovalStore].
// The scope is "once", "session" or "always"; By and Via are the
// principal and the channel.
func EncodeDecision(d agent.Decision) memory.ApprovalDecision {
	scope := "once"
	switch d.Scope {
	case agent.ScopeSession:
		scope = "session"
	case agent.ScopeAlways:
		scope = "always"
	}
	return memory.ApprovalDecision{
		Approved:  d.Approved,
		Reason:    d.Reason,
		Cause:     string(d.Cause),
		Arguments: d.Arguments,
		Scope:     scope,
		Principal: d.By,
		Channel:   d.Via,
	}
}

// DecodeDecision returns the agent.Decision that d, read from a
// [memory.ApprovalStore], holds. A scope it does not know (from a newer
// version) is taken as "once", the narrowest.
func DecodeDecision(d memory.ApprovalDecision) agent.Decision {
	scope, err := parseScope(d.Scope)
	if err != nil {
		scope = agent.ScopeOnce
	}
	return agent.Decision{
		Approved:  d.Approved,
		Reason:    d.Reason,
		Cause:     agent.Cause(d.Cause),
		Arguments: json.RawMessage(d.Arguments),
		Scope:     scope,
		By:        d.Principal,
		Via:       d.Channel,
	}
}
