package runner

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/planround/planround/memory"
)

// eventsChannel is the Notifier channel on which a Runner tells the others
// that a session's log has new events ("<seq> <session>"), or that a
// session was deleted ("deleted <session>").
const eventsChannel = "planround_events"

// writer writes the events the Runner publishes to the Store's log, in
// batches: one goroutine for the Runner, woken by add, writing every
// session's queued events in one call per session, then telling the other
// processes. A slow Store makes the batches larger, not the runs slower.
//
// The log never skips a number. A batch the Store fails to take stays
// queued, ahead of the events published since, and is tried again (after
// a pause that grows with the failures) until it is taken, the session is
// deleted, another process is found writing the session's log, or the run
// that published it let the session go (its lease released: the next
// driver numbers after what the log has). An event
// that cannot be encoded is logged as a warning in its place (notLogged).
// When the Store answers that a batch does not continue the log
// (memory.ErrEventSeq), the writer looks at where the log is (settle):
// events of the batch the log has already are this process's own (an
// append that failed as far as the writer knew was written after all) and
// are skipped; a gap behind the batch is filled by the session's driver;
// any other event at those numbers was written by another process, which
// drives the session now: this process's events of the session are
// dropped from then on, and its run is stopped as one that lost its lease.
type writer struct {
	r *Runner

	mu      sync.Mutex
	queue   map[string][]Event // events to write per session, in order; guarded by mu
	written map[string]int64   // per session, the Seq up to which events are written or given up; guarded by mu
	busy    map[string]bool    // sessions whose events are being written; guarded by mu
	// failed holds the sessions whose last write failed: how many times in
	// a row, and when to try again. Guarded by mu.
	failed map[string]failure
	// lost holds the sessions whose log another process writes: their
	// events are dropped until the session is taken again (restart).
	// Guarded by mu.
	lost map[string]bool
	// progress is closed and replaced after each batch: flush waits on it.
	progress chan struct{}
	wake     chan struct{} // has a token when queue has events
	stop     chan struct{} // closed by close: write what is left and end
	done     chan struct{} // closed when the goroutine ended
}

// failure counts a session's failed writes.
type failure struct {
	n     int
	retry time.Time
}

// retryPause is how long the writer waits before it tries again a session
// whose write failed n times in a row: 100 ms, doubling, at most 2 s.
func retryPause(n int) time.Duration {
	return min(100*time.Millisecond<<min(n-1, 5), 2*time.Second)
}

