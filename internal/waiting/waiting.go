// Package waiting is the core of everything that waits for a person:
// the approvals and the forms a runner keeps (internal/person's Approvals
// and Forms) sit on it.
//
// A wait is a record in a memory.ApprovalStore (a MemStore of its own when
// none is given: one code path, durable or not). It is created before the
// chunk that shows it, belongs to a session, is answered first-writer-wins
// in the store (across every process that shares it), is cancelled with its
// session, and times out from its creation. A Core holds the waits its own
// callers wait for; a decision taken anywhere reaches them through the
// store and, between processes, through notes on a memory.Notifier.
//
// Invariants:
//   - a local entry is inserted before its record is created in (or read
//     from) the store, so a decision taken in the store for a wait this
//     Core holds always finds the entry, or finds it gone because its Wait
//     returned;
//   - every decision is taken in the store first (DecideApproval, first
//     wins) and only then given to a local entry, so an entry never holds
//     a decision the store does not;
//   - no store or notifier call is made with mu held;
//   - a Wait that waits makes no timer: its entry sits in the Core's heap
//     of waits by due time, and the Core's one timer, armed while that
//     heap is not empty, closes the entry's done channel when its due time
//     passes. An entry is in the heap only while its Wait waits and
//     nothing decided it, so done is closed once: by a decision (finish)
//     or by the timer (fired), never both.
package waiting

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/planround/planround/internal/suspend"
	"github.com/planround/planround/memory"
)

// Channel is the memory.Notifier channel on which Cores announce decisions
// to each other. A note's payload is a small JSON object naming the
// session, the wait and its kind; it is a hint to read the store.
const Channel = "planround_approvals"

// grace bounds the store calls made after a waiter's context ended (to
// record the interruption) and the note sent after a decision.
const grace = 3 * time.Second

// keepPrivate is how many decided records a Core keeps in the MemStore it
// made itself (no store given): enough for an audit of recent decisions,
// bounded for a process that runs for months.
const keepPrivate = 4096

// Note is the payload of a note on Channel.
type Note struct {
	SessionID string `json:"session_id"`
	ID        string `json:"approval_id"`
	Kind      string `json:"kind,omitempty"`
	// From is the instance id of the Core that sent the note; a Core
	// ignores its own notes.
	From string `json:"from"`
}

// ParseNote returns the note a payload holds, and false for a payload that
// is not one.
func ParseNote(payload string) (Note, bool) {
	var n Note
	if payload == "" || json.Unmarshal([]byte(payload), &n) != nil || n.SessionID == "" || n.ID == "" {
		return Note{}, false
	}
	return n, true
}

// Errors of a Core.
var (
	// ErrWrongSession: the wait belongs to another session.
	ErrWrongSession = errors.New("belongs to another session")
	// ErrAlreadyWaiting: Wait was called twice for one wait.
	ErrAlreadyWaiting = errors.New("Wait called twice for one wait")
)

// Config configures a Core.
type Config struct {
	// Kind is the kind of the records this Core creates and answers
	// (memory.KindApproval or memory.KindForm); notes and listings of other
	// kinds are not its own.
	Kind string
	// Store keeps the records; nil means a MemStore of the Core's own.
	Store memory.ApprovalStore
	// Notifier, when not nil, carries decisions between the processes
	// that share Store. The Core listens from New on until Close.
	Notifier memory.Notifier
	// Timeout is how long a wait lasts from its creation (required).
	Timeout time.Duration
	// SuspendAfter, when positive, ends a Wait that has waited that long
	// with an error wrapping suspend.ErrSuspended (agent.ErrSuspended); the
	// record stays pending.
	SuspendAfter time.Duration
	// OnDecided is told of a decision no Wait of this Core waits for.
	OnDecided func(memory.Approval)
	// TimedOut is the decision recorded for a wait nobody answered in
	// time, and Interrupted the one for a wait whose waiter went away or
	// whose session was cancelled.
	TimedOut, Interrupted memory.ApprovalDecision
}

