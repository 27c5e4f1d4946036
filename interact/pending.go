package interact

import (
	"errors"
	"time"
)

// DefaultTimeout is how long a form of a runner (package runner) waits for
// its answers when its Config.FormTimeout is zero.
const DefaultTimeout = 10 * time.Minute

// Errors of the forms a runner keeps: of its Answer, and of the waits of
// ask_user_question.
var (
	// ErrWrongSession is returned for an answer to a form id that belongs
	// to another session. The form stays open.
	ErrWrongSession = errors.New("interact: form id belongs to another session")
	// ErrNoSession is wrapped by the error of an ask_user_question call of
	// a run without a session id: forms are answered per session, so a
	// form nobody can answer is not shown.
	ErrNoSession = errors.New("interact: the run has no session id")
	// ErrTimeout is wrapped by the error of an ask_user_question call whose
	// form nobody answered within the timeout.
	ErrTimeout = errors.New("interact: the form was not answered in time")
	// ErrCancelled is wrapped by the error of an ask_user_question call
	// whose form was cancelled (runner.Runner.Stop, or a new user message
	// that closed it).
	ErrCancelled = errors.New("interact: the form was cancelled")
)

// PendingForm is a form that waits for its answers, as a runner lists it
// (runner.Runner.Pending). Its JSON is the form request's with the fields
// below added.
type PendingForm struct {
	FormRequest
	// SessionID is the run's session.
	SessionID string `json:"session_id"`
	// CallID is the id of the call that asked: ask_user_question's, or
	// the MCP tool's whose server asked.
	CallID string `json:"call_id"`
	// Elicitation is the form of an MCP server (an elicitation_request),
	// whose Type is then [TypeElicitationRequest] and which has no
	// questions.
	Elicitation *ElicitationRequest `json:"elicitation,omitempty"`
	// Created is when the form was registered.
	Created time.Time `json:"created"`
}

// FormReply is a person's answer to one form, as the handlers of package ui
// carry it to a runner (runner.Runner.Answer, whose runner.FormReply has
// the same fields).
type FormReply struct {
	SessionID string
	FormID    string
	Answers   Answers
	// Elicitation answers a form of an MCP server
	// (an elicitation_request) instead of Answers.
	Elicitation *ElicitationAnswer
	// Cancel dismisses the form instead of answering it (the person moved
	// on): its call ends with an error wrapping [ErrCancelled], which the
	// model reads, as for a cancelled session (an elicitation is answered
	// [ActionCancel]).
	Cancel bool
	// By is who answered (the principal the host's authentication knows)
	// and Via through what ("http", "terminal"); kept with the answer.
	By, Via string
}
