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
	"github.com/planround/planround/memory"
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
	// rejects the call with [agent.CauseTimeout], counted from the start of
	// Wait, or with a Store from the approval's creation (a resumed turn
	// gets no fresh timeout). Zero means [DefaultTimeout]; negative values
	// are invalid. With a Store, an approval nobody waits for (its run is
	// suspended) does not time out by itself: a decision that comes later
	// is taken, and a resumed turn that finds none waits only what is left
	// of the timeout.
	Timeout time.Duration

	// OnRegister, when not nil, is called with every new pending approval
	// (with a Store, also with a pending one a resumed turn asks about
	// again, whose card is shown again), synchronously, in the goroutine
	// that registered it (the agent's, in Request), after the approval can
	// be answered and before the agent shows the approval_required chunk.
	// It may call [Manager.Respond] (an auto-approval) but must not block.
	// It must be safe for concurrent use.
	OnRegister func(PendingApproval)

	// Store, when not nil, makes the Manager durable: every pending
	// approval is created in Store before Request returns, every decision
	// is taken there (the first wins, across all the processes that share
	// Store), and an approval outlives its Wait and its process, so a run
	// can be suspended and resumed (see [agent.ErrSuspended] and
	// agent.ApprovalRequest.ApprovalID). "Durable mode" in the doc of the
	// Manager's methods means a Manager with a Store.
	Store memory.ApprovalStore

	// Notifier, when not nil, carries the Manager's decisions to the other
	// processes that share Store, and theirs to this one, so that a
	// decision posted to any process wakes the Wait that waits for it at
	// once (see [NotifyChannel]). It requires Store. A Manager with a
	// Notifier listens from NewManager on and must be closed
	// ([Manager.Close]).
	Notifier memory.Notifier

	// OnDecided, when not nil, is called with every decision this Manager
	// learns of for an approval that no ticket of this Manager waits for:
	// one taken by its own Respond or CancelSession, or one another
	// process took and announced through Notifier. Such a decision
	// belongs to a run that was suspended or whose process stopped; a
	// host that drives its sessions with a runner (package runner) needs
	// none: the runner hears the Manager's notes and resumes the turn. A
	// host without one resumes it (agent.Resume on the approval's session)
	// in a goroutine of its own. OnDecided is called outside the Manager's
	// locks, at most once per decision in each Manager, and must not block.
	// Several processes may be told of one decision: only a runner's lease
	// makes one of them drive the run. It requires Store.
	OnDecided func(a memory.Approval)

	// SuspendAfter, when positive, is how long a ticket's Wait waits for a
	// decision before it gives up for now: it returns
	// [agent.ErrSuspended] and the approval stays pending in Store, to be
	// decided later, by a person, in any process (the run ends suspended
	// and is resumed after the decision, see OnDecided). Zero means never;
	// a value not shorter than the time left before the timeout has no
	// effect. It requires Store.
	SuspendAfter time.Duration
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
// With a [ManagerConfig.Store] the Manager is durable: the approvals and
// their decisions are kept in the Store, shared by every process that uses
// it (see the package documentation). The Manager itself then holds only
// the approvals its own tickets wait for.
//
// All methods are safe for concurrent use.
type Manager struct {
	timeout    time.Duration
	onRegister func(PendingApproval)
	store      memory.ApprovalStore // nil for an in-memory Manager

	mu sync.Mutex
	// byID and bySession index the same live entries; mu guards both maps
	// and the state, waiting and decision fields of every entry. An entry
	// leaves both maps together.
	byID      map[string]*entry
	bySession map[string]map[string]*entry
	seq       uint64        // guarded by mu; orders Pending's listing
	read      readDecisions // guarded by mu; durable mode only

	// The rest of the durable mode (see durable.go); nil or zero without a
	// Store.
	notifier     memory.Notifier
	onDecided    func(memory.Approval)
	suspendAfter time.Duration
	instance     string // tells this Manager's notes from the others'
	stopListen   func() // ends the Notifier's Listen; nil without one
	closeOnce    sync.Once
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
// invalid (a negative duration; a Notifier, OnDecided or SuspendAfter
// without a Store), and when the Notifier cannot listen. A Manager with a
// Notifier must be closed with [Manager.Close].
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("approval: negative timeout %v", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if err := checkDurable(cfg); err != nil {
		return nil, err
	}
	m := &Manager{
		timeout:      cfg.Timeout,
		onRegister:   cfg.OnRegister,
		store:        cfg.Store,
		notifier:     cfg.Notifier,
		onDecided:    cfg.OnDecided,
		suspendAfter: cfg.SuspendAfter,
		byID:         make(map[string]*entry),
		bySession:    make(map[string]map[string]*entry),
	}
	if m.notifier != nil {
		if err := m.listen(); err != nil {
			return nil, err
		}
	}
	return m, nil
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
//
// In durable mode (a [ManagerConfig.Store]) the approval is created in the
// Store before Request returns (Request fails when the Store does), and:
//
//   - a request with req.ApprovalID set (a resumed turn asking again about
//     a call) is answered with that approval when the Store has it for the
//     same session and call: a Decided ticket with its decision when it was
//     decided (a rejection without a cause gets [agent.CauseUser]: a person
//     took it), else a Pending ticket with the same id. An id the Store
//     does not have (its process stopped before it stored the approval)
//     gets a new approval under that id; one of another session or call
//     gets a new approval with a new id;
//   - a request with req.NewApprovalID set (the agent recorded the id
//     before it asked) gets its new approval under that id, unless the id
//     is taken, longer than 128 bytes, or holds other characters than
//     letters, digits, '-' and '_': then under a new id;
//   - the timeout counts from the approval's creation, not from the start
//     of Wait, so a resumed approval gets no fresh timeout; a timeout is
//     taken in the Store like any decision, and a person's decision that
//     came first stands;
//   - with [ManagerConfig.SuspendAfter], Wait returns [agent.ErrSuspended]
//     after waiting that long: the approval stays pending in the Store
//     (unless a decision came in meanwhile, which Wait then returns);
//   - a Wait ended by its context decides the approval in the Store as
//     interrupted, so that a later decision is refused, except when the
//     context's cause is [agent.ErrSuspended] (context.Cause, errors.Is),
//     as when a host that shuts down suspends its runs: Wait then returns
//     that cause and the approval stays as it is in the Store, pending or
//     decided, for the resumed turn to take.
func (m *Manager) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return agent.Ticket{}, err
	}
	if err := checkSession(req); err != nil {
		return agent.Ticket{}, err
	}
	if m.store != nil {
		return m.requestDurable(ctx, req)
	}
	e := m.register(req)
	if m.onRegister != nil {
		m.onRegister(e.pending())
	}
	return m.ticket(e), nil
}

