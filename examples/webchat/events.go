package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// subscriberBuffer is how many events an event stream may fall behind
// before it is dropped; the browser reconnects and reloads the history.
const subscriberBuffer = 4096

// keepAlive is how often an idle event stream sends a comment, so proxies
// and browsers keep it open.
const keepAlive = 20 * time.Second

// event is one Server-Sent Event: a chunk (no name, the chunk's JSON as
// data) or a control event (run_started, run_done, hello, ...).
type event struct {
	name string
	data []byte
	// seq is the event's number in the session's turn log (the SSE id), 0
	// for an event that is not logged (hello, the redraw of what waits).
	seq int64
	// turn is the number of the run_started event of the run the event
	// belongs to; 0 outside a run.
	turn int64
}

// subscriber is one open event stream.
//
// Its queue grows with what is pending and starts empty: an idle stream
// (most of them, on a server holding thousands of pages) costs no buffer.
// A buffered channel of subscriberBuffer pointers would cost 32 KiB per
// stream, open or idle.
type subscriber struct {
	mu    sync.Mutex
	queue []*event // events to write, oldest first (shared with the other streams: read only); mu guards it
	// ready holds a token when queue may have events: the writer waits on
	// it.
	ready   chan struct{}
	dropped chan struct{} // closed when the stream fell too far behind
	// last is the number of the last logged event the stream has (queued,
	// or written by the replay). Server.mu guards it.
	last int64
}

func newSubscriber() *subscriber {
	return &subscriber{ready: make(chan struct{}, 1), dropped: make(chan struct{})}
}

// push queues ev and wakes the writer; false when subscriberBuffer events
// are queued already (nothing is queued then).
func (sub *subscriber) push(ev *event) bool {
	sub.mu.Lock()
	if len(sub.queue) >= subscriberBuffer {
		sub.mu.Unlock()
		return false
	}
	sub.queue = append(sub.queue, ev)
	sub.mu.Unlock()
	select {
	case sub.ready <- struct{}{}:
	default: // a token is there already
	}
	return true
}

// take returns the queued events and leaves spare as the queue: the
// writer passes back the slice it emptied after its last take (see
// reuse), so a stream that gets one event at a time allocates nothing.
func (sub *subscriber) take(spare []*event) []*event {
	sub.mu.Lock()
	q := sub.queue
	sub.queue = spare
	sub.mu.Unlock()
	return q
}

// reuse empties q, written, for the next take: it lets go of the events
// at once (an idle stream holds none), and of the slice itself when a
// burst made it large, so a burst's buffer does not stay with an idle
// stream.
func reuse(q []*event) []*event {
	if cap(q) > 64 {
		return nil
	}
	clear(q)
	return q[:0]
}

// publish numbers ev in the session's turn log and sends it to the
// session's event streams. It returns ev numbered (seq 0 when a shared log
// failed to take it: the streams of this process still get it, and the
// error is logged). Events of one session are published by one goroutine
// at a time (its run's, or the handler that starts it), which keeps their
// order.
func (s *Server) publish(ss *session, ev event) event {
	if s.shared != nil {
		ev = s.shared.append(s.base, ss.id, ev)
		s.mu.Lock()
		s.fanoutLocked(ss, ev)
		s.mu.Unlock()
		return ev
	}
	s.mu.Lock()
	ev = s.logLocked(ss.id).add(ev)
	s.fanoutLocked(ss, ev)
	s.mu.Unlock()
	return ev
}

// fanoutLocked sends ev to every stream of ss that does not have it yet
// (with a shared log, an event may come both from this process's run and
// from the log) without blocking: a stream whose buffer is full is dropped
// (its browser reconnects), so a stalled tab never stalls a run. Holding
// s.mu keeps the order of events the same on every stream. s.mu must be
// held.
func (s *Server) fanoutLocked(ss *session, ev event) {
	if len(ss.subs) == 0 {
		return
	}
	p := &ev // the streams' queues share it
	for sub := range ss.subs {
		if ev.seq != 0 {
			if ev.seq <= sub.last {
				continue
			}
			sub.last = ev.seq
		}
		if !sub.push(p) {
			delete(ss.subs, sub)
			close(sub.dropped)
		}
	}
}

