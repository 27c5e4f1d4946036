package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/planround/planround/runner"
)

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
}

// runStarted is the data of the run_started event.
type runStarted struct {
	// Message is the user's message that started the run; empty for a
	// resumed turn. A page that did not send it (another tab, a reload)
	// shows it.
	Message string `json:"message,omitempty"`
	// Resumed is true for a turn continued from the store (agent.Resume):
	// after a restart, or a decision on a suspended turn. Its events go on
	// the turn whose tool calls it continues.
	Resumed bool `json:"resumed,omitempty"`
	// History is the id of the last message stored when the run started: a
	// page that loads the history while the run is active gets the
	// messages up to it, and the rest from the turn's events.
	History int64 `json:"history"`
}

// pageEvent is the event the page gets for a runner event.
func pageEvent(e runner.Event) (event, error) {
	var (
		name string
		v    any
	)
	switch e.Kind {
	case runner.EventTurnStarted:
		name, v = "run_started", runStarted{Message: e.Started.Message, Resumed: e.Started.Resumed, History: e.Started.History}
	case runner.EventChunk:
		v = e.Chunk
	case runner.EventTurnEnded:
		name, v = "run_done", runDone{Status: string(e.Ended.Status), Reason: pageReason(e.Ended.Reason), Cause: e.Ended.Cause, Error: e.Ended.Error, Turn: e.Turn}
	case runner.EventSessionDeleted:
		name, v = "session_deleted", struct{}{}
	default:
		return event{}, fmt.Errorf("unknown event kind %q", e.Kind)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return event{}, fmt.Errorf("encoding a %s event: %w", e.Kind, err)
	}
	return event{name: name, data: data, seq: e.Seq}, nil
}

// Reasons the page shows for what the runner did, in the words of a web
// chat.
const (
	reasonShutdown = "the server is shutting down"
	reasonStopped  = "the server that ran it stopped"
)

// pageReason is the reason the page shows for a turn's end.
func pageReason(reason string) string {
	switch reason {
	case runner.ReasonShutdown:
		return reasonShutdown
	case runner.ReasonProcessStopped:
		return reasonStopped
	}
	return reason
}

// handleEvents is GET /api/events?session_id=...[&after=N]: the session's
// push channel, as Server-Sent Events.
//
// The stream opens with a hello event (the server's instance id, the model,
// whether a run is active), then every event of the session's runs: the
// chunks as unnamed events whose data is the chunk's JSON, between
// run_started {message?, resumed?, history} and run_done {status, reason?,
// cause?, error?, turn} events, and session_deleted when the session is
// deleted. These events carry their number in the session's turn log as
// their SSE id. A page that names the last one it has (after, or the
// Last-Event-ID header of a reconnecting EventSource) first gets every
// logged event after it; when the log no longer holds them all, it gets a
// reload event and the stream ends: the page loads the history again.
// Without after, the stream goes on from the log's end, after the
// approval_required chunks of approvals that still wait and the
// form_request side chunks of forms that still wait (each after an
// executing chunk of its call), so that a reconnecting page draws them
// again.
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
	s.streamCount++
	s.ownerStreams[owner]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.streamCount--
		if s.ownerStreams[owner]--; s.ownerStreams[owner] == 0 {
			delete(s.ownerStreams, owner)
		}
		s.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	state, err := s.runner.Log(ctx, id)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "reading the session's events: " + err.Error()})
		return
	}
	if hasAfter && after > state.Last && !s.durable {
		// A number of another process's log (this server restarted, and
		// kept nothing): the stream goes on from this log's end, with
		// what waits drawn again, as for a page that names none.
		hasAfter = false
	}
	if !hasAfter {
		after = state.Last
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
		// progress (0: none).
		Turn int64 `json:"turn,omitempty"`
		// Seq is the number of the session's last logged event when the
		// stream opened.
		Seq int64 `json:"seq"`
		// Replay is true when the logged events after the page's come
		// next; false when the stream goes on from Seq.
		Replay bool `json:"replay"`
	}{s.info, state.Running(), state.Turn, state.Last, hasAfter}
	// Writes come from this goroutine and the keep-alive's.
	var wmu sync.Mutex
	write := func(evs ...event) bool {
		wmu.Lock()
		defer wmu.Unlock()
		for _, ev := range evs {
			writeEvent(w, ev)
		}
		return rc.Flush() == nil
	}
	first := []event{{name: "hello", data: mustJSON(hello)}}
	if !hasAfter {
		// Subscribed next, listed now: an approval registered in between
		// may come twice, which the page handles (cards are keyed by call
		// id); none is missed.
		for _, c := range s.pendingChunks(ctx, id) {
			first = append(first, event{data: mustJSON(c)})
		}
	}
	if !write(first...) {
		return
	}
	// The keep-alive goroutine ends before the handler returns: a write
	// after that would race with the server finishing the response.
	stopKeepAlive := make(chan struct{})
	keepAliveDone := make(chan struct{})
	defer func() {
		close(stopKeepAlive)
		<-keepAliveDone
	}()
	go func() {
		defer close(keepAliveDone)
		tick := time.NewTicker(keepAlive)
		defer tick.Stop()
		for {
			select {
			case <-stopKeepAlive:
				return
			case <-tick.C:
			}
			wmu.Lock()
			_, err := w.Write([]byte(": keep-alive\n\n"))
			if err == nil {
				err = rc.Flush()
			}
			wmu.Unlock()
			if err != nil {
				cancel()
				return
			}
		}
	}()
	for e, err := range s.runner.Subscribe(ctx, id, after) {
		if err != nil {
			if errors.Is(err, runner.ErrEventsLost) {
				write(event{name: "reload", data: mustJSON(struct{}{})})
			} else if !errors.Is(err, runner.ErrClosed) {
				s.logger.Warn("webchat: following a session's events", "session", id, "err", err)
			}
			return
		}
		ev, err := pageEvent(e)
		if err != nil {
			s.logger.Warn("webchat: an event of a session", "session", id, "err", err)
			continue
		}
		if !write(ev) {
			return
		}
		if e.Kind == runner.EventSessionDeleted {
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

// afterParam returns the number of the last event a page has, from the
// Last-Event-ID header (an EventSource reconnecting by itself) or the
// after parameter, and false when the request names none.
func afterParam(r *http.Request) (int64, bool) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
