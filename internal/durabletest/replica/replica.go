package main

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// replica drives the runs of this process: turns asked over HTTP, and
// resumes started by a decision or by the sweeper.
type replica struct {
	opts  options
	store store
	log   *slog.Logger
	hub   hub

	ctx    context.Context // the runs'; cancelled by stop
	cancel context.CancelCauseFunc
	sweeps atomic.Int64 // sweeps done

	mu sync.Mutex
	// active holds the sessions that have a run in this process, so that
	// a resume never races a turn (or another resume) of its session here:
	// the lease keeps other processes out, not this one, which holds it.
	// agent and mgr are set once by ready; no run starts before (the
	// Manager may pass a decision to onDecided as soon as it exists, and
	// the first sweep, after ready, finds what was passed before). closed
	// is set by stop; no run starts after it. runs counts the runs started
	// and not ended. mu guards active, agent, mgr, closed and the Adds of
	// runs.
	active map[string]bool
	agent  *agent.Agent
	mgr    *approval.Manager
	closed bool
	runs   sync.WaitGroup
}

func newReplica(o options, st store, log *slog.Logger) *replica {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &replica{opts: o, store: st, log: log, ctx: ctx, cancel: cancel, active: map[string]bool{}, hub: hub{subs: map[*subscriber]struct{}{}}}
}

// errBusyHere refuses a turn on a session that has a run in this process.
var errBusyHere = errors.New("the session has a run in this replica")

// errStopping refuses a run once the replica is stopping, or before it is
// ready.
var errStopping = errors.New("the replica is stopping or not ready")

// ready sets the agent and the Manager: runs may start.
func (r *replica) ready(a *agent.Agent, mgr *approval.Manager) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agent, r.mgr = a, mgr
}

// begin marks sessionID as having a run here and returns the agent; end
// must follow.
func (r *replica) begin(sessionID string) (*agent.Agent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.agent == nil:
		return nil, errStopping
	case r.active[sessionID]:
		return nil, errBusyHere
	}
	r.active[sessionID] = true
	r.runs.Add(1)
	return r.agent, nil
}

// manager returns the Manager, nil before ready.
func (r *replica) manager() *approval.Manager {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mgr
}

func (r *replica) end(sessionID string) {
	r.mu.Lock()
	delete(r.active, sessionID)
	r.mu.Unlock()
	r.runs.Done()
}

// stop cancels every run with cause and starts no other.
func (r *replica) stop(cause error) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel(cause)
}

// wait waits for the runs to end, after stop.
func (r *replica) wait() { r.runs.Wait() }

// drive ranges over a run of sessionID, publishing each event and handing
// it to out (when not nil; out returns false once its reader is gone, and
// the run goes on without it).
func (r *replica) drive(sessionID, kind string, seq iter.Seq2[agent.Chunk, error], out func(event) bool) error {
	var err error
	for c, e := range seq {
		if e != nil {
			err = e
			break
		}
		ev := event{Session: sessionID, Run: kind, Chunk: &c}
		r.hub.publish(ev)
		if out != nil && !out(ev) {
			out = nil
		}
	}
	end := event{Session: sessionID, Run: kind, End: true}
	if err != nil {
		end.Error = err.Error()
	}
	r.hub.publish(end)
	if out != nil {
		out(end)
	}
	return err
}

// resume resumes sessionID in the background, unless a run of it is in
// this process already.
func (r *replica) resume(sessionID string) {
	a, err := r.begin(sessionID)
	if err != nil {
		return
	}
	go func() {
		defer r.end(sessionID)
		err := r.drive(sessionID, "resume", a.Resume(r.ctx, sessionID), nil)
		switch {
		case err == nil:
			r.log.Info("resumed", "session", sessionID)
		case errors.Is(err, agent.ErrBusy), r.ctx.Err() != nil:
			// Another replica drives it, or this replica is stopping.
		case errors.Is(err, agent.ErrNothingToResume):
			r.log.Info("nothing to resume", "session", sessionID)
		default:
			r.log.Warn("resume failed", "session", sessionID, "err", err)
		}
	}()
}

// onDecided is the Manager's callback for a decision that no run of this
// process waits for: the run that asked stopped (or runs elsewhere, whose
// lease then makes the resume end at once).
func (r *replica) onDecided(a memory.Approval) {
	r.resume(a.SessionID)
}

// sweep looks for sessions to resume every opts.sweep until the replica
// stops, the first time at once (a restarted replica resumes what it left).
func (r *replica) sweep() {
	if r.opts.sweep <= 0 {
		return
	}
	t := time.NewTicker(r.opts.sweep)
	defer t.Stop()
	for {
		ids, err := approval.Resumable(r.ctx, r.store, r.store)
		if err != nil && r.ctx.Err() == nil {
			r.log.Warn("sweep failed", "err", err)
		}
		for _, id := range ids {
			r.resume(id)
		}
		r.sweeps.Add(1)
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// event is one line of a /turn or /events stream: a chunk of a run, or
// its end (with the run's error, if any).
type event struct {
	Session string       `json:"session"`
	Run     string       `json:"run"` // "turn" or "resume"
	Chunk   *agent.Chunk `json:"chunk,omitempty"`
	End     bool         `json:"end,omitempty"`
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