func newWriter(r *Runner) *writer {
	w := &writer{
		r:        r,
		queue:    make(map[string][]Event),
		written:  make(map[string]int64),
		busy:     make(map[string]bool),
		failed:   make(map[string]failure),
		lost:     make(map[string]bool),
		progress: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go w.loop()
	return w
}

// add queues ev, published in session id, for the Store.
func (w *writer) add(id string, ev Event) {
	w.mu.Lock()
	w.queue[id] = append(w.queue[id], ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// flush waits until the session's events up to seq are written (or given
// up), at most opTimeout.
func (w *writer) flush(id string, seq int64) {
	deadline := time.NewTimer(opTimeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		done := w.written[id] >= seq || (len(w.queue[id]) == 0 && !w.busy[id])
		progress := w.progress
		w.mu.Unlock()
		if done {
			return
		}
		select {
		case <-progress:
		case <-w.done:
			return
		case <-deadline.C:
			w.r.logger.Warn("runner: events not written in time", "session", id, "seq", seq)
			return
		}
	}
}

// forget drops what the writer remembers of a session whose turn ended and
// was flushed.
func (w *writer) forget(id string) {
	w.mu.Lock()
	if len(w.queue[id]) == 0 && !w.busy[id] {
		delete(w.written, id)
		delete(w.failed, id)
		delete(w.lost, id)
	}
	w.mu.Unlock()
}

// restart is called by a new driver of the session, which holds its lease,
// after flush and before it reads the Store's log: the numbering starts
// again from the Store's. Events still queued (the Store failed them until
// now) are dropped: the new driver numbers after what the log has.
func (w *writer) restart(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.queue[id]); n > 0 && !w.busy[id] {
		w.r.logger.Warn("runner: events the store failed to take were dropped", "session", id, "events", n)
		delete(w.queue, id)
	}
	delete(w.written, id)
	delete(w.failed, id)
	delete(w.lost, id)
}

// close writes what is queued and ends the goroutine.
func (w *writer) close() {
	close(w.stop)
	<-w.done
}

func (w *writer) loop() {
	defer close(w.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-w.wake:
		case <-retry.C:
		case <-w.stop:
			w.drain()
			return
		}
		if next, ok := w.writeQueued(false); ok {
			retry.Reset(time.Until(next))
		}
	}
}

// drain writes what is queued when the Runner closes, trying a failing
// Store again for at most opTimeout.
func (w *writer) drain() {
	deadline := time.Now().Add(opTimeout)
	for {
		_, failing := w.writeQueued(true)
		w.mu.Lock()
		left := len(w.queue)
		w.mu.Unlock()
		switch {
		case left == 0:
			return
		case time.Now().After(deadline):
			w.r.logger.Warn("runner: events the store failed to take were dropped at close", "sessions", left)
			return
		case failing:
			time.Sleep(retryPause(1))
		}
	}
}

// writeQueued writes the events queued now, but for the sessions whose
// last write failed a moment ago (all with force). It reports when to
// try again a session that failed and still has events, if any.
func (w *writer) writeQueued(force bool) (retry time.Time, failing bool) {
	w.mu.Lock()
	if len(w.queue) == 0 {
		w.mu.Unlock()
		return time.Time{}, false
	}
	now := time.Now()
	batch := make(map[string][]Event, len(w.queue))
	for id, evs := range w.queue {
		if f, ok := w.failed[id]; ok && !force && now.Before(f.retry) {
			continue
		}
		batch[id] = evs
		delete(w.queue, id)
		w.busy[id] = true
	}
	w.mu.Unlock()
	for id, evs := range batch {
		left, err := w.write(id, evs)
		w.mu.Lock()
		if len(left) > 0 {
			w.queue[id] = append(left, w.queue[id]...)
			f := w.failed[id]
			f.n++
			f.retry = time.Now().Add(retryPause(f.n))
			w.failed[id] = f
			if f.n == 1 || f.n%10 == 0 {
				w.r.logger.Warn("runner: writing events to the log failed; trying again", "session", id, "failures", f.n, "err", err)
			}
		} else {
			delete(w.failed, id)
			w.written[id] = max(w.written[id], evs[len(evs)-1].Seq)
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	clear(w.busy)
	close(w.progress)
	w.progress = make(chan struct{})
	for id, f := range w.failed {
		if len(w.queue[id]) > 0 && (!failing || f.retry.Before(retry)) {
			retry, failing = f.retry, true
		}
	}
	w.mu.Unlock()
	return retry, failing
}

// errLogTaken says that another process wrote the numbers of a batch: it
// drives the session now.
var errLogTaken = errors.New("runner: another process writes the session's event log")

// write writes the events of one session and tells the other processes.
// It returns the events to try again later (all of evs, or none) with the
// error that kept them.
func (w *writer) write(id string, evs []Event) (left []Event, err error) {
	w.mu.Lock()
	lost, retried := w.lost[id], w.failed[id].n > 0
	w.mu.Unlock()
	if lost {
		return nil, nil
	}
	if retried && !w.r.drives(id) {
		// The run ended and let the session go while the Store failed:
		// its next driver, maybe another process, numbers its events after
		// what the log has, and these would come in its way.
		w.r.logger.Warn("runner: events the store failed to take were dropped: the session has no driver here any more", "session", id, "from", evs[0].Seq, "events", len(evs))
		return nil, nil
	}
	stored := make([]memory.Event, len(evs))
	for i, e := range evs {
		m, err := e.stored()
		if err != nil {
			w.r.logger.Warn("runner: an event could not be encoded; the log holds a warning in its place", "session", id, "seq", e.Seq, "err", err)
			m = notLogged(e, err)
		}
		stored[i] = m
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err = w.r.elog.AppendEvents(ctx, id, stored...)
	if errors.Is(err, memory.ErrEventSeq) {
		err = w.settle(ctx, id, stored)
	}
	switch {
	case err == nil:
		// A subscriber of this process that reads the Store's log (its
		// cursor is older than what this process keeps) looks again.
		w.r.mu.Lock()
		if ss := w.r.sessions[id]; ss != nil {
			wakeAll(ss)
		}
		w.r.mu.Unlock()
		w.note(id, strconv.FormatInt(stored[len(stored)-1].Seq, 10)+" "+id)
	case errors.Is(err, memory.ErrNotFound):
		// The session was deleted.
	case errors.Is(err, errLogTaken):
		w.r.logger.Warn("runner: events of a session another process drives were dropped", "session", id, "from", stored[0].Seq)
		w.mu.Lock()
		w.lost[id] = true
		w.mu.Unlock()
		w.r.logTaken(id, stored[len(stored)-1].Turn)
	default:
		return evs, err
	}
	return nil, nil
}

// settle writes a batch that the Store refused as out of sequence, after
// looking where the session's log is (see writer). It returns errLogTaken
// when another process wrote the log.
func (w *writer) settle(ctx context.Context, id string, stored []memory.Event) error {
	last, err := w.r.elog.LastEvent(ctx, id)
	if err != nil {
		return err
	}
	first, end := stored[0].Seq, stored[len(stored)-1].Seq
	switch {
	case last >= first:
		n := int(min(last, end) - first + 1)
		have, _, err := w.r.elog.Events(ctx, id, first-1, n)
		if err != nil {
			return err
		}
		if !sameEvents(have, stored[:n]) {
			return errLogTaken
		}
		if n == len(stored) {
			return nil
		}
		return w.r.elog.AppendEvents(ctx, id, stored[n:]...)
	case last < first-1:
		// Events numbered here before the batch are not in the log: the
		// Store lost them (PostgreSQL's event log commits without waiting
		// for the disk). The session's driver fills the gap.
		gap, ok := w.r.recall(ctx, id, last+1, first-1, stored[0].Turn)
		if !ok {
			return errLogTaken
		}
		return w.r.elog.AppendEvents(ctx, id, append(gap, stored...)...)
	}
	return w.r.elog.AppendEvents(ctx, id, stored...)
}

// sameEvents reports whether the log's events are the batch's: the same
// numbers, turns, kinds and payloads.
func sameEvents(have, want []memory.Event) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		h, w := have[i], want[i]
		if h.Seq != w.Seq || h.Turn != w.Turn || h.Kind != w.Kind || !bytes.Equal(h.Data, w.Data) {
			return false
		}
	}
	return true
}

// recall returns the events from through to of the session, to fill a gap
// the Store left in its log (as this process keeps them, the others as
// warnings), when this process drives the session and holds its lease.
// turn is the Turn of the events of the batch after the gap.
func (r *Runner) recall(ctx context.Context, id string, from, to, turn int64) ([]memory.Event, bool) {
	r.mu.Lock()
	ss := r.sessions[id]
	if ss == nil || ss.run == nil {
		r.mu.Unlock()
		return nil, false
	}
	d := ss.run
	kept := make(map[int64]Event)
	for _, e := range ss.log.events {
		if e.Seq >= from && e.Seq <= to {
			kept[e.Seq] = e
		}
	}
	r.mu.Unlock()
	if r.keepLease(ctx, id, d) != nil {
		return nil, false
	}
	gap := make([]memory.Event, 0, to-from+1)
	for seq := from; seq <= to; seq++ {
		e, ok := kept[seq]
		if !ok {
			e = Event{Seq: seq, Turn: min(turn, seq), Kind: EventChunk}
			gap = append(gap, notLogged(e, errForgotten))
			continue
		}
		m, err := e.stored()
		if err != nil {
			m = notLogged(e, err)
		}
		gap = append(gap, m)
	}
	r.logger.Warn("runner: the event log had lost events; they were written again", "session", id, "from", from, "to", to)
	return gap, true
}

// errForgotten is why a gap's event that this process no longer keeps is
// logged as a warning.
var errForgotten = errors.New("the store lost it, and this process no longer keeps it")

// drives reports whether a run of this process drives the session.
func (r *Runner) drives(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ss := r.sessions[id]
	return ss != nil && ss.run != nil
}

// logTaken stops the run of the session whose events of turn turn another
// process's writes displaced: it lost the session.
func (r *Runner) logTaken(id string, turn int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ss := r.sessions[id]; ss != nil && ss.run != nil && ss.log.open != 0 && ss.log.open == turn {
		ss.run.cancel(errLeaseLost)
	}
}

// note tells the other processes, when the Store has a Notifier.
func (w *writer) note(id, payload string) {
	if w.r.notifier == nil || len(payload) > memory.MaxNotifyPayload {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := w.r.notifier.Notify(ctx, eventsChannel, payload); err != nil {
		w.r.logger.Warn("runner: telling the other processes about events", "session", id, "err", err)
	}
}
