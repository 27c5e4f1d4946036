package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/names"
	"github.com/planround/planround/memory"
)

// The durable mode of a Manager: a Manager with a ManagerConfig.Store.
//
// Invariants, beside those of manager.go:
//   - a local entry is inserted before its approval is created in the
//     Store (and removed if that fails), so a decision taken in the Store
//     for an approval this Manager registered always finds the entry, or
//     finds it gone because its Wait returned;
//   - every decision is taken in the Store first (DecideApproval, first
//     wins) and only then given to a local entry (deliver), so a local
//     entry never holds a decision the Store does not;
//   - no Store or Notifier call is made with m.mu held.

// NotifyChannel is the [memory.Notifier] channel on which Managers announce
// their decisions to each other. A note's payload is a small JSON object
// naming the session and the approval; it is a hint to read the approval
// from the Store.
const NotifyChannel = "planround_approvals"

// storeGrace bounds the Store calls that a Wait makes after its context
// ended (to record the interruption) and the note Respond sends after the
// decision: short enough for Wait to return promptly, long enough for a
// healthy store.
const storeGrace = 3 * time.Second

// note is the payload of a Manager's note on NotifyChannel.
type note struct {
	SessionID  string `json:"session_id"`
	ApprovalID string `json:"approval_id"`
	// From is the instance id of the Manager that sent the note; a
	// Manager ignores its own notes.
	From string `json:"from"`
}

// DecisionNoted returns the session and approval a payload of a Manager's
// note on NotifyChannel names, and false for a payload that is not one
// (an empty payload says that notes may have been lost). A host that
// resumes turns on decisions listens to NotifyChannel and reads the notes
// with it, as the runner package does.
func DecisionNoted(payload string) (sessionID, approvalID string, ok bool) {
	var n note
	if payload == "" || json.Unmarshal([]byte(payload), &n) != nil || n.SessionID == "" || n.ApprovalID == "" {
		return "", "", false
	}
	return n.SessionID, n.ApprovalID, true
}

// checkDurable reports the options of cfg that need a Store when it has
// none, and a negative SuspendAfter.
func checkDurable(cfg ManagerConfig) error {
	if cfg.SuspendAfter < 0 {
		return fmt.Errorf("approval: negative SuspendAfter %v", cfg.SuspendAfter)
	}
	if cfg.Store != nil {
		return nil
	}
	switch {
	case cfg.Notifier != nil:
		return errors.New("approval: ManagerConfig.Notifier needs a Store (the notes name approvals kept there)")
	case cfg.OnDecided != nil:
		return errors.New("approval: ManagerConfig.OnDecided needs a Store (without one, every approval has a Wait)")
	case cfg.SuspendAfter > 0:
		return errors.New("approval: ManagerConfig.SuspendAfter needs a Store (a suspended approval must outlive its Wait)")
	}
	return nil
}

// listen starts listening to the Notifier.
func (m *Manager) listen() error {
	m.instance = newID()
	stop, err := m.notifier.Listen(context.Background(), NotifyChannel, m.onNote)
	if err != nil {
		return fmt.Errorf("approval: listen for decisions on %q: %w", NotifyChannel, err)
	}
	m.stopListen = stop
	return nil
}

// Close stops a Manager with a [ManagerConfig.Notifier] from listening for
// the other processes' decisions; it must be called when the Manager is no
// longer used, and no goroutine of the Manager runs after it returned. A
// Manager without a Notifier has nothing to close. Close does not end the
// Waits that wait (cancel their runs first); after Close they learn of a
// decision taken in another process only when they suspend or time out.
// Close must not be called from OnDecided (it waits for the Notifier's
// listener, which calls OnDecided). Close always returns nil; calling it
// again does nothing.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		if m.stopListen != nil {
			m.stopListen()
		}
	})
	return nil
}