// Core is the register / wait / decide / cancel service. All methods are
// safe for concurrent use.
type Core struct {
	cfg     Config
	private bool // Store is the Core's own MemStore

	mu      sync.Mutex
	entries map[string]*entry // guarded by mu: the waits local callers hold
	read    readDecisions     // guarded by mu
	decided int               // guarded by mu: decisions since the last ForgetDecided

	// waits holds the entries whose Wait waits and that nothing decided,
	// earliest due first; timer wakes them (expire). timer is made for the
	// first wait and is armed, for timerDue, exactly while waits is not
	// empty, so a Core nobody waits on has nothing armed.
	waits    dueHeap     // guarded by mu
	timer    *time.Timer // guarded by mu
	armed    bool        // guarded by mu: timer is armed for timerDue (or firing for it)
	timerDue int64       // guarded by mu

	// epoch is the time dues count from: an entry keeps its due as
	// nanoseconds since epoch on epoch's monotonic clock, 8 bytes instead
	// of a time.Time's 24.
	epoch time.Time

	instance   string
	stopListen func()
	closeOnce  sync.Once
}

type entry struct {
	id, session string
	// done is closed once: by finish when the wait is decided (rec set
	// first), or by the Core's timer when due passed (fired set first).
	done chan struct{}
	rec  *memory.Approval // guarded by Core.mu: the decided record

	// due is when the wait ends if nothing ends it before, in
	// nanoseconds since Core.epoch: its deadline, or, from Wait on, the
	// time it suspends when SuspendAfter comes first (suspends).
	due   int64 // guarded by Core.mu
	index int   // guarded by Core.mu: e's position in Core.waits, -1 when not in it

	pending  bool // guarded by Core.mu
	waiting  bool // guarded by Core.mu: Wait was called
	suspends bool // guarded by Core.mu: due is when the wait suspends, not its deadline
	fired    bool // guarded by Core.mu: the timer closed done, due passed while pending
}

// New returns a Core; it fails when the Notifier cannot listen.
func New(cfg Config) (*Core, error) {
	c := &Core{cfg: cfg, entries: make(map[string]*entry), epoch: time.Now(), instance: NewID()}
	if c.cfg.Store == nil {
		c.cfg.Store, c.private = &memory.MemStore{}, true
	}
	if cfg.Notifier != nil {
		stop, err := cfg.Notifier.Listen(context.Background(), Channel, c.onNote)
		if err != nil {
			return nil, fmt.Errorf("listen for decisions on %q: %w", Channel, err)
		}
		c.stopListen = stop
	}
	return c, nil
}

// Store returns the store that keeps the records.
func (c *Core) Store() memory.ApprovalStore { return c.cfg.Store }

// Close stops listening for notes. It must not be called from OnDecided.
// It does not end the Waits that wait: they still time out (and suspend),
// and the Core's timer, which is armed only while a Wait waits, stops when
// the last of them ends.
func (c *Core) Close() {
	c.closeOnce.Do(func() {
		if c.stopListen != nil {
			c.stopListen()
		}
	})
}

// NewID returns an unguessable id: 128 random bits in hex.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// Len returns the number of waits local callers hold.
func (c *Core) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Timeout returns how long a wait lasts from its creation.
func (c *Core) Timeout() time.Duration { return c.cfg.Timeout }

// Expired reports whether the wait a was created longer ago than the
// timeout.
func (c *Core) Expired(a memory.Approval, now time.Time) bool {
	return !a.Decided && !now.Before(a.CreatedAt.Add(c.cfg.Timeout))
}

// A Wait is the handle of one wait a caller opened.
type Wait struct {
	c *Core
	e *entry // nil for a record that was decided when opened
	// Record is the stored record: pending, or decided (when opened for a
	// Key whose record was decided before). A caller that holds the Wait
	// while a person decides sets it to nil once it has read it, so that
	// the held Wait keeps nothing of the record.
	Record *memory.Approval
}