// ticket returns the pending ticket of e.
func (m *Manager) ticket(e *entry) agent.Ticket {
	return agent.Pending(e.id, func(ctx context.Context) (agent.Decision, error) {
		return m.wait(ctx, e)
	})
}

// checkSession returns an error wrapping ErrNoSession when req has no
// session.
func checkSession(req agent.ApprovalRequest) error {
	if req.SessionID == "" {
		return fmt.Errorf("%w (set agent.Input.SessionID: approvals are answered per session)", ErrNoSession)
	}
	return nil
}

// register adds a new pending entry for req, with a new id.
func (m *Manager) register(req agent.ApprovalRequest) *entry { return m.registerAs(req, "") }

// registerAs adds a new pending entry for req with id, or with a new id
// when id is empty or names an entry this Manager holds.
func (m *Manager) registerAs(req agent.ApprovalRequest, id string) *entry {
	e := &entry{
		session: req.SessionID,
		round:   req.Round,
		call:    req.Call,
		created: time.Now(),
		done:    make(chan struct{}),
	}
	m.mu.Lock()
	if id == "" || m.byID[id] != nil {
		id = newID()
	}
	e.id = id
	e.call.ApprovalID = id
	m.insert(e)
	m.mu.Unlock()
	return e
}

// insert adds e to both indexes. m.mu must be held and e.id must not be in
// them.
func (m *Manager) insert(e *entry) {
	m.seq++
	e.seq = m.seq
	m.byID[e.id] = e
	s := m.bySession[e.session]
	if s == nil {
		s = make(map[string]*entry)
		m.bySession[e.session] = s
	}
	s[e.id] = e
}

