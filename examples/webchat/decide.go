package main

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/runner"
)

// The person's requests: a decision, a form's answers, a stop. Each names
// a session, which the caller must own (authorize), and goes to the
// runner, which takes it in the Store: the run that waits for it, on any
// replica, takes it, and a suspended turn resumes on it.

// owned is the owner check of the person's requests.
var owned = approval.HandlerConfig{Authorize: authorize}

// handleApprove answers POST /api/tool-approve, an approval.ApproveRequest:
// a decision bound to the call the card shows (call_id, tool,
// arguments_digest), given to runner.Runner.Decide with the browser's
// principal as its By.
//
//	200 {"success":true}                 the decision was taken
//	200 {"success":false,"error":"..."}  the approval is not pending (a stale card)
//	400                                  a missing field, an unknown scope, arguments that are not an object
//	401, 403                             not the session's owner; 403 also for an approval of another session
//	409                                  the call named is not the approval's (it stays pending)
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) {
	var req approval.ApproveRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing session_id"})
		return
	}
	principal, ok := owned.Check(w, r, req.SessionID)
	if !ok {
		return
	}
	switch {
	case req.ApprovalID == "":
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing approval_id"})
		return
	case req.CallID == "" || req.Tool == "" || req.ArgumentsDigest == "":
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing call_id, tool or arguments_digest: a decision names the call it decides, as the approval_required chunk shows it"})
		return
	case req.Approved == nil:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing approved"})
		return
	}
	d := agent.Decision{Approved: *req.Approved, Reason: req.Reason, By: principal, Via: approval.ViaHTTP}
	switch req.Scope {
	case "", "once":
	case "session", "always": // a browser grants no more than its own session
		d.Scope = agent.ScopeSession
	default:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "unknown scope " + req.Scope + " (want once, session or always)"})
		return
	}
	if len(req.Arguments) > 0 && !bytes.Equal(req.Arguments, []byte("null")) {
		d.Arguments = req.Arguments
	}
	pending, err := s.runner.Decide(r.Context(), runner.Reply{SessionID: req.SessionID, ApprovalID: req.ApprovalID,
		CallID: req.CallID, Tool: req.Tool, ArgumentsDigest: req.ArgumentsDigest, Decision: d})
	switch {
	case errors.Is(err, approval.ErrWrongSession):
		writeJSON(w, http.StatusForbidden, apiResponse{Error: err.Error()})
	case errors.Is(err, approval.ErrMismatch):
		writeJSON(w, http.StatusConflict, apiResponse{Error: err.Error()})
	case errors.Is(err, approval.ErrInvalidArguments), errors.Is(err, approval.ErrInvalidScope):
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: err.Error()})
	case !pending:
		writeJSON(w, http.StatusOK, apiResponse{Error: "approval is not pending (answered, timed out, cancelled, or lost in a server restart)"})
	default:
		writeJSON(w, http.StatusOK, apiResponse{Success: true})
	}
}

// handleFormAnswer answers POST /api/form-answer, an
// interact.AnswerRequest: the answers to a form (or, with an action, to an
// MCP server's request for input), given to runner.Runner.Answer.
//
//	200 {"success":true}                 the answers were taken
//	200 {"success":false,"error":"..."}  the form is not open (a stale form)
//	400                                  a missing field, answers that do not fit the form
//	401, 403                             not the session's owner; 403 also for a form of another session
func (s *Server) handleFormAnswer(w http.ResponseWriter, r *http.Request) {
	var req interact.AnswerRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing session_id"})
		return
	}
	principal, ok := owned.Check(w, r, req.SessionID)
	if !ok {
		return
	}
	switch {
	case req.FormID == "":
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing form_id"})
		return
	case req.Answers == nil && req.Action == "":
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing answers"})
		return
	}
	reply := runner.FormReply{SessionID: req.SessionID, FormID: req.FormID, Answers: req.Answers, By: principal, Via: approval.ViaHTTP}
	if req.Action != "" {
		reply.Elicitation = &interact.ElicitationAnswer{Action: req.Action, Content: req.Content}
	}
	open, err := s.runner.Answer(r.Context(), reply)
	switch {
	case errors.Is(err, interact.ErrWrongSession):
		writeJSON(w, http.StatusForbidden, apiResponse{Error: err.Error()})
	case errors.Is(err, interact.ErrInvalidAnswers):
		msg := strings.TrimPrefix(err.Error(), interact.ErrInvalidAnswers.Error()+": ")
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: strings.TrimPrefix(msg, "interact: ")})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: err.Error()})
	case !open:
		writeJSON(w, http.StatusOK, apiResponse{Error: "form is not open (answered, timed out, cancelled, ended with its run, or lost in a server restart)"})
	default:
		writeJSON(w, http.StatusOK, apiResponse{Success: true})
	}
}

// stopResponse is the answer of POST /api/interrupt.
type stopResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// WasActive is true when a run of the session was interrupted or a
	// form closed: the end of a turn follows.
	WasActive bool `json:"was_active"`
	// Cancelled is how many approvals were cancelled.
	Cancelled int `json:"cancelled"`
}

// handleInterrupt answers POST /api/interrupt {"session_id"}: it stops the
// session (runner.Runner.Stop: its run interrupted wherever it runs, its
// approvals and forms cancelled).
//
//	200 {"success":true,"was_active":true,"cancelled":1}
//	200 {"success":true,"was_active":false,"cancelled":0}  nothing ran nor waited
//	401, 403                                               not the session's owner
//	500 {"success":false,"error":"..."}                    the Store failed
func (s *Server) handleInterrupt(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID string `json:"session_id"`
	}
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing session_id"})
		return
	}
	if _, ok := owned.Check(w, r, req.SessionID); !ok {
		return
	}
	stopped, err := s.runner.Stop(r.Context(), req.SessionID)
	if err != nil {
		writeJSONValue(w, http.StatusInternalServerError, stopResponse{Error: err.Error()})
		return
	}
	writeJSONValue(w, http.StatusOK, stopResponse{Success: true, WasActive: stopped.Run || stopped.Forms > 0, Cancelled: stopped.Approvals})
}
