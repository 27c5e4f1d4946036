package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

func (r *replica) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /turn", r.handleTurn)
	mux.HandleFunc("POST /approve", r.handleApprove)
	mux.HandleFunc("POST /interrupt", r.handleInterrupt)
	mux.HandleFunc("GET /events", r.handleEvents)
	mux.HandleFunc("GET /history", r.handleHistory)
	mux.HandleFunc("GET /calls", r.handleCalls)
	mux.HandleFunc("GET /approvals", r.handleApprovals)
	mux.HandleFunc("GET /approval", r.handleApproval)
	mux.HandleFunc("POST /form-answer", r.handleFormAnswer)
	mux.HandleFunc("GET /forms", r.handleForms)
	mux.HandleFunc("GET /healthz", r.handleHealth)
	return mux
}

// lineWriter writes events as JSON lines, flushing each; it reports false
// once the client is gone.
type lineWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc *json.Encoder
}

func newLineWriter(w http.ResponseWriter) *lineWriter {
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
	lw.flush()
	return lw
}

func (lw *lineWriter) flush() bool { return lw.rc.Flush() == nil }

func (lw *lineWriter) write(e event) bool {
	return lw.enc.Encode(e) == nil && lw.flush()
}

// handleTurn starts a turn and streams its events until it ends. The run
// does not depend on the client: it goes on (and is persisted) if the
// client leaves.
func (r *replica) handleTurn(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Session string `json:"session"`
		Message string `json:"message"`
	}
	if !httpjson.Decode(w, req, &body, maxBody) {
		return
	}
	if body.Session == "" || body.Message == "" {
		httpjson.WriteError(w, http.StatusBadRequest, "session and message are required")
		return
	}
	turn, err := r.runner.Start(req.Context(), agent.Input{SessionID: body.Session, Message: body.Message})
	switch {
	case errors.Is(err, agent.ErrBusy):
		httpjson.WriteError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		httpjson.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	lw := newLineWriter(w)
	for e, err := range r.runner.Subscribe(req.Context(), body.Session, turn.Seq-1) {
		if err != nil {
			lw.write(event{Session: body.Session, Run: "turn", End: true, Error: err.Error()})
			return
		}
		if e.Turn != turn.Seq {
			continue // a later turn's
		}
		ev, ok := toEvent(body.Session, "turn", e)
		if ok && !lw.write(ev) {
			return
		}
		if e.Kind == runner.EventTurnEnded {
			return
		}
	}
}

// handleApprove takes a decision bound to the call it names (call_id,
// tool, arguments_digest, as on the approval_required chunk). It answers
// 200 when this decision was taken; 409 when the call named is not the
// approval's ({"mismatch": true}: the approval stays pending) or when
// another decision came first (with the approval as it stands); 404 for an
// unknown approval and 403 for one of another session.
func (r *replica) handleApprove(w http.ResponseWriter, req *http.Request) {
	var body struct {
		SessionID       string `json:"session_id"`
		ApprovalID      string `json:"approval_id"`
		CallID          string `json:"call_id"`
		Tool            string `json:"tool"`
		ArgumentsDigest string `json:"arguments_digest"`
		Approved        bool   `json:"approved"`
		Reason          string `json:"reason"`
	}
	if !httpjson.Decode(w, req, &body, maxBody) {
		return
	}
	if body.SessionID == "" || body.ApprovalID == "" {
		httpjson.WriteError(w, http.StatusBadRequest, "session_id and approval_id are required")
		return
	}
	ctx := req.Context()
	pending, err := r.runner.Decide(ctx, runner.Reply{
		SessionID: body.SessionID, ApprovalID: body.ApprovalID,
		CallID: body.CallID, Tool: body.Tool, ArgumentsDigest: body.ArgumentsDigest,
		Decision: agent.Decision{Approved: body.Approved, Reason: body.Reason, By: r.opts.holder, Via: approval.ViaHTTP},
	})
	switch {
	case errors.Is(err, approval.ErrWrongSession):
		httpjson.WriteError(w, http.StatusForbidden, err.Error())
		return
	case errors.Is(err, approval.ErrMismatch):
		httpjson.WriteJSON(w, http.StatusConflict, map[string]any{"success": false, "error": err.Error(), "mismatch": true})
		return
	case errors.Is(err, approval.ErrInvalidArguments), errors.Is(err, approval.ErrInvalidScope):
		httpjson.WriteError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	case pending:
		httpjson.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
		return
	}
	// Not pending: unknown, or decided before this decision came.
	a, err := r.store.GetApproval(ctx, body.ApprovalID)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		httpjson.WriteError(w, http.StatusNotFound, "no approval "+body.ApprovalID)
	case err != nil:
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		httpjson.WriteJSON(w, http.StatusConflict, map[string]any{"success": false, "error": "not pending", "approval": a})
	}
}