// EncodeDecision returns d in the vocabulary of a [memory.ApprovalStore].
// The scope is "once", "session" or "always".
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
		Arguments: d.Arguments,
		Scope:     scope,
	}
}

// record returns the Store's record of the new approval e.
func (e *entry) record() memory.Approval {
	return memory.Approval{
		ID:        e.id,
		SessionID: e.session,
		CallID:    e.call.ID,
		Tool:      e.call.Name,
		Arguments: e.call.Arguments,
		Round:     e.round,
		CreatedAt: e.created,
	}
}

// pendingOf returns how Pending lists the stored approval a.
func pendingOf(a memory.Approval) PendingApproval {
	return PendingApproval{
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
		},
		Created: a.CreatedAt,
	}
}

// requestDurable is Request in durable mode.
func (m *Manager) requestDurable(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	// create is the id a new approval gets: the one the agent recorded
	// before it asked (see agent.ApprovalRequest.NewApprovalID), else a
	// new one.
	create := ""
	var approvalID string
	named := false
	if req.Key != "" {
		// The process that asked first may have stopped between creating
		// the approval and the agent saving its id: that approval is the
		// call's, not a second one beside it.
		id, err := m.orphan(ctx, req)
		if err != nil {
			return agent.Ticket{}, err
		}
		approvalID = id
	}
	if approvalID != "" {
		tk, ok, err := m.resume(ctx, req, approvalID)
		switch {
		case errors.Is(err, errUnknownApproval):
			if named {
				// The call's record names this id, and its process
				// stopped before the store had it: created under it, the
				// approval stays the one the record names.
				create = approvalID
			}
		case err != nil || ok:
			return tk, err
		}
	}
	e, err := m.create(ctx, req, create)
	if errors.Is(err, memory.ErrExists) && create != "" {
		// Not this call's (a caller's id taken already): a new id.
		e, err = m.create(ctx, req, "")
	}
	if err != nil {
		return agent.Ticket{}, fmt.Errorf("approval: store the approval of call %s: %w", req.Call.ID, err)
	}
	if m.onRegister != nil {
		m.onRegister(e.pending())
	}
	return m.ticket(e), nil
}

