package approval

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/planround/planround/agent"
)

// DefaultTimeout is how long a [Manager] waits for a decision when
// [ManagerConfig.Timeout] is zero.
const DefaultTimeout = 300 * time.Second

// timedOut is the decision of an approval nobody answered within d: a
// rejection with [agent.CauseTimeout] and a reason such as "approval timed
// out after 5m0s".
func timedOut(d time.Duration) agent.Decision {
	return agent.Decision{Reason: "approval timed out after " + d.String(), Cause: agent.CauseTimeout}
}

// cancelled is the decision of an approval that was cancelled, by
// [Manager.CancelSession] or because the waiting context ended: nobody
// rejected the call.
func cancelled() agent.Decision {
	return agent.Decision{Reason: agent.ReasonApprovalInterrupted, Cause: agent.CauseApprovalInterrupted}
}

// Errors returned by [Manager.Request], [Manager.Respond] and the Wait of a
// Manager's tickets.
var (
	// ErrWrongSession is returned by Respond for an approval id that
	// belongs to another session. The approval stays pending.
	ErrWrongSession = errors.New("approval: approval id belongs to another session")
	// ErrInvalidArguments is returned by Respond when the decision's
	// edited Arguments are not a JSON object. The approval stays pending.
	ErrInvalidArguments = errors.New("approval: edited arguments must be a JSON object")
	// ErrInvalidScope is returned by Respond for a decision whose Scope is
	// not one of the agent.Scope constants.
	ErrInvalidScope = errors.New("approval: unknown scope")
	// ErrAlreadyWaiting is returned by the Wait of a Manager's ticket that
	// was called before: a ticket is waited for once.
	ErrAlreadyWaiting = errors.New("approval: Wait called twice for one approval")
	// ErrNoSession is returned (wrapped) by Request for a request without a
	// session id: a Manager's approvals are answered, listed and cancelled
	// per session, so one registered without a session could only time
	// out.
	ErrNoSession = errors.New("approval: the request has no session id")
)

// ManagerConfig configures a [Manager]. The zero value is ready to use.
type ManagerConfig struct {
	// Timeout is how long a ticket's Wait waits for a decision before it
	// rejects the call with [agent.CauseTimeout]. Zero means
	// [DefaultTimeout]; negative values are invalid.
	Timeout time.Duration

	// OnRegister, when not nil, is called with every new pending approval,
	// synchronously, in the goroutine that registered it (the agent's, in
	// Request), after the approval can be answered and before the agent
	// shows the approval_required chunk. It may call [Manager.Respond] (an
	// auto-approval) but must not block. It must be safe for concurrent use.
	OnRegister func(PendingApproval)
}

// PendingApproval describes an approval that waits for a decision, as
// [Manager.Pending] lists it.
type PendingApproval struct {
	// ApprovalID is the approval id a front end answers with, as on the
	// approval_required chunk (agent.ToolCall.ApprovalID).
	ApprovalID string `json:"approval_id"`
	// SessionID is the run's session.
	SessionID string `json:"session_id"`
	// Round is the tool round of the call.
	Round int `json:"round"`
	// Call is the tool call waiting for approval.
	Call agent.ToolCall `json:"call"`
	// Created is when the approval was registered.
	Created time.Time `json:"created"`
}

// Manager is the register / wait / respond / cancel service behind an
// approval UI that lives elsewhere, such as a browser.
//
// A Manager is an [agent.Approver]: set it as the agent's approver and the
// agent registers each call ([Manager.Request]) before it shows the
// approval_required chunk, then waits with the ticket it got. Decisions come
// in through [Manager.Respond] (or the handler of [Manager.ApproveHandler]);
// [Manager.CancelSession] ends every pending approval of a session.
//
// Waiting costs no goroutine: a ticket's Wait blocks in its caller's
// goroutine. Every entry is removed when its Wait returns, when its session
// is cancelled, or when a decision reaches a Wait that already waits, so the
// count of [Manager.Len] returns to zero after every run.
//
// All methods are safe for concurrent use.
type Manager struct {
	timeout    time.Duration
	onRegister func(PendingApproval)

	mu sync.Mutex
	// byID and bySession index the same live entries; mu guards both maps
	// and the state, waiting and decision fields of every entry. An entry
	// leaves both maps together.
	byID      map[string]*entry
	bySession map[string]map[string]*entry
	seq       uint64 // guarded by mu; orders Pending's listing
}

type entryState uint8