// handleEvents is GET /api/events?session_id=...[&after=N]: the session's
// push channel, as Server-Sent Events.
//
// The stream opens with a hello event (the server's instance id, the model,
// whether a run is active), then every event of the session's runs: the
// chunks as unnamed events whose data is the chunk's JSON, between
// run_started {message?, resumed?, history} and run_done {status, reason?,
// cause?, error?, turn} events. These events carry their number in the
// session's turn log as their SSE id. A page that names the last one it
// has (after, or the Last-Event-ID header of a reconnecting EventSource)
// first gets every logged event after it; when the log no longer holds
// them all, a server whose store outlives it (Options.Store set) sends a
// reload event and ends the stream: the page loads the history again.
// Without after, the stream goes on with the approval_required chunks of
// approvals that still wait and the form_request side chunks of forms that
// still wait (each after an executing chunk of its call), so that a
// reconnecting page draws them again.
//
// Only the session's browser may open it: 401 without an owner cookie, 403
// with another browser's. Streams are bounded per browser (429) and in the
// whole server (503).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	rc := http.NewResponseController(w)
	after, hasAfter := afterParam(r)

	owner := sessionOwner(id)
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: "the server is shutting down"})
		return
	case s.ownerStreams[owner] >= s.maxStreamsPerOwner:
		s.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser already has %d event streams open: close some tabs", s.maxStreamsPerOwner)})
		return
	case s.streamCount >= s.maxStreams:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: fmt.Sprintf("the server is busy (%d event streams open): try again shortly", s.maxStreams)})
		return
	}
	sub := newSubscriber()
	ss := s.sessionLocked(id)
	ss.subs[sub] = struct{}{}
	s.streamCount++
	s.ownerStreams[owner]++
	busy := ss.run != nil
	// In memory, subscribed and read under one lock: the replay and the
	// live events meet without a gap.
	var (
		replay   []event
		complete = true
		state    logState
	)
	if s.shared == nil {
		l := s.logs[id]
		if l != nil {
			state = l.state()
		}
		if hasAfter {
			switch {
			case l != nil:
				replay, complete = l.since(after)
			case after != 0:
				complete = false // a number of another process's log
			}
		}
		sub.last = state.Last
	} else if hasAfter {
		sub.last = after
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(ss.subs, sub)
		s.forgetLocked(ss)
		s.streamCount--
		if s.ownerStreams[owner]--; s.ownerStreams[owner] == 0 {
			delete(s.ownerStreams, owner)
		}
		s.mu.Unlock()
	}()
	if s.shared != nil {
		// Subscribed first, read second: an event may come both ways
		// (skipped below by its number), none is missed.
		var err error
		if state, err = s.shared.state(r.Context(), id); err == nil && hasAfter {
			replay, complete, err = s.shared.since(r.Context(), id, after)
		}
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "reading the session's events: " + err.Error()})
			return
		}
		busy = busy || state.running()
		s.mu.Lock()
		if hasAfter && complete {
			if n := len(replay); n > 0 {
				sub.last = max(sub.last, replay[n-1].seq)
			}
		} else {
			sub.last = max(sub.last, state.Last)
		}
		s.mu.Unlock()
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	hello := struct {
		info
		Busy bool `json:"busy"`
		// Turn is the number of the run_started event of the run in
		// progress (0: none, or not known here).
		Turn int64 `json:"turn,omitempty"`
		// Seq is the number of the session's last logged event when the
		// stream opened.
		Seq int64 `json:"seq"`
		// Replay is true when the logged events after the page's come
		// next; false when the stream goes on from Seq.
		Replay bool `json:"replay"`
	}{s.info, busy, state.Turn, state.Last, hasAfter && complete}
	if hasAfter && !complete && s.durable {
		hello.Busy = false // the page reloads
	}
	writeEvent(w, event{name: "hello", data: mustJSON(hello)})
	var last int64 // the number of the last logged event written
	switch {
	case hasAfter && !complete && s.durable:
		writeEvent(w, event{name: "reload", data: mustJSON(struct{}{})})
		rc.Flush() //nolint:errcheck // ending anyway
		return
	case hasAfter && complete:
		last = after
		for _, ev := range replay {
			writeEvent(w, ev)
			last = ev.seq
		}
	default:
		// Subscribed first, listed second: an approval registered in
		// between may come twice, which the page handles (cards are keyed
		// by call id); none is missed.
		for _, c := range s.pendingChunks(id) {
			writeEvent(w, event{data: mustJSON(c)})
		}
	}
	if rc.Flush() != nil {
		return
	}

	// write writes a live event, unless the replay had it.
	write := func(ev *event) bool {
		if ev.seq != 0 && ev.seq <= last {
			return true
		}
		if ev.seq != 0 {
			last = ev.seq
		}
		writeEvent(w, *ev)
		return ev.name != "reload"
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var queued []*event
	for {
		select {
		case <-sub.ready:
			// Write all that is queued before flushing: fewer packets when
			// the model streams fast.
			queued = sub.take(queued)
			ok := true
			for _, ev := range queued {
				if ok = write(ev); !ok {
					break
				}
			}
			queued = reuse(queued)
			if !ok {
				rc.Flush() //nolint:errcheck // ending anyway
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-sub.dropped:
			return
		case <-s.closing:
			// Close waited for the runs: their last events are queued.
			for _, ev := range sub.take(nil) {
				write(ev)
			}
			rc.Flush() //nolint:errcheck // closing anyway
			return
		case <-r.Context().Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// writeEvent writes one event; write errors show at the next Flush.
func writeEvent(w http.ResponseWriter, ev event) {
	// One buffer, one write: an event per streamed delta.
	b := make([]byte, 0, len(ev.data)+len(ev.name)+48)
	if ev.seq != 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, ev.seq, 10)
		b = append(b, '\n')
	}
	if ev.name != "" {
		b = append(b, "event: "...)
		b = append(b, ev.name...)
		b = append(b, '\n')
	}
	// JSON never holds a raw newline, so one data line carries it.
	b = append(b, "data: "...)
	b = append(b, ev.data...)
	b = append(b, "\n\n"...)
	w.Write(b) //nolint:errcheck // seen by Flush
}
