package jsonapi

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
)

// The person's requests: a decision, a form's answers, a stop. Each names
// a session, which the caller must be authorized for, and goes to the
// runner, which takes it in the Store: the run that waits for it, on any
// process, takes it, and a suspended turn resumes on it.

// DecideRequest is the JSON body of POST {prefix}/tool-approve.
type DecideRequest struct {
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
	// (taken as "session": a client grants no more than its own session).
	Scope string `json:"scope,omitempty"`
}

// AnswerRequest is the JSON body of POST {prefix}/form-answer:
//
//	{"session_id":"s1","form_id":"5f0c…","answers":{"when":"Friday","seat":"window","meals":["veg"]}}
//	{"session_id":"s1","form_id":"9a1b…","action":"accept","content":{"repo":"planround"}}
type AnswerRequest struct {
	// SessionID is the session of the run (required).
	SessionID string `json:"session_id"`
	// FormID is the form id of the form_request (required).
	FormID string `json:"form_id"`
	// Answers are the answers by question id (required for a
	// form_request); see interact.Answer for their JSON.
	Answers interact.Answers `json:"answers,omitempty"`
	// Action answers an elicitation_request (instead of Answers): accept,
	// decline or cancel; Content is what the person entered, to accept a
	// form.
	Action  string         `json:"action,omitempty"`
	Content map[string]any `json:"content,omitempty"`
}

// StopResponse is the answer of POST {prefix}/interrupt.
type StopResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// WasActive is true when a run of the session was interrupted or a
	// form closed: the end of a turn follows.
	WasActive bool `json:"was_active"`
	// Cancelled is how many approvals were cancelled.
	Cancelled int `json:"cancelled"`
}

// sessionRequest is a body that names a session only.
type sessionRequest struct {
	SessionID string `json:"session_id"`
}

// decide takes a decision: POST /tool-approve.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	var req DecideRequest
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	principal, ok := h.authorized(w, r, req.SessionID)
	if !ok {
		return
	}
	switch {
	case req.ApprovalID == "":
		writeError(w, http.StatusBadRequest, "missing approval_id")
		return
	case req.CallID == "" || req.Tool == "" || req.ArgumentsDigest == "":
		writeError(w, http.StatusBadRequest, "missing call_id, tool or arguments_digest: a decision names the call it decides, as the approval_required chunk shows it")
		return
	case req.Approved == nil:
		writeError(w, http.StatusBadRequest, "missing approved")
		return
	}
	d := agent.Decision{Approved: *req.Approved, Reason: req.Reason, By: principal, Via: Via}
	switch req.Scope {
	case "", "once":
	case "session", "always": // a client grants no more than its own session
		d.Scope = agent.ScopeSession
	default:
		writeError(w, http.StatusBadRequest, "unknown scope "+req.Scope+" (want once, session or always)")
		return
	}
	if len(req.Arguments) > 0 && !bytes.Equal(req.Arguments, []byte("null")) {
		d.Arguments = req.Arguments
	}
	pending, err := h.b.Runner.Decide(r.Context(), runner.Reply{SessionID: req.SessionID, ApprovalID: req.ApprovalID,
		CallID: req.CallID, Tool: req.Tool, ArgumentsDigest: req.ArgumentsDigest, Decision: d})
	switch {
	case errors.Is(err, approval.ErrWrongSession):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, approval.ErrMismatch):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, approval.ErrInvalidArguments), errors.Is(err, approval.ErrInvalidScope):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	case !pending:
		writeError(w, http.StatusOK, "approval is not pending (answered, timed out, cancelled, or lost in a server restart)")
	default:
		writeJSON(w, http.StatusOK, response{Success: true})
	}
}

// answer takes a form's answers: POST /form-answer.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request) {
	var req AnswerRequest
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	principal, ok := h.authorized(w, r, req.SessionID)
	if !ok {
		return
	}
	switch {
	case req.FormID == "":
		writeError(w, http.StatusBadRequest, "missing form_id")
		return
	case req.Answers == nil && req.Action == "":
		writeError(w, http.StatusBadRequest, "missing answers")
		return
	}
	reply := runner.FormReply{SessionID: req.SessionID, FormID: req.FormID, Answers: req.Answers, By: principal, Via: Via}
	if req.Action != "" {
		reply.Elicitation = &interact.ElicitationAnswer{Action: req.Action, Content: req.Content}
	}
	open, err := h.b.Runner.Answer(r.Context(), reply)
	switch {
	case errors.Is(err, interact.ErrWrongSession):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, interact.ErrInvalidAnswers):
		msg := strings.TrimPrefix(err.Error(), interact.ErrInvalidAnswers.Error()+": ")
		writeError(w, http.StatusBadRequest, strings.TrimPrefix(msg, "interact: "))
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	case !open:
		writeError(w, http.StatusOK, "form is not open (answered, timed out, cancelled, ended with its run, or lost in a server restart)")
	default:
		writeJSON(w, http.StatusOK, response{Success: true})
	}
}

// stop stops a session: POST /interrupt.
func (h *Handler) stop(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	if _, ok := h.authorized(w, r, req.SessionID); !ok {
		return
	}
	stopped, err := h.b.Runner.Stop(r.Context(), req.SessionID)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, StopResponse{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, StopResponse{Success: true, WasActive: stopped.Run || stopped.Forms > 0, Cancelled: stopped.Approvals})
}
