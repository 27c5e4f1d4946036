package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/httpjson"
)

// MaxBodyBytes is the largest request body the handlers of this package
// read; a larger one is answered with 413 Request Entity Too Large.
const MaxBodyBytes = 1 << 20

// ErrUnauthenticated is what a [HandlerConfig.Authorize] function wraps to
// say that the request carries no valid credential: the handler answers
// 401 instead of 403.
var ErrUnauthenticated = errors.New("approval: not authenticated")

// HandlerConfig configures the handler of [Manager.ApproveHandler] (and
// the owner check of the handlers of interact and ui). Authorize is
// required: the session id in a request body is no credential, and nobody
// may decide or stop for another person's session. (A stop is
// runner.Runner.Stop, behind a host's or a ui handler's route.) The handlers of a config without it answer every
// request with 500 Internal Server Error and act on nothing.
type HandlerConfig struct {
	// Authorize is called with every request and the session its body
	// names, after the body was decoded and before the handler does
	// anything. It returns who is asking (the principal: a user name or id
	// as the host's authentication knows it, which the audit records with
	// every decision) and a nil error when the caller may act on that
	// session, for example when the request's cookie or token belongs to
	// the session's owner. An error wrapping [ErrUnauthenticated] is
	// answered with 401, any other error with 403; the error's text is the
	// answer's error. It must be safe for concurrent use. Required: a host
	// that truly lets every caller act on every session says so with
	// [AllowAnyCaller].
	Authorize func(r *http.Request, sessionID string) (principal string, err error)

	// AllowAlways lets a decision carry the scope "always", a grant of
	// the tool for every session of the process (see [AllowList]). By
	// default a client grants no more than its own session: a decision
	// with the scope "always" is taken with the scope "session".
	AllowAlways bool
}

// AllowAnyCaller is an [HandlerConfig.Authorize] function that lets every
// request act on the session it names. It is only for a single-user tool
// whose handlers nobody but its user can reach (a server on the loopback
// interface of a personal machine): anyone who can send a request can then
// approve or interrupt any session's tool calls. The principal it returns
// is [AnyCaller].
func AllowAnyCaller(*http.Request, string) (string, error) { return AnyCaller, nil }

// AnyCaller is the principal [AllowAnyCaller] returns.
const AnyCaller = "any-caller"

// errNoAuthorize is the answer of a handler whose config has no Authorize.
const errNoAuthorize = "approval: the handler has no HandlerConfig.Authorize; set one that checks the caller, or approval.AllowAnyCaller for a single-user loopback tool"

// configured reports whether c has an Authorize function. When it has none
// it writes the answer and returns false.
func (c HandlerConfig) configured(w http.ResponseWriter) bool {
	if c.Authorize == nil {
		writeError(w, http.StatusInternalServerError, errNoAuthorize)
		return false
	}
	return true
}

// Check runs c.Authorize for a request that acts on sessionID, and answers
// it when the handler must not go on: 500 Internal Server Error when c has
// no Authorize, 401 Unauthorized for an error wrapping [ErrUnauthenticated],
// 403 Forbidden for any other error (the error's text is the answer's
// error). It reports whether the handler may act, and who is asking (the
// principal Authorize returned; "unknown" when it returned none). The
// handlers of this package and of package interact use it; so may a host's
// own handler that acts on a session.
func (c HandlerConfig) Check(w http.ResponseWriter, r *http.Request, sessionID string) (principal string, ok bool) {
	if !c.configured(w) {
		return "", false
	}
	principal, err := c.Authorize(r, sessionID)
	switch {
	case err == nil:
		if principal == "" {
			principal = "unknown"
		}
		return principal, true
	case errors.Is(err, ErrUnauthenticated):
		writeError(w, http.StatusUnauthorized, err.Error())
	default:
		writeError(w, http.StatusForbidden, err.Error())
	}
	return "", false
}

// errStale is the error text of a decision for an approval that is not
// pending.
const errStale = "approval is not pending (answered, timed out, cancelled, or lost in a server restart)"

