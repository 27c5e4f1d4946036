package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/planround/planround/agent"
)

// MaxBodyBytes is the largest request body the handlers of this package
// read; a larger one is answered with 413 Request Entity Too Large.
const MaxBodyBytes = 1 << 20

// errStale is the error text of a decision for an approval that is not
// pending.
const errStale = "approval is not pending (answered, timed out, cancelled, or lost in a server restart)"

// ApproveRequest is the JSON body of the handler of [Manager.ApproveHandler].
type ApproveRequest struct {
	// SessionID is the session of the run (required).
	SessionID string `json:"session_id"`
	// TaskID is the approval id of the approval_required chunk,
	// agent.ToolCall.ApprovalID (required).
	TaskID string `json:"task_id"`
	// Approved is the decision (required).
	Approved *bool `json:"approved"`
	// Reason optionally says why.
	Reason string `json:"reason,omitempty"`
	// Arguments optionally replace the call's arguments; they must be a
	// JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Scope is "once" (the default when empty), "session" or "always".
	Scope string `json:"scope,omitempty"`
}

// InterruptRequest is the JSON body of the handler of
// [Manager.InterruptHandler].
type InterruptRequest struct {
	// SessionID is the session to interrupt (required).
	SessionID string `json:"session_id"`
}

// Response is the JSON body every handler of this package answers with.
type Response struct {
	// Success is true when the request did what it asked.
	Success bool `json:"success"`
	// Error says what went wrong when Success is false.
	Error string `json:"error,omitempty"`
	// WasActive is set by the interrupt handler: true when a run of the
	// session was interrupted.
	WasActive *bool `json:"was_active,omitempty"`
	// Cancelled is set by the interrupt handler: how many pending
	// approvals it cancelled.
	Cancelled *int `json:"cancelled,omitempty"`
}

// ApproveHandler returns the handler a host mounts at POST /api/tool-approve.
// It decodes an [ApproveRequest], gives the decision to [Manager.Respond] and
// answers with a [Response]:
//
//	200 {"success":true}                   the decision was taken
//	200 {"success":false,"error":"..."}    the approval was not pending (a
//	                                       stale card: mark it invalid)
//	400 {"success":false,"error":"..."}    malformed JSON, a missing field,
//	                                       an unknown scope, arguments that
//	                                       are not a JSON object
//	403 {"success":false,"error":"..."}    the id belongs to another session
//	405, 413                               not POST; body over MaxBodyBytes
//
// A stale approval gets 200, not 404, so a front end handles it as an answer
// (invalidate the pending cards) rather than as a transport failure. Every
// answer is JSON. The handler is safe for concurrent use.
func (m *Manager) ApproveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req ApproveRequest
		if !decode(w, r, &req) {
			return
		}
		switch {
		case req.SessionID == "":
			writeError(w, http.StatusBadRequest, "missing session_id")
			return
		case req.TaskID == "":
			writeError(w, http.StatusBadRequest, "missing task_id")
			return
		case req.Approved == nil:
			writeError(w, http.StatusBadRequest, "missing approved")
			return
		}
		scope, err := parseScope(req.Scope)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		d := agent.Decision{Approved: *req.Approved, Reason: req.Reason, Scope: scope}
		if len(req.Arguments) > 0 && !bytes.Equal(req.Arguments, []byte("null")) {
			d.Arguments = req.Arguments
		}
		pending, err := m.Respond(req.SessionID, req.TaskID, d)
		switch {
		case errors.Is(err, ErrWrongSession):
			writeError(w, http.StatusForbidden, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		case !pending:
			writeJSON(w, http.StatusOK, Response{Error: errStale})
		default:
			writeJSON(w, http.StatusOK, Response{Success: true})
		}
	})
}

// InterruptHandler returns the handler a host mounts at POST /api/interrupt.
// It decodes an [InterruptRequest], calls interrupt(sessionID), which cancels
// the session's run and reports whether one was active (interrupt may be nil),
// then [Manager.CancelSession], which also ends approvals registered but not
// yet waited for. It answers:
//
//	200 {"success":true,"was_active":true,"cancelled":1}
//	404 {"success":false,"error":"..."}    no active run and no pending
//	                                       approval in that session
//	400, 405, 413                          as for ApproveHandler
//
// The handler is safe for concurrent use when interrupt is.
func (m *Manager) InterruptHandler(interrupt func(sessionID string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req InterruptRequest
		if !decode(w, r, &req) {
			return
		}
		if req.SessionID == "" {
			writeError(w, http.StatusBadRequest, "missing session_id")
			return
		}
		active := interrupt != nil && interrupt(req.SessionID)
		n := m.CancelSession(req.SessionID)
		if !active && n == 0 {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no active run in session %q", req.SessionID))
			return
		}
		writeJSON(w, http.StatusOK, Response{Success: true, WasActive: &active, Cancelled: &n})
	})
}

func parseScope(s string) (agent.Scope, error) {
	switch s {
	case "", "once":
		return agent.ScopeOnce, nil
	case "session":
		return agent.ScopeSession, nil
	case "always":
		return agent.ScopeAlways, nil
	}
	return 0, fmt.Errorf("unknown scope %q (want once, session or always)", s)
}

// decode reads r's JSON body into v. On failure it writes the error answer
// and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed, use POST")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	err := dec.Decode(v)
	if err == nil {
		// Exactly one JSON value: anything after it is malformed.
		switch _, terr := dec.Token(); {
		case terr == io.EOF:
		case errors.As(terr, new(*http.MaxBytesError)):
			err = terr
		default:
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty request body")
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
	}
	return false
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, Response{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v Response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}