func (e *entry) pending() PendingApproval {
	return PendingApproval{ApprovalID: e.id, SessionID: e.session, Round: e.round, Call: e.call, Created: e.created}
}

// remove deletes e from both indexes, if it is still there: in durable
// mode a later entry may hold the same id (a resumed turn asked again); an
// in-memory Manager's ids are never reused. m.mu must be held.
func (m *Manager) remove(e *entry) {
	if m.store != nil && m.byID[e.id] != e {
		return
	}
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
	if m.store != nil {
		return m.waitDurable(ctx, e)
	}
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
//
// In durable mode the decision is taken in the Store, where the first
// decision from any process wins; then it wakes the Wait of this Manager
// that waits for the approval, or, when none does, is passed to
// [ManagerConfig.OnDecided], and is announced to the other processes through
// the Notifier. Respond then also fails when the Store does (the approval
// stays as it was). Respond uses no deadline: see [Manager.RespondContext].
func (m *Manager) Respond(sessionID, id string, d agent.Decision) (pending bool, err error) {
	return m.RespondContext(context.Background(), sessionID, id, d)
}

// RespondContext is [Manager.Respond] with a context that bounds the calls
// to the Store and the Notifier in durable mode; without a Store it is
// Respond and ctx is not used. The note to the other processes is sent
// even when ctx ends after the decision was taken (within a few seconds);
// a note that cannot be sent is no error: notes are hints, and a process
// that waits finds the decision in the Store when it suspends or times
// out.
func (m *Manager) RespondContext(ctx context.Context, sessionID, id string, d agent.Decision) (pending bool, err error) {
	if d.Scope > agent.ScopeAlways {
		return false, fmt.Errorf("%w: %d", ErrInvalidScope, d.Scope)
	}
	if d.Arguments != nil {
		if err := checkObject(d.Arguments); err != nil {
			return false, err
		}
		d.Arguments = slices.Clone(d.Arguments)
	}
	if m.store != nil {
		return m.respondDurable(ctx, sessionID, id, d)
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
//
// In durable mode it cancels every pending approval of the session in the
// Store, also those no ticket of this Manager waits for (their decision goes
// to [ManagerConfig.OnDecided] and, through the Notifier, to the processes
// that wait), and a failing Store cancels only some or none: see
// [Manager.CancelSessionContext], which reports the error.
func (m *Manager) CancelSession(sessionID string) int {
	n, _ := m.CancelSessionContext(context.Background(), sessionID)
	return n
}

// CancelSessionContext is [Manager.CancelSession] with a context that
// bounds the calls to the Store, and the Store's error: without a Store it
// never fails and ctx is not used. It returns the number of approvals it
// cancelled also when it fails.
func (m *Manager) CancelSessionContext(ctx context.Context, sessionID string) (int, error) {
	if m.store != nil {
		return m.cancelDurable(ctx, sessionID)
	}
	return m.cancelLocal(sessionID), nil
}

func (m *Manager) cancelLocal(sessionID string) int {
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
//
// In durable mode the list comes from the Store: it holds every pending
// approval of the session, also those whose run is suspended or was driven
// by another process. It is empty when the Store fails; see
// [Manager.PendingContext], which reports the error.
func (m *Manager) Pending(sessionID string) []PendingApproval {
	p, _ := m.PendingContext(context.Background(), sessionID)
	return p
}

// PendingContext is [Manager.Pending] with a context that bounds the call to
// the Store, and the Store's error: without a Store it never fails and ctx
// is not used.
func (m *Manager) PendingContext(ctx context.Context, sessionID string) ([]PendingApproval, error) {
	if m.store != nil {
		return m.pendingDurable(ctx, sessionID)
	}
	return m.pendingLocal(sessionID), nil
}

func (m *Manager) pendingLocal(sessionID string) []PendingApproval {
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
