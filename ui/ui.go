// Package ui holds what the front-end protocol handlers (ui/aisdk, ui/agui)
// share: the [Config] a host gives them (the runner, who is asking, what a
// disconnect does, how large a request may be) and the authorization
// vocabulary ([AuthorizeFunc], [ErrUnauthenticated], [AllowAnyCaller]).
//
// A handler acts on a session only for a caller that may: the session id in
// a request is no credential, and nobody may decide, answer or stop for
// another person's session. Authorize says who is asking (the principal the
// audit records with every decision) and whether that caller may act on the
// session a request names:
//
//	h, err := aisdk.NewHandler(ui.Config{Runner: r, Authorize: owner})
//
// A host's own handler that acts on a session checks the caller the same
// way with [AuthorizeFunc.Check].
package ui

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/runner"
)

// DefaultMaxBodyBytes bounds a request's body when [Config.MaxBodyBytes]
// is zero: a chat's messages may come whole with every request.
const DefaultMaxBodyBytes = 8 << 20

// Config configures a protocol handler (aisdk.NewHandler, agui.NewHandler).
// Runner and Authorize are required.
type Config struct {
	// Runner runs the turns, and takes the decisions on tool approvals and
	// the answers to forms the client sends (runner.Runner.Decide,
	// Answer) and its stops (runner.Runner.Stop).
	Runner *runner.Runner
	// Authorize is called with every request and the session it names (a
	// chat id, a thread id), after the body was decoded and before the
	// handler acts (see [AuthorizeFunc]). Required: a host that truly lets
	// every caller act on every session says so with [AllowAnyCaller].
	Authorize AuthorizeFunc
	// KeepRunningOnDisconnect keeps a turn running when the client that
	// follows it goes away, for a page that reconnects: then only a stop
	// (the protocol's own, or runner.Runner.Stop) stops it. By default a
	// client that goes away while the turn runs stops it, as the
	// protocols' stop buttons (useChat's stop(), AG-UI's abortRun) expect.
	// A turn that waits for a person is never stopped this way.
	KeepRunningOnDisconnect bool
	// MaxBodyBytes bounds a request's body (DefaultMaxBodyBytes when
	// zero); a larger one is answered with 413 Request Entity Too Large.
	MaxBodyBytes int64
	// Logger receives what goes wrong outside a request's answer; nil
	// discards it.
	Logger *slog.Logger
}

// AuthorizeFunc says who is asking and whether that caller may act on a
// session. It returns the principal (a user name or id as the host's
// authentication knows it, which the audit records with every decision)
// and a nil error when the caller may act on sessionID, for example when
// the request's cookie or token belongs to the session's owner. An error
// wrapping [ErrUnauthenticated] is answered with 401, any other error with
// 403; the error's text is the answer's error. It must be safe for
// concurrent use.
type AuthorizeFunc func(r *http.Request, sessionID string) (principal string, err error)

// ErrUnauthenticated is what an [AuthorizeFunc] wraps to say that the
// request carries no valid credential: the handler answers 401 instead of
// 403.
var ErrUnauthenticated = errors.New("ui: not authenticated")

// AllowAnyCaller is an [AuthorizeFunc] that lets every request act on the
// session it names. It is only for a single-user tool whose handlers nobody
// but its user can reach (a server on the loopback interface of a personal
// machine): anyone who can send a request can then approve, answer or stop
// any session's tool calls. The principal it returns is [AnyCaller].
func AllowAnyCaller(*http.Request, string) (string, error) { return AnyCaller, nil }

// AnyCaller is the principal [AllowAnyCaller] returns.
const AnyCaller = "any-caller"

// errNoAuthorize is the answer of a check without an AuthorizeFunc.
const errNoAuthorize = "ui: no Authorize is set; set one that checks the caller, or ui.AllowAnyCaller for a single-user loopback tool"

// Check runs f for a request that acts on sessionID, and answers the
// request when the handler must not go on: 500 Internal Server Error when f
// is nil, 401 Unauthorized for an error wrapping [ErrUnauthenticated], 403
// Forbidden for any other error (the error's text is the answer's error,
// as JSON {"error"}). It reports whether the handler may act, and who is
// asking (the principal f returned; "unknown" when it returned none).
func (f AuthorizeFunc) Check(w http.ResponseWriter, r *http.Request, sessionID string) (principal string, ok bool) {
	if f == nil {
		httpjson.WriteError(w, http.StatusInternalServerError, errNoAuthorize)
		return "", false
	}
	principal, err := f(r, sessionID)
	switch {
	case err == nil:
		if principal == "" {
			principal = "unknown"
		}
		return principal, true
	case errors.Is(err, ErrUnauthenticated):
		httpjson.WriteError(w, http.StatusUnauthorized, err.Error())
	default:
		httpjson.WriteError(w, http.StatusForbidden, err.Error())
	}
	return "", false
}
