package jsonapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui/internal/turn"
)

// RunStarted is the data of the run_started event.
type RunStarted struct {
	// Message is the user's message that started the run; empty for a
	// resumed turn. A client that did not send it (another tab, a reload)
	// shows it.
	Message string `json:"message,omitempty"`
	// Resumed is true for a turn continued from the store (agent.Resume):
	// after a restart, or a decision on a suspended turn. Its events go on
	// the turn whose tool calls it continues.
	Resumed bool `json:"resumed,omitempty"`
	// History is the id of the last message stored when the run started: a
	// client that loads the history while the run is active gets the
	// messages up to it, and the rest from the turn's events.
	History int64 `json:"history"`
}

// RunDone is the data of the run_done event.
type RunDone struct {
	// Status is finished, interrupted, rejected, suspended or error.
	// suspended: the run stopped at approvals that still wait (the server
	// shut down, or they waited too long); they stay answerable, and a
	// decision resumes the turn.
	Status string `json:"status"`
	// Reason says why a run was rejected, interrupted or suspended by
	// something else than the person (a timeout, a shutdown).
	Reason string `json:"reason,omitempty"`
	// Cause is the cause of the rejection that ended the run (status
	// rejected), such as "user" or "timeout".
	Cause agent.Cause `json:"cause,omitempty"`
	// Error is the run's error (status error).
	Error string `json:"error,omitempty"`
	// Turn is the number of the run's run_started event.
	Turn int64 `json:"turn,omitempty"`
}

// Reasons of RunDone for what the runner did.
const (
	// ReasonShutdown: the server shut down (runner.ReasonShutdown).
	ReasonShutdown = "the server is shutting down"
	// ReasonStopped: the process that ran the turn stopped
	// (runner.ReasonProcessStopped).
	ReasonStopped = "the server that ran it stopped"
)

func reason(r string) string {
	switch r {
	case runner.ReasonShutdown:
		return ReasonShutdown
	case runner.ReasonProcessStopped:
		return ReasonStopped
	}
	return r
}

// sse writes a stream's events, one buffer reused for all (an event per
// streamed delta), one write each; writes come from the handler's
// goroutine and the keep-alive's.
type sse struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	enc *json.Encoder
}

func newSSE(w http.ResponseWriter) *sse {
	s := &sse{w: w, rc: http.NewResponseController(w)}
	s.enc = json.NewEncoder(&s.buf)
	return s
}

// event writes one event named name (none for a chunk) with id seq (none
// when 0) and v's JSON as its data, without flushing. It reports false
// when v cannot be encoded.
func (s *sse) event(name string, seq int64, v any) bool {
	s.buf.Reset()
	if seq != 0 {
		s.buf.WriteString("id: ")
		s.buf.Write(strconv.AppendInt(s.buf.AvailableBuffer(), seq, 10))
		s.buf.WriteByte('\n')
	}
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	// JSON never holds a raw newline, so one data line carries it; the
	// encoder ends it with one.
	s.buf.WriteString("data: ")
	if err := s.enc.Encode(v); err != nil {
		return false
	}
	s.buf.WriteByte('\n')
	s.w.Write(s.buf.Bytes()) //nolint:errcheck // seen by Flush
	return true
}

// raw writes an event whose data is ready.
func (s *sse) raw(name string, data []byte) {
	s.buf.Reset()
	s.buf.WriteString("event: ")
	s.buf.WriteString(name)
	s.buf.WriteString("\ndata: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
	s.w.Write(s.buf.Bytes()) //nolint:errcheck // seen by Flush
}

func (s *sse) flush() bool { return s.rc.Flush() == nil }

// runnerEvent writes a runner event as the client gets it; false when it
// could not be encoded (nothing was written).
func (s *sse) runnerEvent(e runner.Event) (ok, known bool) {
	switch e.Kind {
	case runner.EventTurnStarted:
		return s.event("run_started", e.Seq, RunStarted{Message: e.Started.Message, Resumed: e.Started.Resumed, History: e.Started.History}), true
	case runner.EventChunk:
		return s.event("", e.Seq, e.Chunk), true
	case runner.EventTurnEnded:
		return s.event("run_done", e.Seq, RunDone{Status: string(e.Ended.Status), Reason: reason(e.Ended.Reason), Cause: e.Ended.Cause, Error: e.Ended.Error, Turn: e.Turn}), true
	case runner.EventSessionDeleted:
		return s.event("session_deleted", e.Seq, struct{}{}), true
	}
	return false, false
}

// events is GET /events?session_id=...[&after=N].
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if _, ok := h.authorized(w, r, id); !ok {
		return
	}
	after, hasAfter := afterParam(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	state, err := h.b.Runner.Log(ctx, id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "reading the session's events: "+err.Error())
		return
	}
	if hasAfter && after > state.Last {
		// A number of another log (a server that restarted and kept
		// nothing): the stream goes on from this log's end, with what
		// waits drawn again, as for a client that names none.
		hasAfter = false
	}
	if !hasAfter {
		after = state.Last
	}

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	s := newSSE(w)
	s.mu.Lock()
	s.raw("hello", h.helloData(state, hasAfter))
	if !hasAfter {
		// Subscribed next, listed now: an approval asked in between may
		// come twice, which a client handles (by call id); none is
		// missed.
		for _, c := range h.pendingChunks(ctx, id, state) {
			s.event("", 0, c)
		}
	}
	ok := s.flush()
	s.mu.Unlock()
	if !ok {
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
		tick := time.NewTicker(h.o.KeepAlive)
		defer tick.Stop()
		for {
			select {
			case <-stopKeepAlive:
				return
			case <-tick.C:
			}
			s.mu.Lock()
			_, err := w.Write([]byte(": keep-alive\n\n"))
			if err == nil {
				err = s.rc.Flush()
			}
			s.mu.Unlock()
			if err != nil {
				cancel()
				return
			}
		}
	}()
	for e, err := range h.b.Runner.Subscribe(ctx, id, after) {
		if err != nil {
			if errors.Is(err, runner.ErrEventsLost) {
				s.mu.Lock()
				s.raw("reload", []byte("{}"))
				s.flush()
				s.mu.Unlock()
			} else if !errors.Is(err, runner.ErrClosed) && ctx.Err() == nil {
				h.b.Logger.Warn("jsonapi: following a session's events", "session", id, "err", err)
			}
			return
		}
		s.mu.Lock()
		wrote, known := s.runnerEvent(e)
		ok := !wrote || s.flush()
		s.mu.Unlock()
		if !wrote {
			h.b.Logger.Warn("jsonapi: an event of a session", "session", id, "kind", e.Kind, "known", known)
		}
		if !ok || e.Kind == runner.EventSessionDeleted {
			return
		}
	}
}