// Open creates the pending record rec (its ID, Kind and CreatedAt are
// set here) and returns its Wait. When rec.Key names a record the session
// has already (a resumed turn asking again about the same call), that
// record is returned instead, decided or pending; existing reports it.
func (c *Core) Open(ctx context.Context, rec memory.Approval) (w *Wait, existing bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	rec.Kind = c.cfg.Kind
	rec.CreatedAt = time.Now()
	rec.Decided, rec.Decision, rec.DecidedAt = false, memory.ApprovalDecision{}, time.Time{}
	c.mu.Lock()
	rec.ID = NewID()
	for c.entries[rec.ID] != nil {
		rec.ID = NewID()
	}
	e := c.insert(rec)
	c.mu.Unlock()
	err = c.cfg.Store.CreateApproval(ctx, rec)
	if err == nil {
		return &Wait{c: c, e: e, Record: &rec}, false, nil
	}
	c.drop(e)
	if rec.Key == "" || !errors.Is(err, memory.ErrExists) {
		return nil, false, err
	}
	w, err = c.reopen(ctx, rec)
	return w, err == nil, err
}

// reopen returns the Wait of the record the session has under rec.Key.
func (c *Core) reopen(ctx context.Context, rec memory.Approval) (*Wait, error) {
	a, err := c.cfg.Store.ApprovalByKey(ctx, rec.SessionID, rec.Key)
	if err != nil {
		return nil, err
	}
	if a.Decided {
		c.mu.Lock()
		c.read.add(a.ID) // its note, if still to come, is not news
		c.mu.Unlock()
		return &Wait{c: c, Record: &a}, nil
	}
	c.mu.Lock()
	if c.entries[a.ID] != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("wait %s of %s is held in this process already", a.ID, rec.Key)
	}
	e := c.insert(a)
	c.mu.Unlock()
	// Read again now that the entry is in place: a decision taken between
	// the lookup and the insert had no entry to wake.
	if b, err := c.cfg.Store.GetApproval(ctx, a.ID); err == nil && b.Decided {
		c.deliverRead(b)
		a = b
	}
	return &Wait{c: c, e: e, Record: &a}, nil
}

// insert adds an entry for rec. c.mu must be held.
func (c *Core) insert(rec memory.Approval) *entry {
	e := &entry{id: rec.ID, session: rec.SessionID, due: addSat(c.at(rec.CreatedAt), c.cfg.Timeout), index: -1, done: make(chan struct{}), pending: true}
	c.entries[e.id] = e
	return e
}

// drop removes e, if it is still the entry of its id.
func (c *Core) drop(e *entry) {
	c.mu.Lock()
	c.remove(e)
	c.mu.Unlock()
}

// remove takes e out of the waits this Core holds. c.mu must be held.
func (c *Core) remove(e *entry) {
	c.unwait(e)
	if c.entries[e.id] == e {
		delete(c.entries, e.id)
	}
}

// finish records the decided record a as e's outcome and wakes its
// waiter, unless the timer woke it already (it then finds rec when it
// looks). c.mu must be held and e pending.
func (c *Core) finish(e *entry, a memory.Approval) {
	e.pending = false
	e.rec = &a
	c.unwait(e)
	if !e.fired {
		close(e.done)
	}
}

// Release gives up a Wait that will not be waited for, leaving its record
// as it is. (A Wait that waits when it is released no longer hears of
// decisions, but still ends at its deadline, as it always did: only its own
// end takes it out of the waits the timer wakes, and an entry nobody waits
// for is never among them.)
func (w *Wait) Release() {
	if w.e == nil {
		return
	}
	c, e := w.c, w.e
	c.mu.Lock()
	if c.entries[e.id] == e {
		delete(c.entries, e.id)
	}
	c.mu.Unlock()
}

