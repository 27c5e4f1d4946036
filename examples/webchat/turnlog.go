package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The turn log: every event of a session's runs (run_started, the chunks,
// run_done) and session_deleted, numbered from 1 per session, in the
// order its event streams get them. An event stream carries the number as
// the SSE id, so a page that reconnects (EventSource sends Last-Event-ID)
// or reloads mid-run (GET /api/history says where its messages end, and
// the page opens the stream after that event) gets the events it missed:
// the text streamed so far is not lost.
//
// A single process keeps the log in memory (memLog). Replicas keep it in
// PostgreSQL (pgLog in replicas.go): the replica that drives a run writes
// its events there and a note wakes the other replicas' event streams.
// Either way a turn's events are dropped turnGrace after it ended; the
// number of a session's last event is kept, in memory until the session is
// deleted (and turnGrace more).

// turnGrace is how long a turn's events stay in the log after it ended:
// long enough for a page that loaded the history just before the end to
// open its event stream and get the rest of the turn.
const turnGrace = time.Minute

// maxTurnEvents bounds the events a memLog keeps of one turn; beyond, the
// turn's first events are dropped and a page that reloads mid-run gets
// what the history has (the replay needs the whole turn).
const maxTurnEvents = 50_000

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

// logState is what the log says of a session now.
type logState struct {
	// Last is the number of the session's last event (0: none yet).
	Last int64
	// Turn is the number of the run_started event of the run in progress,
	// 0 when none is; Started is its data.
	Turn    int64
	Started runStarted
}

// running reports whether a run is in progress in the session according to
// the log (its run_started has no run_done).
func (ls logState) running() bool { return ls.Turn != 0 }

// memLog is a session's turn log in memory. Server.mu guards it.
type memLog struct {
	last    int64   // the number of the last event
	events  []event // the events kept, numbered last-len(events)+1 .. last
	turn    int64   // the run_started of the run in progress; 0 when none
	started runStarted
	trim    *time.Timer // drops an ended turn's events after turnGrace
}

// add numbers ev, keeps it, and returns it numbered. A run_started event is
// its own turn.
func (l *memLog) add(ev event) event {
	l.last++
	ev.seq = l.last
	switch ev.name {
	case "run_started":
		ev.turn = ev.seq
		l.turn = ev.seq
		l.started = runStarted{}
		json.Unmarshal(ev.data, &l.started) //nolint:errcheck // our own JSON
		// A new turn: the events of earlier ones are not needed any more.
		l.events = l.events[:0:0]
		if l.trim != nil {
			l.trim.Stop()
			l.trim = nil
		}
	case "run_done":
		if ev.turn == l.turn {
			l.turn = 0
		}
	}
	if len(l.events) >= maxTurnEvents {
		l.events = l.events[1:]
	}
	l.events = append(l.events, ev)
	return ev
}

// since returns the events after seq after, and false when the log no
// longer holds every one of them (they were dropped, or after is not a
// number of this log: the page came from another process).
func (l *memLog) since(after int64) ([]event, bool) {
	switch {
	case after == l.last:
		return nil, true
	case after > l.last || after < 0:
		return nil, false
	}
	first := l.last - int64(len(l.events)) + 1
	if after+1 < first {
		return nil, false
	}
	return append([]event(nil), l.events[after+1-first:]...), true
}

// state returns what the log says of the session.
func (l *memLog) state() logState {
	ls := logState{Last: l.last, Turn: l.turn}
	if l.turn != 0 {
		ls.Started = l.started
	}
	return ls
}

// logLocked returns the session's memLog, creating it. s.mu must be held.
func (s *Server) logLocked(id string) *memLog {
	l := s.logs[id]
	if l == nil {
		l = new(memLog)
		s.logs[id] = l
	}
	return l
}

// trimLater drops the events of the session's turn that ended with the
// event numbered done, turnGrace from now, unless another turn started
// meanwhile (which dropped them). With forget (done is a deleted session's
// session_deleted) it drops the whole log then, unless the session was
// used again meanwhile: a server that deletes sessions keeps nothing of
// them. s.mu must be held.
func (s *Server) trimLater(id string, l *memLog, done int64, forget bool) {
	if l.trim != nil {
		l.trim.Stop()
	}
	l.trim = time.AfterFunc(turnGrace, func() { s.trim(id, l, done, forget) })
}

// trim is trimLater's work, once turnGrace has passed.
func (s *Server) trim(id string, l *memLog, done int64, forget bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs[id] != l || l.turn != 0 || l.last != done {
		return
	}
	l.events = nil
	l.trim = nil
	if ss := s.sessions[id]; forget && (ss == nil || ss.run == nil && len(ss.subs) == 0) {
		delete(s.logs, id)
	}
}

// logState returns what the session's log says now.
func (s *Server) logState(ctx context.Context, id string) (logState, error) {
	if s.shared != nil {
		return s.shared.state(ctx, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[id]; l != nil {
		return l.state(), nil
	}
	return logState{}, nil
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