const (
	statePending entryState = iota // waits for a decision
	stateDecided                   // answered, cancelled or timed out; decision holds the outcome
)

// entry is one pending approval. done is closed exactly once, by whoever
// moves state away from statePending, with mu held.
type entry struct {
	id      string
	session string
	round   int
	call    agent.ToolCall
	created time.Time
	seq     uint64
	done    chan struct{}

	state    entryState     // guarded by Manager.mu
	waiting  bool           // guarded by Manager.mu: Wait was called
	decision agent.Decision // guarded by Manager.mu; set before done is closed
}

// NewManager returns a Manager configured by cfg. It fails when cfg is
// invalid.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("approval: negative timeout %v", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Manager{
		timeout:    cfg.Timeout,
		onRegister: cfg.OnRegister,
		byID:       make(map[string]*entry),
		bySession:  make(map[string]map[string]*entry),
	}, nil
}

// Timeout returns how long a ticket's Wait waits for a decision.
func (m *Manager) Timeout() time.Duration { return m.timeout }

// newID returns an unguessable approval id: 128 random bits in hex.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// Request registers req as a pending approval and returns its ticket, which
// carries the approval id a front end answers with. It implements
// [agent.Approver]: from the moment Request returns, a decision for the id
// (through [Manager.Respond]) is kept until the ticket's Wait takes it.
//
// Request fails, and registers nothing, when ctx has already ended, and with
// an error wrapping [ErrNoSession] when req.SessionID is empty (a run without
// agent.Input.SessionID): the agent then rejects the call at once with the
// error's text instead of waiting for a decision nobody can send.
//
// The ticket's Wait returns:
//   - the decision given to [Manager.Respond], also one given before Wait
//     was called;
//   - a rejection with [agent.CauseApprovalInterrupted] and a nil error when
//     the approval was cancelled by [Manager.CancelSession], before or during
//     the wait;
//   - a rejection with [agent.CauseTimeout] and a nil error when no decision
//     came within the Manager's timeout, counted from the start of Wait;
//   - a rejection with [agent.CauseApprovalInterrupted] and ctx.Err() when
//     ctx ended first, also when it had already ended at the call (the
//     release the agent owes for a ticket it no longer waits for).
//
// Whichever of these happens first wins; the entry is removed before Wait
// returns. Wait is called once: a second call returns [ErrAlreadyWaiting].
func (m *Manager) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return agent.Ticket{}, err
	}
	if err := checkSession(req); err != nil {
		return agent.Ticket{}, err
	}
	e := m.register(req)
	return agent.Pending(e.id, func(ctx context.Context) (agent.Decision, error) {
		return m.wait(ctx, e)
	}), nil
}

// checkSession returns an error wrapping ErrNoSession when req has no
// session.
func checkSession(req agent.ApprovalRequest) error {
	if req.SessionID == "" {
		return fmt.Errorf("%w (set agent.Input.SessionID: approvals are answered per session)", ErrNoSession)
	}
	return nil
}

func (m *Manager) register(req agent.ApprovalRequest) *entry {
	e := &entry{
		id:      newID(),
		session: req.SessionID,
		round:   req.Round,
		call:    req.Call,
		created: time.Now(),
		done:    make(chan struct{}),
	}
	e.call.ApprovalID = e.id
	m.mu.Lock()
	m.seq++
	e.seq = m.seq
	m.byID[e.id] = e
	s := m.bySession[e.session]
	if s == nil {
		s = make(map[string]*entry)
		m.bySession[e.session] = s
	}
	s[e.id] = e
	m.mu.Unlock()
	if m.onRegister != nil {
		m.onRegister(e.pending())
	}
	return e
}

func (e *entry) pending() PendingApproval {
	return PendingApproval{ApprovalID: e.id, SessionID: e.session, Round: e.round, Call: e.call, Created: e.created}
}

// remove deletes e from both indexes. m.mu must be held.
func (m *Manager) remove(e *entry) {
	delete(m.byID, e.id)
	if s := m.bySession[e.session]; s != nil {
		delete(s, e.id)
		if len(s) == 0 {
			delete(m.bySession, e.session)
		}
	}
}