// Wait waits for the decision and returns the decided record. It returns
// an error wrapping suspend.ErrSuspended (agent.ErrSuspended) when it
// suspends (after SuspendAfter, or because ctx was cancelled with that
// cause: the record stays as it is), and ctx's error with the interrupted
// record when ctx ended otherwise. A wait nobody answered in time is
// decided TimedOut.
func (w *Wait) Wait(ctx context.Context) (memory.Approval, error) {
	if w.e == nil {
		return *w.Record, nil // decided when opened: the caller has not let go of it
	}
	c, e := w.c, w.e
	c.mu.Lock()
	if e.waiting {
		c.mu.Unlock()
		return memory.Approval{}, ErrAlreadyWaiting
	}
	e.waiting = true
	if suspendedBy(ctx) {
		c.remove(e)
		c.mu.Unlock()
		return memory.Approval{}, context.Cause(ctx)
	}
	if !e.pending {
		c.remove(e)
		a := *e.rec
		c.mu.Unlock()
		return a, nil
	}
	if ctx.Err() != nil {
		c.mu.Unlock()
		return c.end(ctx, e, c.cfg.Interrupted, ctx.Err())
	}
	c.await(e)
	c.mu.Unlock()

	select {
	case <-e.done:
		c.mu.Lock()
		if e.pending { // the timer woke it: due passed
			suspends := e.suspends
			c.mu.Unlock()
			if suspends {
				return c.suspend(e)
			}
			return c.end(ctx, e, c.cfg.TimedOut, nil) // a decision that came first wins there
		}
		c.remove(e)
		a := *e.rec
		c.mu.Unlock()
		if suspendedBy(ctx) {
			return memory.Approval{}, context.Cause(ctx) // the resumed turn takes it from the store
		}
		return a, nil
	case <-ctx.Done():
		if suspendedBy(ctx) {
			c.drop(e)
			return memory.Approval{}, context.Cause(ctx)
		}
		return c.end(ctx, e, c.cfg.Interrupted, ctx.Err())
	}
}

// await puts e, whose Wait is about to wait, among the waits the timer
// wakes, due at its deadline or, when SuspendAfter comes first, when it
// suspends. c.mu must be held and e pending.
func (c *Core) await(e *entry) {
	now := c.now()
	if s := c.cfg.SuspendAfter; s > 0 && int64(s) < e.due-now {
		e.due, e.suspends = now+int64(s), true
	}
	heap.Push(&c.waits, e)
	if e.index == 0 {
		c.arm()
	}
}

// unwait takes e out of the waits the timer wakes, if it is there. c.mu
// must be held.
func (c *Core) unwait(e *entry) {
	if e.index < 0 {
		return
	}
	first := e.index == 0
	heap.Remove(&c.waits, e.index)
	if first {
		c.arm()
	}
}

// arm sets the timer for the earliest due of the waits, or stops it when
// there is none. c.mu must be held.
func (c *Core) arm() {
	if len(c.waits) == 0 {
		if c.armed {
			c.timer.Stop()
			c.armed = false
		}
		return
	}
	due := c.waits[0].due
	if c.armed && c.timerDue == due {
		return
	}
	d := time.Duration(due - c.now())
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d) // if expire is on its way meanwhile, it finds nothing due, or less
	}
	c.armed, c.timerDue = true, due
}

// expire is the timer's function: it wakes every wait whose due passed,
// and arms the timer for the next one.
func (c *Core) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	now := c.now()
	for len(c.waits) > 0 && c.waits[0].due <= now {
		e := heap.Pop(&c.waits).(*entry)
		e.fired = true
		close(e.done)
	}
	c.arm()
}

// now returns the time since c.epoch in nanoseconds.
func (c *Core) now() int64 { return int64(time.Since(c.epoch)) }

// at returns t as nanoseconds since c.epoch.
func (c *Core) at(t time.Time) int64 { return int64(t.Sub(c.epoch)) }

// addSat returns a+d, or the largest int64 when that overflows.
func addSat(a int64, d time.Duration) int64 {
	if s := a + int64(d); d <= 0 || s > a {
		return s
	}
	return math.MaxInt64
}

// dueHeap is a container/heap of entries, earliest due first, that keeps
// each entry's index.
type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}

