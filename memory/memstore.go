package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/planround/planround/memory/internal/notehub"
)

// MemStore is a [Store] that keeps everything in memory. Its zero value is
// an empty store ready to use. It is safe for concurrent use, and it copies
// on the way in and out, so callers never share memory with what is stored.
// A MemStore must not be copied after first use.
type MemStore struct {
	// mu guards every field below and the sessions they point to.
	mu        sync.RWMutex
	sessions  map[string]*memSession
	lastMsgID int64 // last message id handed out, across sessions
	lastSumID int64 // last summary id handed out, across sessions

	approvals map[string]*Approval // by id
	// pending points to each approval that has no decision, by session,
	// so that a session's pending list costs what it holds. A slice, not a
	// map by id: a session has few pending at once, and a map per session
	// weighed 0.3 KB for each run paused at an approval.
	pending map[string][]*Approval
	// byKey and decided point to records of approvals: byKey to each one
	// that has a Key, by session and Key, and decided to each decided one,
	// ordered by DecidedAt and then ID; neither to any other.
	byKey   map[approvalKey]*Approval
	decided []*Approval

	leases map[string]memLease // by session id
	notes  notehub.Hub         // the listeners of Notify
	kv     map[kvKey][]byte    // the values of KV

	apiLog memAPILog // the records of APILog
}

// approvalKey names an approval by its session and [Approval.Key].
type approvalKey struct{ session, key string }

// memLease is a lease of a MemStore.
type memLease struct {
	holder  string
	expires time.Time
}

// memSession is one session of a MemStore; guarded by MemStore.mu.
type memSession struct {
	s         Session
	msgs      []Message  // append order; archived ones keep their place
	active    nextActive // the active ones among msgs, for Summarize
	summaries []Summary  // oldest first
	calls     []OpenCall // in the order first saved
	log       memLog     // the event log
}

// now is the clock of both stores; it returns UTC without a monotonic
// reading.
func now() time.Time { return time.Now().UTC() }

// session returns the named session or an error wrapping ErrNotFound.
// The caller holds mu.
func (st *MemStore) session(op, id string) (*memSession, error) {
	ms := st.sessions[id]
	if ms == nil {
		return nil, fmt.Errorf("memory: %s %q: %w", op, id, ErrNotFound)
	}
	return ms, nil
}

// CreateSession implements [Store.CreateSession].
func (st *MemStore) CreateSession(ctx context.Context, s Session) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	if err := ValidateSession(s); err != nil {
		return Session{}, fmt.Errorf("memory: create session: %w", err)
	}
	if s.ID == "" {
		s.ID = NewSessionID()
	}
	s.CreatedAt = normTime(s.CreatedAt, now())
	s.UpdatedAt = normTime(s.UpdatedAt, s.CreatedAt)

	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[s.ID]; ok {
		return Session{}, fmt.Errorf("memory: create session %q: %w", s.ID, ErrExists)
	}
	if st.sessions == nil {
		st.sessions = make(map[string]*memSession)
	}
	st.sessions[s.ID] = &memSession{s: s}
	return s, nil
}

// Session implements [Store.Session].
func (st *MemStore) Session(ctx context.Context, id string) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("session", id)
	if err != nil {
		return Session{}, err
	}
	return ms.s, nil
}

// Sessions implements [Store.Sessions].
func (st *MemStore) Sessions(ctx context.Context) ([]Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	out := make([]Session, 0, len(st.sessions))
	for _, ms := range st.sessions {
		out = append(out, ms.s)
	}
	st.mu.RUnlock()
	slices.SortFunc(out, func(a, b Session) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// RenameSession implements [Store.RenameSession].
func (st *MemStore) RenameSession(ctx context.Context, id, title string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ms, err := st.session("rename session", id)
	if err != nil {
		return err
	}
	ms.s.Title = title
	ms.s.UpdatedAt = now()
	return nil
}

// DeleteSession implements [Store.DeleteSession].
func (st *MemStore) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := st.session("delete session", id); err != nil {
		return err
	}
	delete(st.sessions, id)
	delete(st.leases, id)
	st.deleteApprovals(func(a *Approval) bool { return a.SessionID == id })
	st.apiLog.calls = slices.DeleteFunc(st.apiLog.calls, func(c APICall) bool { return c.SessionID == id })
	return nil
}

// Append implements [Store.Append].
func (st *MemStore) Append(ctx context.Context, sessionID string, msgs ...Message) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateMessages(msgs); err != nil {
		return nil, fmt.Errorf("memory: append to %q: %w", sessionID, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.appendLocked(sessionID, msgs)
}

// appendLocked appends valid msgs to the session, with st.mu held.
func (st *MemStore) appendLocked(sessionID string, msgs []Message) ([]Message, error) {
	ms, err := st.session("append to", sessionID)
	if err != nil {
		return nil, err
	}
	out := CloneMessages(msgs)
	t := now()
	for i := range out {
		st.lastMsgID++
		out[i].ID = st.lastMsgID
		out[i].CreatedAt = normTime(out[i].CreatedAt, t)
	}
	ms.msgs = append(ms.msgs, CloneMessages(out)...)
	ms.active.grow(len(ms.msgs))
	for _, m := range out {
		if m.Role == RoleTool {
			ms.calls = slices.DeleteFunc(ms.calls, func(c OpenCall) bool { return c.CallID == m.ToolCallID })
		}
	}
	ms.s.UpdatedAt = t
	return out, nil
}

// Messages implements [Store.Messages].
func (st *MemStore) Messages(ctx context.Context, sessionID string, all bool) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("messages of", sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(ms.msgs))
	for _, m := range ms.msgs {
		if all || !m.Archived() {
			out = append(out, m.clone())
		}
	}
	return out, nil
}

// Summarize implements [Store.Summarize].
func (st *MemStore) Summarize(ctx context.Context, sessionID string, s Summary) (Summary, error) {
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	if err := ValidateSummary(s); err != nil {
		return Summary{}, fmt.Errorf("memory: summarize %q: %w", sessionID, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ms, err := st.session("summarize", sessionID)
	if err != nil {
		return Summary{}, err
	}
	// ids increase with the index, so the range is one contiguous run;
	// the active ones in it are found without a look at the archived ones
	// (a scan of the range would make n summaries over one range cost n²).
	lo, hi := idRange(ms.msgs, s.FirstID, s.LastID)
	hops := ms.active.hops
	first := ms.active.from(lo)
	if first >= hi {
		replayVisits.Add(ms.active.hops - hops)
		return Summary{}, fmt.Errorf("memory: summarize %q: no active message in [%d, %d]", sessionID, s.FirstID, s.LastID)
	}
	t := now()
	st.lastSumID++
	s.ID = st.lastSumID
	s.CreatedAt = normTime(s.CreatedAt, t)
	n := 0
	for i := first; i < hi; i = ms.active.from(i + 1) {
		ms.msgs[i].SummaryID = s.ID
		ms.active.remove(i)
		n++
	}
	replayVisits.Add(int64(n) + ms.active.hops - hops)
	ms.summaries = append(ms.summaries, s)
	ms.s.UpdatedAt = t
	return s, nil
}

// Summaries implements [Store.Summaries].
func (st *MemStore) Summaries(ctx context.Context, sessionID string) ([]Summary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("summaries of", sessionID)
	if err != nil {
		return nil, err
	}
	return slices.Clone(ms.summaries), nil
}

var _ Store = (*MemStore)(nil)
