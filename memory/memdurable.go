package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"
)

// SaveCall implements [CallLog.SaveCall].
func (st *MemStore) SaveCall(ctx context.Context, sessionID string, c OpenCall) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateOpenCall(c); err != nil {
		return fmt.Errorf("memory: save call of %q: %w", sessionID, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ms, err := st.session("save call of", sessionID)
	if err != nil {
		return err
	}
	if len(c.Arguments) > 0 {
		m, err := ms.callMessage(c)
		if err != nil {
			return fmt.Errorf("memory: save call of %q: %w", sessionID, err)
		}
		// The stored message is the store's own copy (Append and Messages
		// copy), so it may be changed in place.
		for k := range m.ToolCalls {
			if m.ToolCalls[k].ID == c.CallID {
				m.ToolCalls[k].Arguments = bytes.Clone(c.Arguments)
			}
		}
		c.Arguments = nil
	}
	c.UpdatedAt = now()
	for i, old := range ms.calls {
		if old.MessageID == c.MessageID && old.CallID == c.CallID {
			ms.calls[i] = c
			return nil
		}
	}
	ms.calls = append(ms.calls, c)
	return nil
}

// callMessage returns the stored assistant message c.MessageID of the
// session, which must hold the call c.CallID. The caller holds mu.
func (ms *memSession) callMessage(c OpenCall) (*Message, error) {
	i, ok := slices.BinarySearchFunc(ms.msgs, c.MessageID, func(m Message, id int64) int { return cmp.Compare(m.ID, id) })
	if !ok {
		return nil, fmt.Errorf("open call %q: no message %d in the session", c.CallID, c.MessageID)
	}
	m := &ms.msgs[i]
	if !slices.ContainsFunc(m.ToolCalls, func(tc ToolCall) bool { return tc.ID == c.CallID }) {
		return nil, fmt.Errorf("open call %q: message %d has no such call", c.CallID, c.MessageID)
	}
	return m, nil
}

// AppendCalls implements [CallLog.AppendCalls].
func (st *MemStore) AppendCalls(ctx context.Context, sessionID string, calls []OpenCall, msgs ...Message) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateAppendCalls(calls, msgs); err != nil {
		return nil, fmt.Errorf("memory: append calls to %q: %w", sessionID, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	out, err := st.appendLocked(sessionID, msgs)
	if err != nil {
		return nil, err
	}
	ms := st.sessions[sessionID]
	t := now()
	for _, c := range calls {
		c.MessageID, c.UpdatedAt = out[len(out)-1].ID, t
		ms.calls = append(ms.calls, c)
	}
	return out, nil
}

// OpenCalls implements [CallLog.OpenCalls].
func (st *MemStore) OpenCalls(ctx context.Context, sessionID string) ([]OpenCall, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("open calls of", sessionID)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(ms.calls)
	slices.SortStableFunc(out, func(a, b OpenCall) int { return cmp.Compare(a.MessageID, b.MessageID) })
	return out, nil
}

// OpenSessions implements [CallLog.OpenSessions].
func (st *MemStore) OpenSessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []string
	for id, ms := range st.sessions {
		if len(ms.calls) > 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

// CreateApproval implements [ApprovalStore.CreateApproval].
func (st *MemStore) CreateApproval(ctx context.Context, a Approval) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateApproval(a); err != nil {
		return err
	}
	t := now()
	a = a.clone()
	a.CreatedAt = normTime(a.CreatedAt, t)
	if a.Decided {
		a.DecidedAt = normTime(a.DecidedAt, t)
	} else {
		a.Decision, a.DecidedAt = ApprovalDecision{}, time.Time{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.approvals[a.ID]; ok {
		return fmt.Errorf("memory: create approval %q: %w", a.ID, ErrExists)
	}
	k := approvalKey{a.SessionID, a.Key}
	if a.Key != "" {
		if _, ok := st.byKey[k]; ok {
			return fmt.Errorf("memory: create approval %q: session %q has key %q already: %w", a.ID, a.SessionID, a.Key, ErrExists)
		}
	}
	if st.approvals == nil {
		st.approvals = make(map[string]*Approval)
	}
	p := &a
	st.approvals[a.ID] = p
	if a.Key != "" {
		if st.byKey == nil {
			st.byKey = make(map[approvalKey]*Approval)
		}
		st.byKey[k] = p
	}
	if a.Decided {
		st.addDecided(p)
	} else {
		st.addPending(p)
	}
	return nil
}

// addPending indexes the pending approval a. The caller holds mu.
func (st *MemStore) addPending(a *Approval) {
	if st.pending == nil {
		st.pending = make(map[string][]*Approval)
	}
	st.pending[a.SessionID] = append(st.pending[a.SessionID], a)
}

// dropPending removes a from the index of pending approvals. The caller
// holds mu.
func (st *MemStore) dropPending(a *Approval) {
	s := st.pending[a.SessionID]
	i := slices.Index(s, a)
	switch {
	case i < 0:
	case len(s) == 1:
		delete(st.pending, a.SessionID)
	default:
		st.pending[a.SessionID] = slices.Delete(s, i, i+1)
	}
}

// compareDecided orders decided approvals by DecidedAt and then by ID.
func compareDecided(a, b *Approval) int {
	return cmp.Or(a.DecidedAt.Compare(b.DecidedAt), cmp.Compare(a.ID, b.ID))
}

// addDecided puts the decided approval a in its place in st.decided: at the
// end, unless a was decided before the last one (a record created
// decided). The caller holds mu.
func (st *MemStore) addDecided(a *Approval) {
	n := len(st.decided)
	if n == 0 || compareDecided(st.decided[n-1], a) < 0 {
		st.decided = append(st.decided, a)
		return
	}
	i, _ := slices.BinarySearchFunc(st.decided, a, compareDecided)
	st.decided = slices.Insert(st.decided, i, a)
}

// deleteApprovals removes the approvals for which drop reports true, and
// returns how many. The caller holds mu.
func (st *MemStore) deleteApprovals(drop func(*Approval) bool) int {
	n := 0
	for id, a := range st.approvals {
		if drop(a) {
			delete(st.approvals, id)
			if a.Key != "" {
				delete(st.byKey, approvalKey{a.SessionID, a.Key})
			}
			st.dropPending(a)
			n++
		}
	}
	st.decided = slices.DeleteFunc(st.decided, drop)
	return n
}

// ForgetDecided removes every decided approval except the keep most
// recently decided (by DecidedAt, then ID), and returns how many it
// removed. Pending approvals are never removed. The keys and ids of the
// removed ones are free again. A store that only one process uses, such as
// the private store of an in-memory approval service, calls it to stay
// bounded. It costs O(1) while there are at most keep decided approvals,
// and time in proportion to the number removed plus keep otherwise.
func (st *MemStore) ForgetDecided(keep int) int {
	keep = max(keep, 0)
	st.mu.Lock()
	defer st.mu.Unlock()
	n := len(st.decided) - keep
	if n <= 0 {
		return 0
	}
	for _, a := range st.decided[:n] {
		delete(st.approvals, a.ID)
		if a.Key != "" {
			delete(st.byKey, approvalKey{a.SessionID, a.Key})
		}
	}
	// Copied down rather than resliced, so that the backing array does
	// not keep the removed records alive.
	st.decided = slices.Delete(st.decided, 0, n)
	return n
}

// DecideApproval implements [ApprovalStore.DecideApproval].
func (st *MemStore) DecideApproval(ctx context.Context, sessionID, id string, d ApprovalDecision) (Approval, error) {
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	a, ok := st.approvals[id]
	switch {
	case !ok:
		return Approval{}, fmt.Errorf("memory: decide approval %q: %w", id, ErrNotFound)
	case a.SessionID != sessionID:
		return Approval{}, fmt.Errorf("memory: decide approval %q: %w", id, ErrWrongSession)
	case a.Decided:
		return a.clone(), fmt.Errorf("memory: decide approval %q: %w", id, ErrDecided)
	}
	a.Decided, a.Decision, a.DecidedAt = true, d.clone(), now()
	st.dropPending(a)
	st.addDecided(a)
	return a.clone(), nil
}

// GetApproval implements [ApprovalStore.GetApproval].
func (st *MemStore) GetApproval(ctx context.Context, id string) (Approval, error) {
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	a, ok := st.approvals[id]
	if !ok {
		return Approval{}, fmt.Errorf("memory: approval %q: %w", id, ErrNotFound)
	}
	return a.clone(), nil
}

// ApprovalByKey implements [ApprovalStore.ApprovalByKey].
func (st *MemStore) ApprovalByKey(ctx context.Context, sessionID, key string) (Approval, error) {
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	a, ok := st.byKey[approvalKey{sessionID, key}]
	if !ok || key == "" {
		return Approval{}, fmt.Errorf("memory: approval of %q with key %q: %w", sessionID, key, ErrNotFound)
	}
	return a.clone(), nil
}

// PendingApprovals implements [ApprovalStore.PendingApprovals].
func (st *MemStore) PendingApprovals(ctx context.Context, sessionID string) ([]Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	var out []Approval
	if sessionID != "" {
		for _, a := range st.pending[sessionID] {
			out = append(out, a.clone())
		}
	} else {
		for _, s := range st.pending {
			for _, a := range s {
				out = append(out, a.clone())
			}
		}
	}
	st.mu.RUnlock()
	slices.SortFunc(out, func(a, b Approval) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Decisions implements [ApprovalStore.Decisions]. It starts from the first
// record q selects in the order of decisions, found by binary search, and
// reads on until q.Until or q.Limit; the records of other sessions and
// kinds on the way are skipped.
func (st *MemStore) Decisions(ctx context.Context, q DecisionQuery) ([]Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	i := 0
	if !q.Since.IsZero() {
		i = sort.Search(len(st.decided), func(i int) bool {
			a := st.decided[i]
			if c := a.DecidedAt.Compare(q.Since); c != 0 {
				return c > 0
			}
			return q.AfterID == "" || a.ID > q.AfterID
		})
	}
	out := []Approval{}
	for _, a := range st.decided[i:] {
		if !q.Until.IsZero() && !a.DecidedAt.Before(q.Until) {
			break
		}
		if q.SessionID != "" && a.SessionID != q.SessionID || !matchKind(a.Kind, q.Kind) {
			continue
		}
		out = append(out, a.clone())
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// matchKind reports whether a record of kind is one that a [DecisionQuery]
// of Kind want selects.
func matchKind(kind, want string) bool {
	return want == "" || kind == want || want == KindApproval && kind == ""
}

// AcquireLease implements [Leaser.AcquireLease].
func (st *MemStore) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if holder == "" || ttl <= 0 {
		return false, fmt.Errorf("memory: acquire lease of %q: empty holder or ttl %s", sessionID, ttl)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	t := time.Now()
	if l, ok := st.leases[sessionID]; ok && l.holder != holder && t.Before(l.expires) {
		return false, nil
	}
	if st.leases == nil {
		st.leases = make(map[string]memLease)
	}
	st.leases[sessionID] = memLease{holder: holder, expires: t.Add(ttl)}
	return true, nil
}

// ReleaseLease implements [Leaser.ReleaseLease].
func (st *MemStore) ReleaseLease(ctx context.Context, sessionID, holder string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if l, ok := st.leases[sessionID]; ok && l.holder == holder {
		delete(st.leases, sessionID)
	}
	return nil
}

// Notify implements [Notifier.Notify], within the process: each listener
// has its own goroutine and a bounded queue (see memory/internal/notehub).
func (st *MemStore) Notify(ctx context.Context, channel, payload string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateNote(channel, payload); err != nil {
		return err
	}
	return st.notes.Deliver(channel, payload)
}

// Listen implements [Notifier.Listen], within the process.
func (st *MemStore) Listen(ctx context.Context, channel string, fn func(payload string)) (stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if channel == "" {
		return nil, fmt.Errorf("memory: listen: empty channel name")
	}
	if fn == nil {
		return nil, fmt.Errorf("memory: listen to %q: nil function", channel)
	}
	return st.notes.Add(channel, fn)
}

// maxApprovalDigest is the longest [Approval.Digest], in bytes.
const maxApprovalDigest = 100

func (a Approval) clone() Approval {
	a.Arguments = slices.Clone(a.Arguments)
	a.Decision = a.Decision.clone()
	return a
}

func (d ApprovalDecision) clone() ApprovalDecision {
	d.Arguments = slices.Clone(d.Arguments)
	return d
}

var (
	_ CallLog       = (*MemStore)(nil)
	_ ApprovalStore = (*MemStore)(nil)
	_ Notifier      = (*MemStore)(nil)
	_ Leaser        = (*MemStore)(nil)
)
