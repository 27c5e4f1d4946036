package memory

import (
	"context"
	"fmt"
	"slices"
)

// memLog is a session's event log in a MemStore; guarded by MemStore.mu.
type memLog struct {
	last   int64   // the number of the last event appended
	events []Event // the events kept: last-len(events)+1 .. last
}

// AppendEvents implements [EventLog.AppendEvents].
func (st *MemStore) AppendEvents(ctx context.Context, sessionID string, evs ...Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateEvents(evs); err != nil {
		return fmt.Errorf("memory: append events to %q: %w", sessionID, err)
	}
	evs = cloneEvents(evs)
	t := now()
	for i := range evs {
		evs[i].CreatedAt = normTime(evs[i].CreatedAt, t)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ms, err := st.session("append events to", sessionID)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	if evs[0].Seq != ms.log.last+1 {
		return fmt.Errorf("memory: append events to %q: seq %d, the log is at %d: %w", sessionID, evs[0].Seq, ms.log.last, ErrEventSeq)
	}
	ms.log.events = append(ms.log.events, evs...)
	ms.log.last = evs[len(evs)-1].Seq
	return nil
}

// Events implements [EventLog.Events].
func (st *MemStore) Events(ctx context.Context, sessionID string, after int64, limit int) ([]Event, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if after < 0 {
		return nil, 0, fmt.Errorf("memory: events of %q: after %d, want 0 or more", sessionID, after)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("events of", sessionID)
	if err != nil {
		return nil, 0, err
	}
	l := &ms.log
	// The events kept are numbered without a gap: the first one after
	// after is found by its number.
	first := l.last - int64(len(l.events)) + 1
	from := max(after+1-first, 0)
	if from >= int64(len(l.events)) {
		return []Event{}, l.last, nil
	}
	evs := l.events[from:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	return cloneEvents(evs), l.last, nil
}

// LastEvent implements [EventLog.LastEvent].
func (st *MemStore) LastEvent(ctx context.Context, sessionID string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	ms, err := st.session("last event of", sessionID)
	if err != nil {
		return 0, err
	}
	return ms.log.last, nil
}

// TrimEvents implements [EventLog.TrimEvents].
func (st *MemStore) TrimEvents(ctx context.Context, sessionID string, through int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ms, err := st.session("trim events of", sessionID)
	if err != nil {
		return err
	}
	l := &ms.log
	first := l.last - int64(len(l.events)) + 1
	if n := through - first + 1; n > 0 {
		// Delete shifts the rest down and clears the tail, so the trimmed
		// events' data can be collected.
		l.events = slices.Delete(l.events, 0, int(min(n, int64(len(l.events)))))
	}
	return nil
}

var _ EventLog = (*MemStore)(nil)
