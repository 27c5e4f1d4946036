package runner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/planround/planround/memory"
)

// The session's event log. Each session's events are numbered from 1 by
// the process that drives the session (it holds the lease), in memory
// (memLog, for the subscribers of this process, at once) and, with a Store
// that implements memory.EventLog, in the Store too (written in batches by
// the writer, for the subscribers of other processes and the next driver,
// which numbers its events after them). A turn's events are kept until
// TurnGrace after it ended, or the next turn starts.

// maxTurnEvents bounds the events a memLog keeps of one turn; beyond, the
// turn's first events are dropped here (a subscriber that needs them reads
// the Store's log, or gets ErrEventsLost).
const maxTurnEvents = 50_000

// memLog is a session's recent events in memory. Runner.mu guards it.
type memLog struct {
	known  bool    // last is known: numbered here, or read from the Store under the lease
	last   int64   // the Seq of the session's last event
	events []Event // the events kept, numbered last-len(events)+1 .. last
	open   int64   // the Seq of the EventTurnStarted of the turn in progress; 0 when none
	trim   *time.Timer
	// hidden is the Seq of an event added but not shown yet (a turn's end
	// until its lease is released); 0 when none.
	hidden int64
}

// empty reports whether the log holds nothing worth keeping the session
// for: no events, no turn in progress, no trim pending. What the log knows
// of the numbering is not kept for itself: the next driver reads it from
// the Store's log again, and without one numbers from 1, as a new process
// does (a subscriber's older cursor then gets ErrEventsLost).
func (l *memLog) empty() bool { return len(l.events) == 0 && l.open == 0 && l.trim == nil }

// add numbers ev after the last event, keeps it and returns it numbered;
// unless show, since does not return it before show is called.
func (l *memLog) add(ev Event, show bool) Event {
	l.last++
	if !show {
		l.hidden = l.last
	}
	ev.Seq = l.last
	switch ev.Kind {
	case EventTurnStarted:
		ev.Turn = ev.Seq
		l.open = ev.Seq
		// A new turn: the events of earlier ones are not needed here any
		// more.
		l.events = l.events[:0:0]
		l.stopTrim()
	case EventTurnEnded:
		if ev.Turn == l.open {
			l.open = 0
		}
	}
	if len(l.events) >= maxTurnEvents {
		l.events = l.events[1:]
	}
	l.events = append(l.events, ev)
	return ev
}

func (l *memLog) stopTrim() {
	if l.trim != nil {
		l.trim.Stop()
		l.trim = nil
	}
}

// show shows the hidden event.
func (l *memLog) show() { l.hidden = 0 }

// since returns the events after seq after and true, or false when the log
// does not hold all of them. A hidden event and those after it are not
// returned yet.
func (l *memLog) since(after int64) ([]Event, bool) {
	last := l.last
	if l.hidden != 0 {
		last = l.hidden - 1
	}
	switch {
	case after == last || (after > last && after <= l.last):
		return nil, true
	case after > l.last || after < 0:
		return nil, false
	}
	first := l.last - int64(len(l.events)) + 1
	if after+1 < first {
		return nil, false
	}
	return append([]Event(nil), l.events[after+1-first:last+1-first]...), true
}

// publish numbers ev in the session's log, keeps it, queues it for the
// Store's log and wakes the session's subscribers. It returns ev numbered.
// Only the session's driver publishes, one event at a time.
func (r *Runner) publish(ss *session, ev Event) Event {
	r.mu.Lock()
	ev = ss.log.add(ev, true)
	if r.onEvent != nil {
		r.onEvent(ss.id, ev)
	}
	wakeAll(ss)
	r.mu.Unlock()
	if r.writer != nil {
		r.writer.add(ss.id, ev)
	}
	return ev
}

// syncLog, called by a new driver that holds the session's lease, reads
// the Store's log: its numbering continues after it, and a turn a stopped
// process left open gets its EventTurnEnded.
func (r *Runner) syncLog(ctx context.Context, ss *session) error {
	if r.elog == nil {
		r.mu.Lock()
		ss.log.known = true
		stale := ss.log.open
		r.mu.Unlock()
		if stale != 0 {
			r.endStale(ctx, ss, stale)
		}
		return nil
	}
	// What this process wrote of the session before is written first (or
	// given up): the numbering goes on after the Store's log.
	r.writer.flush(ss.id, math.MaxInt64)
	r.writer.restart(ss.id)
	last, stale, err := r.tail(ctx, ss.id)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if !ss.log.known || ss.log.last != last {
		// Another process wrote meanwhile (or this one starts): its
		// events are read from the Store.
		ss.log.stopTrim()
		ss.log = memLog{known: true, last: last, open: stale}
	}
	r.mu.Unlock()
	if stale != 0 {
		r.endStale(ctx, ss, stale)
	}
	return nil
}