// create registers a new pending entry for req with id (a new id when id
// is empty, not a usable id, or one this Manager holds already) and
// creates its approval in the Store; it removes the entry when the Store
// fails.
func (m *Manager) create(ctx context.Context, req agent.ApprovalRequest, id string) (*entry, error) {
	if !names.Valid(id, maxIDLen) {
		id = ""
	}
	e := m.registerAs(req, id)
	if err := m.store.CreateApproval(ctx, e.record()); err != nil {
		m.mu.Lock()
		m.remove(e)
		m.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// maxIDLen is the longest approval id a Manager takes from a request; a
// longer one gets a new id.
const maxIDLen = 128

// errUnknownApproval is what resume returns for an id the Store does not
// have.
var errUnknownApproval = errors.New("approval: no such approval")

// orphan returns the id of a pending approval of req's session and call
// that no ticket of this Manager waits for, or "".
func (m *Manager) orphan(ctx context.Context, req agent.ApprovalRequest) (string, error) {
	pending, err := m.store.PendingApprovals(ctx, req.SessionID)
	if err != nil {
		return "", fmt.Errorf("approval: look up the pending approvals of session %q: %w", req.SessionID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range pending {
		if a.CallID == req.Call.ID && a.Tool == req.Call.Name && m.byID[a.ID] == nil {
			return a.ID, nil
		}
	}
	return "", nil
}

// resume answers a request that names the approval req.ApprovalID asked
// before. ok is false when that approval is not this call's: of another
// session or call (the caller registers a new one), or unknown (err is
// errUnknownApproval: the caller creates it under that id).
//
// The entry is inserted before the Store is read, so that a note about a
// decision taken meanwhile finds it (and is not passed to OnDecided, which
// would resume the turn a second time).
func (m *Manager) resume(ctx context.Context, req agent.ApprovalRequest, approvalID string) (tk agent.Ticket, ok bool, err error) {
	e := &entry{
		id:      approvalID,
		session: req.SessionID,
		round:   req.Round,
		call:    req.Call,
		created: time.Now(),
		done:    make(chan struct{}),
	}
	e.call.ApprovalID = e.id
	m.mu.Lock()
	if m.byID[e.id] != nil {
		m.mu.Unlock()
		return agent.Ticket{}, false, fmt.Errorf("approval: approval %s of call %s already has a ticket in this process", e.id, req.Call.ID)
	}
	m.insert(e)
	m.mu.Unlock()
	drop := func() {
		m.mu.Lock()
		m.remove(e)
		m.mu.Unlock()
	}
	a, err := m.store.GetApproval(ctx, approvalID)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		drop()
		return agent.Ticket{}, false, errUnknownApproval
	case err != nil:
		drop()
		return agent.Ticket{}, false, fmt.Errorf("approval: look up approval %s of call %s: %w", approvalID, req.Call.ID, err)
	case a.SessionID != req.SessionID || a.CallID != req.Call.ID:
		drop()
		return agent.Ticket{}, false, nil
	case a.Decided:
		m.mu.Lock()
		m.remove(e)
		if e.state == statePending {
			m.read.add(e.id) // its note, if still to come, is not news
		}
		m.mu.Unlock()
		return agent.Decided(resumedDecision(a.Decision)), true, nil
	}
	m.mu.Lock()
	e.created, e.round = a.CreatedAt, a.Round
	m.mu.Unlock()
	if m.onRegister != nil {
		m.onRegister(e.pending())
	}
	return m.ticket(e), true, nil
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

// suspendedBy reports whether ctx ended to suspend the run.
func suspendedBy(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), agent.ErrSuspended)
}

// suspension is what Wait returns when it suspends, with err wrapping
// agent.ErrSuspended.
func suspension(err error) (agent.Decision, error) {
	return agent.Decision{Reason: err.Error()}, err
}

// waitDurable is a ticket's Wait in durable mode.
func (m *Manager) waitDurable(ctx context.Context, e *entry) (agent.Decision, error) {
	m.mu.Lock()
	if e.waiting {
		m.mu.Unlock()
		return agent.Decision{Reason: ErrAlreadyWaiting.Error()}, ErrAlreadyWaiting
	}
	e.waiting = true
	if suspendedBy(ctx) {
		// Whatever the Store holds, pending or decided, is for the
		// resumed turn to take.
		m.remove(e)
		m.mu.Unlock()
		return suspension(context.Cause(ctx))
	}
	if e.state == stateDecided {
		m.remove(e)
		d := e.decision
		m.mu.Unlock()
		return d, nil
	}
	m.mu.Unlock()
	if ctx.Err() != nil {
		return m.interrupt(ctx, e)
	}

	timer := time.NewTimer(time.Until(e.created.Add(m.timeout)))
	defer timer.Stop()
	var suspend <-chan time.Time
	if m.suspendAfter > 0 {
		st := time.NewTimer(m.suspendAfter)
		defer st.Stop()
		suspend = st.C
	}
	select {
	case <-e.done:
		m.mu.Lock()
		m.remove(e)
		d := e.decision
		m.mu.Unlock()
		if suspendedBy(ctx) {
			// The run is being suspended as the decision came: the
			// resumed turn takes it from the Store.
			return suspension(context.Cause(ctx))
		}
		return d, nil
	case <-ctx.Done():
		if suspendedBy(ctx) {
			m.mu.Lock()
			m.remove(e)
			m.mu.Unlock()
			return suspension(context.Cause(ctx))
		}
		return m.interrupt(ctx, e)
	case <-timer.C:
		return m.timeOut(e)
	case <-suspend:
		return m.suspend(e)
	}
}

// settle gives e the decision d unless it has one, removes it, and returns
// the decision e has.
func (m *Manager) settle(e *entry, d agent.Decision) agent.Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.state == statePending {
		m.finish(e, d)
	}
	m.remove(e)
	return e.decision
}

// settleRead is settle with the decision of a, which Wait read from the
// Store and another Manager took: the note about it may still come.
func (m *Manager) settleRead(e *entry, a memory.Approval) agent.Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.state == statePending {
		m.finish(e, DecodeDecision(a.Decision))
		m.read.add(a.ID)
	}
	m.remove(e)
	return e.decision
}

