package runner

import (
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
type writer struct {
	r *Runner

	mu      sync.Mutex
	queue   map[string][]Event // events to write per session, in order; guarded by mu
	written map[string]int64   // per session, the Seq up to which events are written or given up; guarded by mu
	busy    map[string]bool    // sessions whose events are being written; guarded by mu
	// progress is closed and replaced after each batch: flush waits on it.
	progress chan struct{}
	wake     chan struct{} // has a token when queue has events
	stop     chan struct{} // closed by close: write what is left and end
	done     chan struct{} // closed when the goroutine ended
}

func newWriter(r *Runner) *writer {
	w := &writer{
		r:        r,
		queue:    make(map[string][]Event),
		written:  make(map[string]int64),
		busy:     make(map[string]bool),
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
	}
	w.mu.Unlock()
}

// close writes what is queued and ends the goroutine.
func (w *writer) close() {
	close(w.stop)
	<-w.done
}

func (w *writer) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
			w.writeQueued()
		case <-w.stop:
			for w.writeQueued() {
			}
			return
		}
	}
}

// writeQueued writes the events queued now and reports whether there were
// any.
func (w *writer) writeQueued() bool {
	w.mu.Lock()
	batch := w.queue
	if len(batch) == 0 {
		w.mu.Unlock()
		return false
	}
	w.queue = make(map[string][]Event, len(batch))
	for id := range batch {
		w.busy[id] = true
	}
	w.mu.Unlock()
	for id, evs := range batch {
		w.write(id, evs)
	}
	w.mu.Lock()
	clear(w.busy)
	close(w.progress)
	w.progress = make(chan struct{})
	w.mu.Unlock()
	return true
}

// write writes the events of one session, tries a failing Store again a
// few times, and tells the other processes.
func (w *writer) write(id string, evs []Event) {
	stored := make([]memory.Event, 0, len(evs))
	for _, e := range evs {
		m, err := e.stored()
		if err != nil {
			w.r.logger.Warn("runner: an event could not be written", "session", id, "seq", e.Seq, "err", err)
			break // the rest would leave a gap
		}
		stored = append(stored, m)
	}
	last := evs[len(evs)-1].Seq
	var err error
	for try := 0; try < 3 && len(stored) > 0; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err = w.r.elog.AppendEvents(ctx, id, stored...)
		cancel()
		if err == nil || errors.Is(err, memory.ErrEventSeq) || errors.Is(err, memory.ErrNotFound) {
			break
		}
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	switch {
	case err == nil && len(stored) > 0:
		// A subscriber of this process that reads the Store's log (its
		// cursor is older than what this process keeps) looks again.
		w.r.mu.Lock()
		if ss := w.r.sessions[id]; ss != nil {
			wakeAll(ss)
		}
		w.r.mu.Unlock()
		w.note(id, strconv.FormatInt(stored[len(stored)-1].Seq, 10)+" "+id)
	case errors.Is(err, memory.ErrEventSeq):
		// Another process numbers this session's events now: this
		// process lost its lease.
		w.r.logger.Warn("runner: events of a session another process drives were dropped", "session", id, "err", err)
	case errors.Is(err, memory.ErrNotFound):
		// The session was deleted.
	case err != nil:
		w.r.logger.Warn("runner: writing events to the log", "session", id, "err", err)
	}
	w.mu.Lock()
	w.written[id] = max(w.written[id], last)
	w.mu.Unlock()
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