// Pop removes the last entry; a slice a burst of waits grew is given back
// once it is three quarters empty.
func (h *dueHeap) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n]
	old[n] = nil
	e.index = -1
	*h = old[:n]
	if cap(old) > 64 && n < cap(old)/4 {
		*h = append(dueHeap(nil), old[:n]...)
	}
	return e
}

// suspendedBy reports whether ctx ended to suspend the run.
func suspendedBy(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), suspend.ErrSuspended)
}

// end decides e with d, because the wait ended (ctxErr, its context's
// error, or nil for a timeout), unless a decision came first, which it
// then returns with a nil error.
func (c *Core) end(ctx context.Context, e *entry, d memory.ApprovalDecision, ctxErr error) (memory.Approval, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	a, err := c.cfg.Store.DecideApproval(sctx, e.session, e.id, d)
	switch {
	case err == nil:
		c.counted()
		return c.settle(e, a, false), ctxErr
	case errors.Is(err, memory.ErrDecided):
		return c.settle(e, a, true), nil
	}
	// Deleted, or the store failed: the wait ends all the same.
	a = memory.Approval{ID: e.id, SessionID: e.session, Decided: true, Decision: d, DecidedAt: time.Now()}
	out := c.settle(e, a, false)
	if !errors.Is(err, memory.ErrNotFound) {
		ctxErr = errors.Join(ctxErr, fmt.Errorf("the store did not record the outcome of %s: %w", e.id, err))
	}
	return out, ctxErr
}

// settle gives e the decided record a unless it has one, removes it, and
// returns the record e has. read says that another process took a, whose
// note may still come.
func (c *Core) settle(e *entry, a memory.Approval, read bool) memory.Approval {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.pending {
		c.finish(e, a)
		if read {
			c.read.add(a.ID)
		}
	}
	c.remove(e)
	return *e.rec
}

// suspend ends the wait for e without a decision, after a last look at the
// store: a decision that came in meanwhile wins.
func (c *Core) suspend(e *entry) (memory.Approval, error) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	a, err := c.cfg.Store.GetApproval(ctx, e.id)
	if err == nil && a.Decided {
		return c.settle(e, a, true), nil
	}
	c.mu.Lock()
	c.remove(e)
	if !e.pending {
		a := *e.rec
		c.mu.Unlock()
		return a, nil
	}
	c.mu.Unlock()
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return memory.Approval{}, fmt.Errorf("%w (the store could not be checked for a decision: %v)", suspend.ErrSuspended, err)
	}
	return memory.Approval{}, suspend.ErrSuspended
}

// Decide takes the decision d for the pending wait id of sessionID, first
// writer wins. check, when not nil, is called with the stored record and
// the decision before anything is decided: it may complete the decision,
// or refuse it with its error (the wait stays pending). It reports whether the wait was pending: false for
// an unknown id, one of another kind, one decided already, or one past its
// timeout (which it then decides as timed out). Another session's wait
// fails with ErrWrongSession.
func (c *Core) Decide(ctx context.Context, sessionID, id string, d memory.ApprovalDecision, check func(memory.Approval, *memory.ApprovalDecision) error) (bool, error) {
	if id == "" {
		return false, nil
	}
	a, err := c.cfg.Store.GetApproval(ctx, id)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case a.SessionID != sessionID:
		return false, ErrWrongSession
	case !c.mine(a.Kind):
		return false, nil
	case a.Decided:
		c.deliverRead(a)
		return false, nil
	}
	if check != nil {
		if err := check(a, &d); err != nil {
			return false, err
		}
	}
	late := c.Expired(a, time.Now())
	if late {
		d = c.cfg.TimedOut
	}
	a, err = c.cfg.Store.DecideApproval(ctx, sessionID, id, d)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return false, nil
	case errors.Is(err, memory.ErrWrongSession):
		return false, ErrWrongSession
	case errors.Is(err, memory.ErrDecided):
		c.deliverRead(a)
		return false, nil
	case err != nil:
		return false, err
	}
	c.counted()
	c.announce(ctx, a, false)
	return !late, nil
}