// graceContext returns a context for the Store calls of a Wait whose own
// context may have ended.
func graceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeGrace)
}

// interrupt decides e as interrupted because ctx ended, unless a decision
// came first, which it then returns with a nil error, as the in-memory
// Manager does.
func (m *Manager) interrupt(ctx context.Context, e *entry) (agent.Decision, error) {
	sctx, cancel := graceContext(ctx)
	defer cancel()
	a, err := m.store.DecideApproval(sctx, e.session, e.id, EncodeDecision(cancelled()))
	switch {
	case err == nil, errors.Is(err, memory.ErrNotFound):
		return m.settle(e, cancelled()), ctx.Err()
	case errors.Is(err, memory.ErrDecided):
		return m.settleRead(e, a), nil
	}
	return m.settle(e, cancelled()), fmt.Errorf("%w (and the store did not record the interruption: %v)", ctx.Err(), err)
}

// timeOut decides e as timed out, unless a decision came first.
func (m *Manager) timeOut(e *entry) (agent.Decision, error) {
	ctx, cancel := graceContext(context.Background())
	defer cancel()
	d := timedOut(m.timeout)
	a, err := m.store.DecideApproval(ctx, e.session, e.id, EncodeDecision(d))
	switch {
	case err == nil, errors.Is(err, memory.ErrNotFound):
		return m.settle(e, d), nil
	case errors.Is(err, memory.ErrDecided):
		return m.settleRead(e, a), nil
	}
	return m.settle(e, d), fmt.Errorf("approval: record the timeout of approval %s: %w", e.id, err)
}

// suspend ends the wait for e without a decision, after a last look at the
// Store: a decision that came in meanwhile wins.
func (m *Manager) suspend(e *entry) (agent.Decision, error) {
	ctx, cancel := graceContext(context.Background())
	defer cancel()
	a, err := m.store.GetApproval(ctx, e.id)
	if err == nil && a.Decided {
		return m.settleRead(e, a), nil
	}
	m.mu.Lock()
	if e.state != statePending {
		m.remove(e)
		d := e.decision
		m.mu.Unlock()
		return d, nil
	}
	m.remove(e)
	m.mu.Unlock()
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return suspension(fmt.Errorf("%w (the store could not be checked for a decision: %v)", agent.ErrSuspended, err))
	}
	return suspension(agent.ErrSuspended)
}

// deliver gives the decision of the decided approval a to this Manager's
// entry for it, if it has one that is pending, and wakes its Wait. A
// decided entry whose Wait waits leaves the indexes at once, and so does
// any when drop is set (as CancelSession does). It reports whether this
// Manager has an entry for a. m.mu must be held.
func (m *Manager) deliver(a memory.Approval, drop bool) (woke, had bool) {
	e := m.byID[a.ID]
	if e == nil {
		return false, false
	}
	if e.state == statePending {
		m.finish(e, DecodeDecision(a.Decision))
		woke = true
	}
	if e.waiting || drop {
		m.remove(e)
	}
	return woke, true
}

// deliverRead delivers a decision this Manager read from the Store and did
// not take, whose note may still come.
func (m *Manager) deliverRead(a memory.Approval) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if woke, _ := m.deliver(a, false); woke {
		m.read.add(a.ID)
	}
}