// endStale ends turn, which a process left open when it stopped: suspended
// when calls of the session wait, interrupted otherwise. The caller holds
// the session's lease.
func (r *Runner) endStale(ctx context.Context, ss *session, turn int64) {
	end := TurnEnded{Status: StatusInterrupted, Reason: ReasonProcessStopped}
	if r.calls != nil {
		if open, err := r.calls.OpenCalls(ctx, ss.id); err == nil && len(open) > 0 {
			end.Status = StatusSuspended
		}
	}
	// Written in order before the next driver's events; the lease is not
	// released before it is (finish, endIfStale).
	r.publish(ss, Event{Kind: EventTurnEnded, Turn: turn, Ended: &end})
}

// trimLaterLocked drops the events of the session's turn that ended with
// event done, TurnGrace from now, unless another turn started meanwhile.
// r.mu must be held.
func (r *Runner) trimLaterLocked(ss *session, done int64) {
	ss.log.stopTrim()
	ss.log.trim = time.AfterFunc(r.grace, func() {
		r.mu.Lock()
		if r.sessions[ss.id] != ss || ss.log.last != done {
			r.mu.Unlock()
			return
		}
		if ss.run != nil {
			// A run looks at the session and has published nothing yet (a
			// resume that may find nothing): trim later, or never if it
			// starts a turn.
			r.trimLaterLocked(ss, done)
			r.mu.Unlock()
			return
		}
		ss.log.events = nil
		ss.log.trim = nil
		if r.elog != nil {
			ss.log.known = false // the next driver reads the Store's log again
		}
		r.forgetLocked(ss)
		r.mu.Unlock()
		if r.elog != nil {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if err := r.elog.TrimEvents(ctx, ss.id, done); err != nil && !errors.Is(err, memory.ErrNotFound) {
				r.logger.Warn("runner: trimming the event log", "session", ss.id, "err", err)
			}
		}
	})
}

// opTimeout bounds one operation of the Runner on the Store outside a
// caller's context.
const opTimeout = 10 * time.Second

// follower is one subscription. Its ready channel holds a token when the
// session may have events it has not read.
type follower struct {
	ready chan struct{}
}

func (f *follower) wake() {
	select {
	case f.ready <- struct{}{}:
	default: // a token is there already
	}
}

// subscribeBatch is how many events a subscription reads from the Store at
// a time.
const subscribeBatch = 512

// Subscribe yields the session's events after Seq after (0: from the first
// one kept), then follows the session live until ctx ends: the events of
// the turns this process drives at once, those of other processes as the
// Store's log gets them (with a memory.EventLog and a memory.Notifier).
// A client that reconnects passes the Seq of the last event it has, and
// misses nothing.
//
// It ends with an error wrapping ErrEventsLost when the log no longer
// holds the events right after the cursor (they were trimmed, or the
// cursor is from another log): the client loads the history again, whose
// end gives the cursor to subscribe from. It ends after
// EventSessionDeleted when the session is deleted ([Runner.Delete]), with
// ErrClosed when the Runner closes, and quietly when ctx ends.
// The subscription holds no goroutine: the caller's loop reads.
func (r *Runner) Subscribe(ctx context.Context, sessionID string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		f := &follower{ready: make(chan struct{}, 1)}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			yield(Event{}, ErrClosed)
			return
		}
		ss := r.sessionLocked(sessionID)
		ss.subs[f] = true
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(ss.subs, f)
			r.forgetLocked(ss)
			r.mu.Unlock()
		}()
		cursor := after
		for {
			evs, gone, err := r.since(ctx, ss, cursor)
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
				cursor = e.Seq
			}
			if gone {
				yield(Event{Kind: EventSessionDeleted}, nil)
				return
			}
			if len(evs) > 0 {
				continue // more may have come while the caller read
			}
			select {
			case <-r.finished:
				// The runs have ended: what they published last was read
				// above, or is read now.
				if evs, _, err := r.since(ctx, ss, cursor); err == nil {
					for _, e := range evs {
						if !yield(e, nil) {
							return
						}
					}
				}
				yield(Event{}, ErrClosed)
				return
			default:
			}
			select {
			case <-f.ready:
			case <-ctx.Done():
				return
			case <-r.finished:
			}
		}
	}
}