// handleInterrupt stops a session (runner.Runner.Stop): its run is
// interrupted, here or on the replica that drives it, then its pending
// approvals (a suspended turn has no run: the cancelled approvals end it
// when it is resumed) and its open forms are cancelled, as a front end's
// stop button does.
func (r *replica) handleInterrupt(w http.ResponseWriter, req *http.Request) {
	var body struct {
		SessionID string `json:"session_id"`
	}
	if !httpjson.Decode(w, req, &body, maxBody) {
		return
	}
	if body.SessionID == "" {
		httpjson.WriteError(w, http.StatusBadRequest, "session_id is required")
		return
	}
	stopped, err := r.runner.Stop(req.Context(), body.SessionID)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "running": stopped.Run, "cancelled": stopped.Approvals + stopped.Forms})
}

// answerRequest is the body of POST /form-answer: a form's answers, or an
// elicitation's action and content.
type answerRequest struct {
	SessionID string           `json:"session_id"`
	FormID    string           `json:"form_id"`
	Answers   interact.Answers `json:"answers,omitempty"`
	Action    string           `json:"action,omitempty"`
	Content   map[string]any   `json:"content,omitempty"`
}

// handleFormAnswer gives the answers of an answerRequest to their
// form (runner.Runner.Answer), from the replica's holder. It answers 200
// {"success":true} when they were taken, 200 {"success":false} when the
// form is not open, 403 for a form of another session, 400 for answers
// that do not fit it.
func (r *replica) handleFormAnswer(w http.ResponseWriter, req *http.Request) {
	var body answerRequest
	if !httpjson.Decode(w, req, &body, maxBody) {
		return
	}
	if body.SessionID == "" || body.FormID == "" {
		httpjson.WriteError(w, http.StatusBadRequest, "session_id and form_id are required")
		return
	}
	reply := runner.FormReply{SessionID: body.SessionID, FormID: body.FormID, Answers: body.Answers, By: r.opts.holder, Via: approval.ViaHTTP}
	if body.Action != "" {
		reply.Elicitation = &interact.ElicitationAnswer{Action: body.Action, Content: body.Content}
	}
	open, err := r.runner.Answer(req.Context(), reply)
	switch {
	case errors.Is(err, interact.ErrWrongSession):
		httpjson.WriteError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, interact.ErrInvalidAnswers):
		httpjson.WriteError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		httpjson.WriteJSON(w, http.StatusOK, map[string]any{"success": open})
	}
}

// handleEvents streams the events of the runs of a session (of every
// session without one) in this replica, from the moment its headers are
// sent (with replay=1, from the oldest event the replica kept) until the
// client leaves or the replica stops.
func (r *replica) handleEvents(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	s, past := r.hub.subscribe(q.Get("session"), q.Get("replay") == "1")
	defer r.hub.unsubscribe(s)
	lw := newLineWriter(w)
	for _, e := range past {
		if !lw.write(e) {
			return
		}
	}
	for {
		select {
		case <-req.Context().Done():
			return
		case e, ok := <-s.ch:
			if !ok {
				lw.write(event{Session: s.session, End: true, Error: "events lost: this subscriber fell behind"})
				return
			}
			if !lw.write(e) {
				return
			}
		}
	}
}

func (r *replica) handleHistory(w http.ResponseWriter, req *http.Request) {
	msgs, err := r.store.Messages(req.Context(), req.URL.Query().Get("session"), true)
	answer(w, msgs, err)
}

func (r *replica) handleCalls(w http.ResponseWriter, req *http.Request) {
	calls, err := r.store.OpenCalls(req.Context(), req.URL.Query().Get("session"))
	answer(w, calls, err)
}

// handleApprovals lists the session's pending approvals (memory.Approval,
// whose Digest a decision names), without its forms (see /forms).
func (r *replica) handleApprovals(w http.ResponseWriter, req *http.Request) {
	as, err := r.store.PendingApprovals(req.Context(), req.URL.Query().Get("session"))
	answer(w, slices.DeleteFunc(as, func(a memory.Approval) bool { return a.Kind == memory.KindForm }), err)
}

// handleForms lists the session's open forms (interact.PendingForm), as a
// reconnecting front end draws them (runner.Runner.Pending).
func (r *replica) handleForms(w http.ResponseWriter, req *http.Request) {
	list, err := r.runner.Pending(req.Context(), req.URL.Query().Get("session"))
	forms := []interact.PendingForm{}
	for _, a := range list {
		if a.Form != nil {
			forms = append(forms, *a.Form)
		}
	}
	answer(w, forms, err)
}

func (r *replica) handleApproval(w http.ResponseWriter, req *http.Request) {
	a, err := r.store.GetApproval(req.Context(), req.URL.Query().Get("id"))
	answer(w, a, err)
}

func (r *replica) handleHealth(w http.ResponseWriter, _ *http.Request) {
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "holder": r.opts.holder, "sweeps": r.sweeps.Load()})
}

// answer writes v, or err as 404 (memory.ErrNotFound) or 500.
func answer(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, memory.ErrNotFound):
		httpjson.WriteError(w, http.StatusNotFound, err.Error())
	case err != nil:
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		httpjson.WriteJSON(w, http.StatusOK, v)
	}
}
