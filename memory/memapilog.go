package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// memAPILog is the API log of a MemStore; guarded by MemStore.mu.
type memAPILog struct {
	limits APILogLimits
	last   int64     // the last id handed out
	calls  []APICall // by id, oldest first
	// oldest is the earliest Started among calls (records may come with
	// any Started), so that an append looks for expired records only when
	// there are some.
	oldest time.Time
}

// SetAPILogLimits sets the bounds of the store's [APILog] (zero: the
// defaults), applied from the next append on.
func (st *MemStore) SetAPILogLimits(l APILogLimits) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.apiLog.limits = l
}

// AppendAPICall implements [APILog.AppendAPICall]. It drops the oldest
// records beyond the row bound, and the expired ones when the earliest
// record kept has expired: O(1) amortised, O(n) only when something
// expired.
func (st *MemStore) AppendAPICall(ctx context.Context, c APICall) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := ValidateAPICall(c); err != nil {
		return 0, fmt.Errorf("memory: append api call: %w", err)
	}
	c = cloneAPICall(c)
	t := now()
	c.Started = normTime(c.Started, t)
	st.mu.Lock()
	defer st.mu.Unlock()
	l := &st.apiLog
	l.last++
	c.ID = l.last
	l.calls = append(l.calls, c)
	if len(l.calls) == 1 || c.Started.Before(l.oldest) {
		l.oldest = c.Started
	}
	if n := l.limits.Rows(); n > 0 && len(l.calls) > n {
		l.calls = slices.Delete(l.calls, 0, len(l.calls)-n)
		l.resetOldest()
	}
	if age := l.limits.Age(); age > 0 {
		if cutoff := t.Add(-age); l.oldest.Before(cutoff) {
			l.calls = slices.DeleteFunc(l.calls, func(c APICall) bool { return c.Started.Before(cutoff) })
			l.resetOldest()
		}
	}
	return c.ID, nil
}

// resetOldest computes oldest again.
func (l *memAPILog) resetOldest() {
	l.oldest = time.Time{}
	for i, c := range l.calls {
		if i == 0 || c.Started.Before(l.oldest) {
			l.oldest = c.Started
		}
	}
}

// APICalls implements [APILog.APICalls].
func (st *MemStore) APICalls(ctx context.Context, q APICallQuery) ([]APICall, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := []APICall{}
	calls := st.apiLog.calls
	for i := len(calls) - 1; i >= 0; i-- {
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
		if q.match(calls[i]) {
			out = append(out, cloneAPICall(calls[i]))
		}
	}
	return out, nil
}

// APICall implements [APILog.APICall].
func (st *MemStore) APICall(ctx context.Context, id int64) (APICall, error) {
	if err := ctx.Err(); err != nil {
		return APICall{}, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	calls := st.apiLog.calls
	if i, ok := slices.BinarySearchFunc(calls, id, func(c APICall, id int64) int { return cmp.Compare(c.ID, id) }); ok {
		return cloneAPICall(calls[i]), nil
	}
	return APICall{}, fmt.Errorf("memory: api call %d: %w", id, ErrNotFound)
}

// DeleteAPICalls implements [APILog.DeleteAPICalls].
func (st *MemStore) DeleteAPICalls(ctx context.Context, q APICallQuery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.apiLog.calls = slices.DeleteFunc(st.apiLog.calls, q.match)
	st.apiLog.resetOldest()
	return nil
}

var _ APILog = (*MemStore)(nil)