// wait waits for the decision on e; see the ticket's Wait in Request.
func (m *Manager) wait(ctx context.Context, e *entry) (agent.Decision, error) {
	m.mu.Lock()
	if e.waiting {
		m.mu.Unlock()
		return agent.Decision{Reason: ErrAlreadyWaiting.Error()}, ErrAlreadyWaiting
	}
	e.waiting = true
	if e.state == stateDecided {
		// The decision (or a cancel) came before the wait.
		m.remove(e)
		d := e.decision
		m.mu.Unlock()
		return d, nil
	}
	if err := ctx.Err(); err != nil {
		m.finish(e, cancelled())
		m.remove(e)
		m.mu.Unlock()
		return cancelled(), err
	}
	m.mu.Unlock()

	timer := time.NewTimer(m.timeout)
	defer timer.Stop()
	var ctxErr error
	select {
	case <-e.done:
		// Whoever closed done set the decision and removed e.
		m.mu.Lock()
		d := e.decision
		m.mu.Unlock()
		return d, nil
	case <-ctx.Done():
		ctxErr = ctx.Err()
	case <-timer.C:
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if e.state != statePending {
		// A decision or a cancel took the lock before us: it wins.
		return e.decision, nil
	}
	m.remove(e)
	if ctxErr != nil {
		m.finish(e, cancelled())
		return e.decision, ctxErr
	}
	m.finish(e, timedOut(m.timeout))
	return e.decision, nil
}

// finish records d as e's outcome and wakes its waiter. m.mu must be held and
// e must be pending.
func (m *Manager) finish(e *entry, d agent.Decision) {
	e.state = stateDecided
	e.decision = d
	close(e.done)
}

// Respond gives the decision d to the pending approval id of session
// sessionID. It reports whether the approval was pending: false means the id
// is unknown, was already answered, timed out or was cancelled (a stale card,
// for example after a server restart); the first decision wins and later ones
// change nothing.
//
// A decision that arrives before the agent waits is kept and returned by
// the Wait that follows.
//
// Respond fails, and leaves the approval pending, with [ErrWrongSession] when
// id belongs to another session, and with an error wrapping
// [ErrInvalidArguments] when d.Arguments is not nil and not a JSON object,
// and with an error wrapping [ErrInvalidScope] for an unknown d.Scope.
func (m *Manager) Respond(sessionID, id string, d agent.Decision) (pending bool, err error) {
	if d.Scope > agent.ScopeAlways {
		return false, fmt.Errorf("%w: %d", ErrInvalidScope, d.Scope)
	}
	if d.Arguments != nil {
		if err := checkObject(d.Arguments); err != nil {
			return false, err
		}
		d.Arguments = slices.Clone(d.Arguments)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	if e == nil {
		return false, nil
	}
	if e.session != sessionID {
		return false, ErrWrongSession
	}
	if e.state != statePending {
		return false, nil // first decision wins
	}
	m.finish(e, d)
	if e.waiting {
		// The waiter holds e and needs no lookup; drop it now so Len and
		// Pending stop counting it at once.
		m.remove(e)
	}
	return true, nil
}

// checkObject reports an error unless raw is a JSON object.
func checkObject(raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: %s", ErrInvalidArguments, describe(raw))
	}
	return nil
}

func describe(raw []byte) string {
	const limit = 40
	if len(raw) > limit {
		return fmt.Sprintf("%q...", raw[:limit])
	}
	return fmt.Sprintf("%q", raw)
}

// CancelSession wakes and removes every approval of sessionID that still
// waits for a decision, including approvals registered by Request whose Wait
// has not started yet: that Wait then returns the cancellation at once. The
// cancelled approvals are rejected with [agent.CauseApprovalInterrupted]
// (the reason is [agent.ReasonApprovalInterrupted]).
// Approvals that were already answered keep their decision. CancelSession
// returns the number of approvals it cancelled.
func (m *Manager) CancelSession(sessionID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.bySession[sessionID] {
		if e.state != statePending {
			continue
		}
		m.finish(e, cancelled())
		m.remove(e)
		n++
	}
	return n
}

// Len returns the number of entries the Manager holds: approvals waiting for
// a decision plus decided ones whose Wait has not taken the decision yet.
// It returns to zero when every run has ended.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// Pending lists the approvals of sessionID that wait for a decision, oldest
// first, so a reconnecting front end can draw their cards again.
func (m *Manager) Pending(sessionID string) []PendingApproval {
	m.mu.Lock()
	s := m.bySession[sessionID]
	list := make([]*entry, 0, len(s))
	for _, e := range s {
		if e.state == statePending {
			list = append(list, e)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(list, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]PendingApproval, len(list))
	for i, e := range list {
		out[i] = e.pending()
	}
	return out
}