// Cancel decides the pending wait id of sessionID with d, whatever its
// kind, as a run that closed the wait's call does; it tells no OnDecided.
// An unknown or decided wait is left as it is.
func (c *Core) Cancel(ctx context.Context, sessionID, id string, d memory.ApprovalDecision) error {
	if id == "" {
		return nil
	}
	a, err := c.cfg.Store.DecideApproval(ctx, sessionID, id, d)
	switch {
	case err == nil:
		c.counted()
		c.mu.Lock()
		c.deliver(a, true)
		c.mu.Unlock()
	case errors.Is(err, memory.ErrDecided):
		c.deliverRead(a)
	case errors.Is(err, memory.ErrNotFound):
	case errors.Is(err, memory.ErrWrongSession):
		return ErrWrongSession
	default:
		return err
	}
	return nil
}

// CancelSession decides every pending wait of this Core's kind in the
// session with Interrupted, and returns how many it decided.
func (c *Core) CancelSession(ctx context.Context, sessionID string) (int, error) {
	if sessionID == "" {
		return 0, nil // the store would list every session's waits
	}
	list, err := c.cfg.Store.PendingApprovals(ctx, sessionID)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, p := range list {
		if !c.mine(p.Kind) {
			continue
		}
		a, err := c.cfg.Store.DecideApproval(ctx, sessionID, p.ID, c.cfg.Interrupted)
		switch {
		case err == nil:
			n++
			c.counted()
			c.announce(ctx, a, true)
		case errors.Is(err, memory.ErrDecided), errors.Is(err, memory.ErrNotFound):
		default:
			errs = append(errs, fmt.Errorf("cancel %s: %w", p.ID, err))
		}
	}
	return n, errors.Join(errs...)
}

// Pending lists the session's pending waits of this Core's kind, oldest
// first. A wait past its timeout is decided as timed out instead of
// listed.
func (c *Core) Pending(ctx context.Context, sessionID string) ([]memory.Approval, error) {
	if sessionID == "" {
		return nil, nil
	}
	list, err := c.cfg.Store.PendingApprovals(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := list[:0]
	for _, a := range list {
		switch {
		case !c.mine(a.Kind):
		case c.Expired(a, now):
			if _, err := c.Decide(ctx, sessionID, a.ID, c.cfg.TimedOut, nil); err != nil {
				return nil, err
			}
		default:
			out = append(out, a)
		}
	}
	return out, nil
}

// Record stores a decision taken without asking anybody (a policy's) for
// the audit, unless rec.Key names a record the session has: a decision
// taken on that one stands and is returned, a pending one is decided with
// d. It returns the record whose decision stands.
func (c *Core) Record(ctx context.Context, rec memory.Approval, d memory.ApprovalDecision) (memory.Approval, error) {
	rec.Kind = c.cfg.Kind
	rec.ID = NewID()
	rec.CreatedAt = time.Now()
	rec.Decided, rec.Decision, rec.DecidedAt = true, d, rec.CreatedAt
	err := c.cfg.Store.CreateApproval(ctx, rec)
	if err == nil {
		c.counted()
		return rec, nil
	}
	if rec.Key == "" || !errors.Is(err, memory.ErrExists) {
		return memory.Approval{}, err
	}
	a, err := c.cfg.Store.ApprovalByKey(ctx, rec.SessionID, rec.Key)
	if err != nil || a.Decided {
		return a, err
	}
	a, err = c.cfg.Store.DecideApproval(ctx, rec.SessionID, a.ID, d)
	switch {
	case err == nil:
		c.counted()
		c.announce(ctx, a, false)
	case errors.Is(err, memory.ErrDecided):
		c.deliverRead(a)
		err = nil
	}
	return a, err
}

// mine reports whether kind is this Core's.
func (c *Core) mine(kind string) bool {
	if kind == "" {
		kind = memory.KindApproval
	}
	return kind == c.cfg.Kind
}

// counted notes one more decision, and keeps a private store bounded.
func (c *Core) counted() {
	if !c.private {
		return
	}
	c.mu.Lock()
	c.decided++
	forget := c.decided >= keepPrivate/4
	if forget {
		c.decided = 0
	}
	c.mu.Unlock()
	if forget {
		if f, ok := c.cfg.Store.(interface{ ForgetDecided(int) int }); ok {
			f.ForgetDecided(keepPrivate)
		}
	}
}

// deliver gives the decided record a to this Core's entry for it, if
// pending, and wakes its Wait. An entry whose Wait waits leaves at once, and
// so does any when drop is set. It reports whether it had an entry for a.
// c.mu must be held.
func (c *Core) deliver(a memory.Approval, drop bool) (woke, had bool) {
	e := c.entries[a.ID]
	if e == nil {
		return false, false
	}
	if e.pending {
		c.finish(e, a)
		woke = true
	}
	if e.waiting || drop {
		c.remove(e)
	}
	return woke, true
}

// deliverRead delivers a decision read from the store and taken by
// another Core, whose note may still come.
func (c *Core) deliverRead(a memory.Approval) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if woke, _ := c.deliver(a, false); woke {
		c.read.add(a.ID)
	}
}

