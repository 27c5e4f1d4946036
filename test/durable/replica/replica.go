package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/runner"
)

// replica is this process: its runner drives the runs (turns asked over
// HTTP, and the resumes the runner starts on a decision or a sweep), and
// its hub hands the events of those runs to /events.
type replica struct {
	opts   options
	store  store
	log    *slog.Logger
	hub    hub
	sweeps atomic.Int64 // sweeps done

	// runner is set once by run, before the server serves.
	runner *runner.Runner

	mu    sync.Mutex        // guards kinds
	kinds map[string]string // per session, "turn" or "resume": the kind of its turn in progress here
}

func newReplica(o options, st store, log *slog.Logger) *replica {
	return &replica{opts: o, store: st, log: log, kinds: map[string]string{}, hub: hub{subs: map[*subscriber]struct{}{}}}
}

// onEvent is the runner's Config.OnEvent: every event of a run of this
// process goes to the hub, marked with the kind of its turn.
func (r *replica) onEvent(session string, e runner.Event) {
	r.mu.Lock()
	kind := r.kinds[session]
	switch e.Kind {
	case runner.EventTurnStarted:
		kind = "turn"
		if e.Started.Resumed {
			kind = "resume"
		}
		r.kinds[session] = kind
	case runner.EventTurnEnded:
		delete(r.kinds, session)
	}
	r.mu.Unlock()
	if ev, ok := toEvent(session, kind, e); ok {
		r.hub.publish(ev)
	}
}

// toEvent is e, of a turn of kind run, as /turn and /events write it; a
// turn's start is not written (its kind goes on its events).
func toEvent(session, run string, e runner.Event) (event, bool) {
	switch e.Kind {
	case runner.EventTurnStarted:
		return event{}, false
	case runner.EventTurnEnded:
		ev := event{Session: session, Run: run, End: true, Status: string(e.Ended.Status)}
		if e.Ended.Status == runner.StatusError {
			ev.Error = e.Ended.Error
		}
		return ev, true
	}
	return event{Session: session, Run: run, Chunk: e.Chunk}, true
}

// sweep calls the runner's Sweep every opts.sweep until ctx ends, the
// first time at once (a restarted replica resumes what it left).
func (r *replica) sweep(ctx context.Context) {
	if r.opts.sweep <= 0 {
		return
	}
	t := time.NewTicker(r.opts.sweep)
	defer t.Stop()
	for {
		if err := r.runner.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("sweep failed", "err", err)
		}
		r.sweeps.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// event is one line of a /turn or /events stream: a chunk of a run, its
// start or its end (with its status, and the run's error, if any).
type event struct {
	Session string       `json:"session"`
	Run     string       `json:"run"` // "turn" or "resume"
	Chunk   *agent.Chunk `json:"chunk,omitempty"`
	End     bool         `json:"end,omitempty"`
	Status  string       `json:"status,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// hub hands the events of every run to the /events subscribers, and keeps
// the latest ones so that a subscriber can ask for what came before it
// subscribed (a test that restarts a replica cannot subscribe before the
// replica's first sweep resumes a run).
type hub struct {
	mu   sync.Mutex // guards subs and log
	subs map[*subscriber]struct{}
	log  ring
}

// ring holds the latest hubBacklog events, oldest first from next once
// full.
type ring struct {
	buf  []event
	next int
}

// hubBacklog is how many of the latest events the hub keeps.
const hubBacklog = 16384

func (r *ring) add(e event) {
	if len(r.buf) < hubBacklog {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % hubBacklog
}

// all returns the events kept, oldest first.
func (r *ring) all() []event {
	out := make([]event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// subscriber is one /events stream. Its channel is bounded: a subscriber
// that falls subscriberBuffer events behind is dropped (lost is set and
// ch closed), and its stream says so.
type subscriber struct {
	session string // "" for every session
	ch      chan event
	lost    bool // set (under hub.mu) before ch is closed for falling behind
}

const subscriberBuffer = 4096

func (s *subscriber) wants(e event) bool { return s.session == "" || s.session == e.Session }

// subscribe adds a subscriber for session ("" for all). With replay, it
// returns the kept events the subscriber wants, which come before any
// event it receives.
func (h *hub) subscribe(session string, replay bool) (*subscriber, []event) {
	s := &subscriber{session: session, ch: make(chan event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	if !replay {
		return s, nil
	}
	var past []event
	for _, e := range h.log.all() {
		if s.wants(e) {
			past = append(past, e)
		}
	}
	return s, past
}

// unsubscribe removes s.
func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

func (h *hub) publish(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log.add(e)
	for s := range h.subs {
		if !s.wants(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.lost = true
			close(s.ch)
			delete(h.subs, s)
		}
	}
}