// maxRead is how many approval ids a Manager remembers in its
// readDecisions.
const maxRead = 1024

// readDecisions remembers the ids of the approvals whose decision an entry
// of this Manager took from the Store (it was taken by another Manager)
// before the note about it came: when the note comes, the entry is gone,
// and without this record the note would go to OnDecided as a decision no
// Wait took. A note comes at most once, and only shortly after the
// decision, so the oldest ids are forgotten first.
type readDecisions struct {
	ids  map[string]struct{}
	ring []string // the ids in the order they came; len maxRead once used
	next int
}

func (r *readDecisions) add(id string) {
	if r.ids == nil {
		r.ids = make(map[string]struct{})
		r.ring = make([]string, maxRead)
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.ids, old)
	}
	r.ring[r.next] = id
	r.ids[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}

// take reports whether id was remembered, and forgets it.
func (r *readDecisions) take(id string) bool {
	if _, ok := r.ids[id]; !ok {
		return false
	}
	delete(r.ids, id)
	return true
}

// decided tells of the decision a this Manager just took in the Store: to
// its own entry, else to OnDecided, and to the other processes.
func (m *Manager) decided(ctx context.Context, a memory.Approval, drop bool) {
	m.mu.Lock()
	_, had := m.deliver(a, drop)
	if !had && m.read.take(a.ID) {
		// A losing Respond of this Manager read the decision from the
		// Store and gave it to its entry before this one got here.
		had = true
	}
	m.mu.Unlock()
	if !had && m.onDecided != nil {
		m.onDecided(a)
	}
	if m.notifier == nil {
		return
	}
	payload, err := json.Marshal(note{SessionID: a.SessionID, ApprovalID: a.ID, From: m.instance})
	if err != nil || len(payload) > memory.MaxNotifyPayload {
		return // ids too long for a note: the waiter finds the decision when it suspends or times out
	}
	nctx, cancel := graceContext(ctx)
	defer cancel()
	_ = m.notifier.Notify(nctx, NotifyChannel, string(payload)) // a hint; see RespondContext
}

// respondDurable is Respond in durable mode; d is valid.
func (m *Manager) respondDurable(ctx context.Context, sessionID, id string, d agent.Decision) (bool, error) {
	if id == "" {
		return false, nil
	}
	a, err := m.store.DecideApproval(ctx, sessionID, id, EncodeDecision(d))
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return false, nil
	case errors.Is(err, memory.ErrWrongSession):
		return false, ErrWrongSession
	case errors.Is(err, memory.ErrDecided):
		// Decided elsewhere; if its note has not come yet, this
		// Manager's entry need not wait for it.
		m.deliverRead(a)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("approval: decide approval %s: %w", id, err)
	}
	m.decided(ctx, a, false)
	return true, nil
}

// cancelDurable is CancelSession in durable mode.
func (m *Manager) cancelDurable(ctx context.Context, sessionID string) (int, error) {
	if sessionID == "" {
		return 0, nil // the Store would list every session's approvals
	}
	list, err := m.store.PendingApprovals(ctx, sessionID)
	if err != nil {
		return 0, fmt.Errorf("approval: list the pending approvals of session %q: %w", sessionID, err)
	}
	n := 0
	var errs []error
	for _, p := range list {
		a, err := m.store.DecideApproval(ctx, sessionID, p.ID, EncodeDecision(cancelled()))
		switch {
		case err == nil:
			n++
			m.decided(ctx, a, true)
		case errors.Is(err, memory.ErrDecided), errors.Is(err, memory.ErrNotFound):
			// decided or deleted meanwhile
		default:
			errs = append(errs, fmt.Errorf("approval: cancel approval %s: %w", p.ID, err))
		}
	}
	return n, errors.Join(errs...)
}