// ApproveRequest is the JSON body of the handler of [Manager.ApproveHandler].
type ApproveRequest struct {
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
	// Scope is "once" (the default when empty), "session" or "always";
	// "always" is taken as "session" unless [HandlerConfig.AllowAlways]
	// is set.
	Scope string `json:"scope,omitempty"`
}

// Response is the JSON body every handler of this package answers with.
type Response struct {
	// Success is true when the request did what it asked.
	Success bool `json:"success"`
	// Error says what went wrong when Success is false.
	Error string `json:"error,omitempty"`
	// WasActive is set by a stop handler (ui/aisdk's): true when something
	// of the session was stopped, false when nothing ran nor waited.
	WasActive *bool `json:"was_active,omitempty"`
}

// ApproveHandler returns the handler a host mounts at POST /api/tool-approve.
// It decodes an [ApproveRequest], asks cfg.Authorize whether the caller may
// decide in the session, gives the decision to [Manager.Respond], with the
// principal Authorize returned as its By and [ViaHTTP] as its Via, and
// answers with a [Response]:
//
//	200 {"success":true}                   the decision was taken
//	200 {"success":false,"error":"..."}    the approval was not pending (a
//	                                       stale card: mark it invalid)
//	400 {"success":false,"error":"..."}    malformed JSON, a missing field,
//	                                       an unknown scope, arguments that
//	                                       are not a JSON object
//	401, 403 {"success":false,...}         refused by cfg.Authorize; 403 also
//	                                       when the id belongs to another
//	                                       session
//	409 {"success":false,"error":"..."}    the call id, tool or arguments
//	                                       digest is not the approval's: the
//	                                       card shows another call than the
//	                                       server holds (the approval stays
//	                                       pending)
//	500 {"success":false,...}              cfg has no Authorize, or the
//	                                       Manager's Store failed
//	405, 408, 413, 415                     not POST; the body did not arrive
//	                                       before the server's read deadline;
//	                                       body over MaxBodyBytes; not
//	                                       application/json
//
// A stale approval gets 200, not 404, so a front end handles it as an answer
// (invalidate the pending cards) rather than as a transport failure. Every
// answer is JSON. The handler sets no deadline of its own: give the
// http.Server a ReadTimeout (or set one per request) so that a client that
// sends its body slowly is cut off. The handler is safe for concurrent use.
func (m *Manager) ApproveHandler(cfg HandlerConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.configured(w) {
			return
		}
		var req ApproveRequest
		if !decode(w, r, &req) {
			return
		}
		if req.SessionID == "" {
			writeError(w, http.StatusBadRequest, "missing session_id")
			return
		}
		principal, ok := cfg.Check(w, r, req.SessionID)
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
		scope, err := parseScope(req.Scope)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if scope == agent.ScopeAlways && !cfg.AllowAlways {
			scope = agent.ScopeSession
		}
		d := agent.Decision{Approved: *req.Approved, Reason: req.Reason, Scope: scope, By: principal, Via: ViaHTTP}
		if len(req.Arguments) > 0 && !bytes.Equal(req.Arguments, []byte("null")) {
			d.Arguments = req.Arguments
		}
		pending, err := m.Respond(r.Context(), Reply{SessionID: req.SessionID, ApprovalID: req.ApprovalID,
			CallID: req.CallID, Tool: req.Tool, ArgumentsDigest: req.ArgumentsDigest, Decision: d})
		switch {
		case errors.Is(err, ErrWrongSession):
			writeError(w, http.StatusForbidden, err.Error())
		case errors.Is(err, ErrMismatch):
			writeError(w, http.StatusConflict, err.Error())
		case errors.Is(err, ErrInvalidArguments), errors.Is(err, ErrInvalidScope):
			writeError(w, http.StatusBadRequest, err.Error())
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		case !pending:
			writeJSON(w, http.StatusOK, Response{Error: errStale})
		default:
			writeJSON(w, http.StatusOK, Response{Success: true})
		}
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

// decode reads r's JSON body into v (see httpjson.Decode); on failure it
// has answered and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return httpjson.Decode(w, r, v, MaxBodyBytes)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	httpjson.WriteError(w, status, msg)
}

func writeJSON(w http.ResponseWriter, status int, v Response) {
	httpjson.WriteJSON(w, status, v)
}
