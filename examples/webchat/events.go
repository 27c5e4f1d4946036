package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// subscriberBuffer is how many events an event stream may fall behind
// before it is dropped; the browser reconnects and reloads the history.
const subscriberBuffer = 4096

// keepAlive is how often an idle event stream sends a comment, so proxies
// and browsers keep it open.
const keepAlive = 20 * time.Second

// event is one Server-Sent Event: a chunk (no name, the chunk's JSON as
// data) or a control event (run_started, run_done, hello).
type event struct {
	name string
	data []byte
}

// subscriber is one open event stream.
type subscriber struct {
	ch      chan event    // events to write; never closed
	dropped chan struct{} // closed when the stream fell too far behind
}

// publish sends ev to the session's streams.
func (s *Server) publish(ss *session, ev event) {
	s.mu.Lock()
	s.publishLocked(ss, ev)
	s.mu.Unlock()
}

// publishLocked sends ev to every stream of ss without blocking: a stream
// whose buffer is full is dropped (its browser reconnects), so a stalled tab
// never stalls a run. Holding s.mu keeps the order of events the same on
// every stream. s.mu must be held.
func (s *Server) publishLocked(ss *session, ev event) {
	for sub := range ss.subs {
		select {
		case sub.ch <- ev:
		default:
			delete(ss.subs, sub)
			close(sub.dropped)
		}
	}
}

// handleEvents is GET /api/events?session_id=...: the session's push
// channel, as Server-Sent Events.
//
// The stream opens with a hello event (the server's instance id, the model,
// whether a run is active), then the approval_required chunks of approvals
// that still wait and the form_request side chunks of forms that still wait
// (each after an executing chunk of its call), so that a reconnecting page
// draws them again, then every
// chunk of the session's runs as an unnamed event whose data is the chunk's
// JSON, between run_started and run_done {status, reason?, cause?, error?}
// events. Only the session's browser may open it: 401 without an
// owner cookie, 403 with another browser's. Streams are bounded per browser
// (429) and in the whole server (503).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	rc := http.NewResponseController(w)

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
	sub := &subscriber{ch: make(chan event, subscriberBuffer), dropped: make(chan struct{})}
	ss := s.sessionLocked(id)
	ss.subs[sub] = struct{}{}
	s.streamCount++
	s.ownerStreams[owner]++
	busy := ss.run != nil
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

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	hello := struct {
		info
		Busy bool `json:"busy"`
	}{s.info, busy}
	writeEvent(w, event{name: "hello", data: mustJSON(hello)})
	// Subscribed first, listed second: an approval registered in between
	// may come twice, which the page handles (cards are keyed by call id);
	// none is missed.
	for _, c := range s.pendingChunks(id) {
		writeEvent(w, event{data: mustJSON(c)})
	}
	if rc.Flush() != nil {
		return
	}

	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case ev := <-sub.ch:
			writeEvent(w, ev)
			// Write what is queued before flushing: fewer packets when the
			// model streams fast.
			for n := len(sub.ch); n > 0; n-- {
				writeEvent(w, <-sub.ch)
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-sub.dropped:
			return
		case <-s.closing:
			// Close waited for the runs: their last events are queued.
			for n := len(sub.ch); n > 0; n-- {
				writeEvent(w, <-sub.ch)
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
	var b strings.Builder
	if ev.name != "" {
		b.WriteString("event: ")
		b.WriteString(ev.name)
		b.WriteByte('\n')
	}
	// JSON never holds a raw newline, so one data line carries it.
	b.WriteString("data: ")
	b.Write(ev.data)
	b.WriteString("\n\n")
	w.Write([]byte(b.String())) //nolint:errcheck // seen by Flush
}