// pendingDurable is Pending in durable mode.
func (m *Manager) pendingDurable(ctx context.Context, sessionID string) ([]PendingApproval, error) {
	if sessionID == "" {
		return []PendingApproval{}, nil // the Store would list every session's approvals
	}
	list, err := m.store.PendingApprovals(ctx, sessionID)
	if err != nil {
		return []PendingApproval{}, fmt.Errorf("approval: list the pending approvals of session %q: %w", sessionID, err)
	}
	out := make([]PendingApproval, len(list))
	for i, a := range list {
		out[i] = pendingOf(a)
	}
	return out, nil
}

// onNote is called by the Notifier with every note on NotifyChannel.
func (m *Manager) onNote(payload string) {
	if payload == "" {
		m.recheck()
		return
	}
	var n note
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.ApprovalID == "" || n.From == m.instance {
		return // not a Manager's note, or this Manager's own
	}
	m.mu.Lock()
	e := m.byID[n.ApprovalID]
	known := (e == nil && m.read.take(n.ApprovalID)) || (e != nil && e.state != statePending)
	m.mu.Unlock()
	if known {
		return // a Wait of this Manager took the decision already
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeGrace)
	defer cancel()
	a, err := m.store.GetApproval(ctx, n.ApprovalID)
	if err != nil || !a.Decided {
		return // deleted, or a store failure: the Wait finds out when it suspends or times out
	}
	m.mu.Lock()
	_, had := m.deliver(a, false)
	if !had && m.read.take(a.ID) {
		had = true // a Wait read it from the Store while we did
	}
	m.mu.Unlock()
	if !had && m.onDecided != nil {
		m.onDecided(a)
	}
}

// recheck looks up every approval this Manager waits for in the Store, after
// the Notifier said that notes may have been lost, and gives each decided
// one to its entry.
func (m *Manager) recheck() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.byID))
	for id, e := range m.byID {
		if e.state == statePending {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), storeGrace)
		a, err := m.store.GetApproval(ctx, id)
		cancel()
		if err == nil && a.Decided {
			m.deliverRead(a)
		}
	}
}

// movedOn is the decision of an approval whose call the agent rejected
// because the user moved on (see Manager.CancelApproval).
func movedOn() agent.Decision {
	return agent.Decision{Reason: agent.ReasonMovedOn, Cause: agent.CauseMovedOn}
}

// CancelApproval implements [agent.ApprovalCanceler]. The agent calls it for
// each approval of a session's open calls that it rejected because a new
// user message came (agent.CauseMovedOn): the approval is decided as that
// rejection, so that it is no longer pending or answerable, and a ticket of
// this Manager that still holds it gets that decision. Nobody is told
// otherwise (no OnDecided, no note): the agent closed the call itself.
//
// An unknown approval, or one already decided, is left as it is and
// CancelApproval returns nil; one of another session is refused with
// [ErrWrongSession]. In durable mode the decision is taken in the Store,
// bounded by ctx, and a failing Store's error is returned.
func (m *Manager) CancelApproval(ctx context.Context, sessionID, approvalID string) error {
	if m.store == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		e := m.byID[approvalID]
		switch {
		case e == nil:
			return nil
		case e.session != sessionID:
			return ErrWrongSession
		case e.state == statePending:
			m.finish(e, movedOn())
			m.remove(e)
		}
		return nil
	}
	if approvalID == "" {
		return nil
	}
	a, err := m.store.DecideApproval(ctx, sessionID, approvalID, EncodeDecision(movedOn()))
	switch {
	case err == nil:
		m.mu.Lock()
		m.deliver(a, true)
		m.mu.Unlock()
	case errors.Is(err, memory.ErrDecided):
		m.deliverRead(a)
	case errors.Is(err, memory.ErrNotFound):
	case errors.Is(err, memory.ErrWrongSession):
		return ErrWrongSession
	default:
		return fmt.Errorf("approval: cancel approval %s: %w", approvalID, err)
	}
	return nil
}

var _ agent.ApprovalCanceler = (*Manager)(nil)