// announce tells of the decision a this Core just took: to its own entry,
// else to OnDecided, and to the other processes.
func (c *Core) announce(ctx context.Context, a memory.Approval, drop bool) {
	c.mu.Lock()
	_, had := c.deliver(a, drop)
	if !had && c.read.take(a.ID) {
		had = true
	}
	c.mu.Unlock()
	if !had && c.cfg.OnDecided != nil {
		c.cfg.OnDecided(a)
	}
	if c.cfg.Notifier == nil {
		return
	}
	payload, err := json.Marshal(Note{SessionID: a.SessionID, ID: a.ID, Kind: c.cfg.Kind, From: c.instance})
	if err != nil || len(payload) > memory.MaxNotifyPayload {
		return // ids too long for a note: the waiter finds the decision when it suspends or times out
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	_ = c.cfg.Notifier.Notify(nctx, Channel, string(payload)) // a hint: a waiter that misses it reads the store later
}

// onNote is called by the Notifier with every note on Channel.
func (c *Core) onNote(payload string) {
	if payload == "" {
		c.recheck()
		return
	}
	n, ok := ParseNote(payload)
	if !ok || n.From == c.instance || (n.Kind != "" && !c.mine(n.Kind)) {
		return // not a note, this Core's own, or another kind's
	}
	c.mu.Lock()
	e := c.entries[n.ID]
	known := (e == nil && c.read.take(n.ID)) || (e != nil && !e.pending)
	c.mu.Unlock()
	if known {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	a, err := c.cfg.Store.GetApproval(ctx, n.ID)
	if err != nil || !a.Decided || !c.mine(a.Kind) {
		return
	}
	c.mu.Lock()
	_, had := c.deliver(a, false)
	if !had && c.read.take(a.ID) {
		had = true
	}
	c.mu.Unlock()
	if !had && c.cfg.OnDecided != nil {
		c.cfg.OnDecided(a)
	}
}

// recheck looks up every wait this Core holds in the store, after the
// Notifier said that notes may have been lost.
func (c *Core) recheck() {
	c.mu.Lock()
	ids := make([]string, 0, len(c.entries))
	for id, e := range c.entries {
		if e.pending {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		a, err := c.cfg.Store.GetApproval(ctx, id)
		cancel()
		if err == nil && a.Decided {
			c.deliverRead(a)
		}
	}
}

// maxRead is how many ids a readDecisions remembers.
const maxRead = 1024

// readDecisions remembers the ids of the waits whose decision an entry of
// this Core took from the store (another Core took it) before the note
// about it came: without it, the note would go to OnDecided as a decision
// no Wait took. A note comes at most once and shortly after the decision,
// so the oldest ids are forgotten first.
type readDecisions struct {
	ids  map[string]struct{}
	ring []string
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

func (r *readDecisions) take(id string) bool {
	if _, ok := r.ids[id]; !ok {
		return false
	}
	delete(r.ids, id)
	return true
}
