package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
)

// The person's requests: a decision, a form's answers, a stop. Each names
// a session, which the caller must own (authorize), and goes to the
// runner, which takes it in the Store: the run that waits for it, on any
// replica, takes it, and a suspended turn resumes on it.

// owned is the owner check of the person's requests.
var owned = ui.AuthorizeFunc(authorize)

// approveRequest is the JSON body of POST /api/tool-approve.
type approveRequest struct {
	// SessionID is the session of the run (required).
	SessionID string `json:"session_id"`
	// ApprovalID is the approval id of the approval_required chunk,
	// agent.ToolCall.ApprovalID (required).
	ApprovalID string `json:"approval_id"`
	// CallID, Tool and ArgumentsDigest are the call the person saw, as on
	// the approval_required chunk (agent.ToolCall.ID, Name and
	// ArgumentsDigest); all three are required, and a decision whose call
	// is not the approval's is refused (409).
	CallID          string `json:"call_id"`
	Tool            string `json:"tool"`
	ArgumentsDigest string `json:"arguments_digest"`
	// Approved is the decision (required).
	Approved *bool `json:"approved"`
	// Reason optionally says why.
	Reason string `json:"reason,omitempty"`
	// Arguments optionally replace the call's arguments; they must be a
	// JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Scope is "once" (the default when empty), "session" or "always"
	// (taken as "session": a browser grants no more than its own session).
	Scope string `json:"scope,omitempty"`
}

// answerRequest is the JSON body of POST /api/form-answer:
//
//	{"session_id":"s1","form_id":"5f0c…","answers":{"when":"Friday","seat":"window","meals":["veg"]}}
//	{"session_id":"s1","form_id":"9a1b…","action":"accept","content":{"repo":"planround"}}
type answerRequest struct {
	// SessionID is the session of the run (required).
	SessionID string `json:"session_id"`
	// FormID is the form id of the form_request (required).
	FormID string `json:"form_id"`
	// Answers are the answers by question id (required for a
	// form_request); see interact.Answer for their JSON.
	Answers interact.Answers `json:"answers,omitempty"`
	// Action answers an elicitation_request (instead of Answers): accept,
	// decline or cancel; Content is what the user entered, to accept a
	// form.
	Action  string         `json:"action,omitempty"`
	Content map[string]any `json:"content,omitempty"`
}

// handleApprove answers POST /api/tool-approve, an approveRequest:
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
	var req approveRequest
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

// handleFormAnswer answers POST /api/form-answer, an answerRequest: the answers to a form (or, with an action, to an
// MCP server's request for input), given to runner.Runner.Answer.
//
//	200 {"success":true}                 the answers were taken
//	200 {"success":false,"error":"..."}  the form is not open (a stale form)
//	400                                  a missing field, answers that do not fit the form
//	401, 403                             not the session's owner; 403 also for a form of another session
func (s *Server) handleFormAnswer(w http.ResponseWriter, r *http.Request) {
	var req answerRequest
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