// since returns the session's events after cursor: from memory when this
// process has them, else from the Store's log. gone reports that the
// session was deleted and nothing more comes.
func (r *Runner) since(ctx context.Context, ss *session, cursor int64) (evs []Event, gone bool, err error) {
	r.mu.Lock()
	gone = ss.gone
	local := ss.run != nil || r.elog == nil
	known := ss.log.known
	var ok bool
	if local && known {
		evs, ok = ss.log.since(cursor)
	}
	r.mu.Unlock()
	if ok || gone {
		return evs, gone, nil
	}
	if r.elog == nil {
		if !known && cursor == 0 {
			return nil, false, nil // nothing happened here yet
		}
		return nil, false, fmt.Errorf("runner: session %q after %d: %w", ss.id, cursor, ErrEventsLost)
	}
	stored, last, err := r.elog.Events(ctx, ss.id, cursor, subscribeBatch)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		if cursor == 0 {
			return nil, false, nil // not created yet
		}
		r.mu.Lock()
		deleting := ss.deleting || ss.gone
		r.mu.Unlock()
		if deleting {
			return nil, true, nil // deleted while we read: Delete ends the subscription
		}
		// A cursor of a log the Store does not have: another store's.
		return nil, false, fmt.Errorf("runner: session %q after %d (no such session): %w", ss.id, cursor, ErrEventsLost)
	case err != nil:
		return nil, false, fmt.Errorf("runner: reading the event log of session %q: %w", ss.id, err)
	case cursor > last, len(stored) > 0 && stored[0].Seq != cursor+1:
		return nil, false, fmt.Errorf("runner: session %q after %d: %w", ss.id, cursor, ErrEventsLost)
	}
	evs = make([]Event, 0, len(stored))
	for _, m := range stored {
		e, err := loaded(m)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, e)
	}
	return evs, false, nil
}

// LogState is what a session's event log says now.
type LogState struct {
	// Last is the Seq of the session's last event (0: none yet): a client
	// that shows the stored history subscribes after it.
	Last int64
	// Turn is the Seq of the EventTurnStarted of the turn in progress, 0
	// when none is; Started is its data.
	Turn    int64
	Started *TurnStarted
}

// Running reports whether a turn is in progress.
func (s LogState) Running() bool { return s.Turn != 0 }

// Log returns what the session's event log says now: from this process
// when it drives the session (or keeps events in memory only), else from
// the Store's log. A host that shows the stored history of a session whose
// turn is in progress shows the messages up to Started.History, and the
// rest from the turn's events (subscribe after Turn-1).
func (r *Runner) Log(ctx context.Context, sessionID string) (LogState, error) {
	r.mu.Lock()
	ss := r.sessions[sessionID]
	if ss != nil && (ss.run != nil || r.elog == nil) && ss.log.known {
		st := LogState{Last: ss.log.last, Turn: ss.log.open}
		if st.Turn != 0 {
			for _, e := range ss.log.events {
				if e.Seq == st.Turn {
					st.Started = e.Started
				}
			}
		}
		r.mu.Unlock()
		if st.Turn == 0 || st.Started != nil || r.elog == nil {
			if st.Started == nil {
				st.Turn = 0 // its start is no longer kept: say none
			}
			return st, nil
		}
	} else {
		r.mu.Unlock()
	}
	if r.elog == nil {
		return LogState{}, nil
	}
	st, err := r.storedLog(ctx, sessionID)
	if err != nil || !st.Running() {
		return st, err
	}
	r.mu.Lock()
	local := r.sessions[sessionID] != nil && r.sessions[sessionID].run != nil
	r.mu.Unlock()
	if !local && r.endIfStale(ctx, sessionID) {
		// A turn no process drives: its process stopped, and it was
		// ended now.
		return r.storedLog(ctx, sessionID)
	}
	return st, nil
}

// tail reads the end of the session's log in the Store: the Seq of its
// last event, and the Turn of that event unless it ends its turn (the turn
// in progress; 0 when none). A session the Store does not have has neither.
func (r *Runner) tail(ctx context.Context, id string) (last, open int64, err error) {
	last, err = r.elog.LastEvent(ctx, id)
	if errors.Is(err, memory.ErrNotFound) || (err == nil && last == 0) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("runner: reading the event log of session %q: %w", id, err)
	}
	evs, _, err := r.elog.Events(ctx, id, last-1, 1)
	if err != nil {
		return 0, 0, fmt.Errorf("runner: reading the event log of session %q: %w", id, err)
	}
	if len(evs) == 1 && evs[0].Kind != string(EventTurnEnded) {
		open = evs[0].Turn
	}
	return last, open, nil
}

// storedLog is Log from the Store's event log.
func (r *Runner) storedLog(ctx context.Context, sessionID string) (LogState, error) {
	last, turn, err := r.tail(ctx, sessionID)
	if err != nil || turn == 0 {
		return LogState{Last: last}, err
	}
	start, _, err := r.elog.Events(ctx, sessionID, turn-1, 1)
	if err != nil || len(start) == 0 || start[0].Seq != turn {
		return LogState{Last: last}, err
	}
	e, err := loaded(start[0])
	if err != nil {
		return LogState{Last: last}, err
	}
	return LogState{Last: last, Turn: turn, Started: e.Started}, nil
}
