package interact

import (
	"errors"
	"net/http"
	"strings"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/httpjson"
)

// AnswerRequest is the JSON body of the handler of [Forms.AnswerHandler]:
//
//	{"session_id":"s1","form_id":"5f0c…","answers":{"when":"Friday","seat":"window","meals":["veg"]}}
type AnswerRequest struct {
	// SessionID is the session of the run (required).
	SessionID string `json:"session_id"`
	// FormID is the form id of the form_request (required).
	FormID string `json:"form_id"`
	// Answers are the answers by question id (required for a
	// form_request); see [Answer] for their JSON.
	Answers Answers `json:"answers,omitempty"`
	// Action answers an elicitation_request (instead of Answers): accept,
	// decline or cancel; Content is what the user entered, to accept a form:
	//
	//	{"session_id":"s1","form_id":"9a1b…","action":"accept","content":{"repo":"planround"}}
	Action  string         `json:"action,omitempty"`
	Content map[string]any `json:"content,omitempty"`
}

// errStale is the error text of an answer to a form that is not open.
const errStale = "form is not open (answered, timed out, cancelled, ended with its run, or lost in a server restart)"

// errNoAuthorize is the answer of a handler whose config has no Authorize.
const errNoAuthorize = "interact: the handler has no HandlerConfig.Authorize; set one that checks the caller, or approval.AllowAnyCaller for a single-user loopback tool"

// AnswerHandler returns the handler a host mounts at, say, POST
// /api/form-answer. It decodes an [AnswerRequest], asks cfg.Authorize
// whether the caller may act on the session (the same check as for the
// approval handlers: the session id in a body is no credential), gives the
// answers to [Forms.Answer] and answers with an approval.Response:
//
//	200 {"success":true}                   the answers were taken
//	200 {"success":false,"error":"..."}    the form was not open (a stale
//	                                       form: disable it)
//	500 {"success":false,"error":"..."}    the Store failed
//	400 {"success":false,"error":"..."}    malformed JSON, a missing field,
//	                                       answers that do not fit the
//	                                       questions, an elicitation's
//	                                       content that does not fit its
//	                                       schema (the form stays open)
//	401, 403 {"success":false,...}         refused by cfg.Authorize; 403 also
//	                                       when the form belongs to another
//	                                       session
//	500 {"success":false,...}              cfg has no Authorize
//	405, 408, 413, 415                     not POST; the body did not arrive
//	                                       before the server's read deadline;
//	                                       body over approval.MaxBodyBytes;
//	                                       not application/json
//
// cfg.AllowAlways means nothing here. Every answer is JSON. The handler sets
// no deadline of its own: give the http.Server a ReadTimeout. It is safe for
// concurrent use.
func (f *Forms) AnswerHandler(cfg approval.HandlerConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg.Authorize == nil {
			writeError(w, http.StatusInternalServerError, errNoAuthorize)
			return
		}
		var req AnswerRequest
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
		case req.FormID == "":
			writeError(w, http.StatusBadRequest, "missing form_id")
			return
		case req.Answers == nil && req.Action == "":
			writeError(w, http.StatusBadRequest, "missing answers")
			return
		}
		reply := FormReply{SessionID: req.SessionID, FormID: req.FormID, Answers: req.Answers, By: principal, Via: "http"}
		if req.Action != "" {
			reply.Elicitation = &ElicitationAnswer{Action: req.Action, Content: req.Content}
		}
		open, err := f.Answer(r.Context(), reply)
		switch {
		case errors.Is(err, ErrWrongSession):
			writeError(w, http.StatusForbidden, err.Error())
		case errors.Is(err, ErrInvalidAnswers):
			writeError(w, http.StatusBadRequest, userText(err))
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		case !open:
			writeJSON(w, http.StatusOK, approval.Response{Error: errStale})
		default:
			writeJSON(w, http.StatusOK, approval.Response{Success: true})
		}
	})
}

// decode reads r's JSON body into v (see httpjson.Decode); on failure it
// has answered and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return httpjson.Decode(w, r, v, approval.MaxBodyBytes)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	httpjson.WriteError(w, status, msg)
}

func writeJSON(w http.ResponseWriter, status int, v approval.Response) {
	httpjson.WriteJSON(w, status, v)
}

// userText is an answer's error as a person reads it: what does not fit,
// without the package's prefix or the "invalid answers" that the 400 says
// already.
func userText(err error) string {
	msg := strings.TrimPrefix(err.Error(), ErrInvalidAnswers.Error()+": ")
	return strings.TrimPrefix(msg, "interact: ")
}