// helloData is the data of the hello event.
func (h *Handler) helloData(state runner.LogState, replay bool) []byte {
	b := make([]byte, 0, 96+len(h.hello))
	b = append(b, `{"busy":`...)
	b = strconv.AppendBool(b, state.Running())
	if state.Turn != 0 {
		b = append(b, `,"turn":`...)
		b = strconv.AppendInt(b, state.Turn, 10)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, state.Last, 10)
	b = append(b, `,"replay":`...)
	b = strconv.AppendBool(b, replay)
	if len(h.hello) > 0 {
		b = append(b, ',')
		b = append(b, h.hello...)
	}
	return append(b, '}')
}

// afterParam returns the Seq of the last event a client has, from the
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

// pendingChunks returns the chunks that draw again what waits for the
// session's person: the approval_required chunks of its pending approvals,
// and for each open form its call's executing chunk and its form_request
// side chunk. Those of a sub-agent's run are marked as they were in the
// log of the turn in progress (see nestedMarks). A Store that fails is
// logged; what was read is returned.
func (h *Handler) pendingChunks(ctx context.Context, sessionID string, state runner.LogState) []agent.Chunk {
	list, err := h.b.Runner.Pending(ctx, sessionID)
	if err != nil {
		h.b.Logger.Warn("jsonapi: listing the pending approvals and forms", "session", sessionID, "err", err)
	}
	if len(list) == 0 {
		return nil
	}
	nested := h.nestedMarks(ctx, sessionID, state)
	mark := func(key string, c agent.Chunk) agent.Chunk {
		if m, ok := nested[key]; ok {
			c.Agent, c.Depth, c.Parent, c.Round = m.Agent, m.Depth, m.Parent, m.Round
		}
		return c
	}
	var out []agent.Chunk
	// The approvals first, then the forms, each oldest first.
	for _, a := range list {
		if p := a.Approval; p != nil {
			call := p.Call
			call.State = agent.StateApprovalRequired
			call.ApprovalRequired = true
			call.ApprovalID = p.ApprovalID
			out = append(out, mark(p.ApprovalID, agent.Chunk{Kind: agent.KindToolCall, Round: p.Round, Tool: &call}))
		}
	}
	for _, a := range list {
		if f := a.Form; f != nil {
			call := agent.ToolCall{ID: f.CallID, Name: "ask_user_question"}
			executing := call
			executing.State = agent.StateExecuting
			out = append(out,
				mark(f.FormID, agent.Chunk{Kind: agent.KindToolCall, Tool: &executing}),
				mark(f.FormID, agent.Chunk{Kind: agent.KindSide, Tool: &call, Side: f.FormRequest}))
		}
	}
	return out
}

// nestedMarks returns where the approvals and forms that a sub-agent's run
// of the turn in progress asked belong (the Agent, Depth, Parent and Round
// of their chunks), by approval id and form id, as the turn's log holds
// them; none when no turn is in progress.
func (h *Handler) nestedMarks(ctx context.Context, sessionID string, state runner.LogState) map[string]agent.Chunk {
	if !state.Running() || state.Last < state.Turn {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var marks map[string]agent.Chunk
	for e, err := range h.b.Runner.Subscribe(ctx, sessionID, state.Turn-1) {
		if err != nil || e.Kind == runner.EventSessionDeleted {
			break
		}
		if c := e.Chunk; e.Kind == runner.EventChunk && c.Depth > 0 && turn.AsksPerson(c) {
			key := turn.FormID(c.Side)
			if c.Kind == agent.KindToolCall {
				key = c.Tool.ApprovalID
			}
			if key != "" {
				if marks == nil {
					marks = make(map[string]agent.Chunk)
				}
				marks[key] = agent.Chunk{Agent: c.Agent, Depth: c.Depth, Parent: c.Parent, Round: c.Round}
			}
		}
		if e.Seq >= state.Last {
			break
		}
	}
	return marks
}
