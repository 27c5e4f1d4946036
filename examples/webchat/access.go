package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/jsonapi"
)

// Who may do what.
//
// Each browser holds an owner secret: 256 random bits in an HttpOnly,
// SameSite=Strict cookie that the server sets with the page. A session id
// starts with the owner's tag, a hash of that secret, and every endpoint
// that names a session (chat, events, history, tool-approve, interrupt,
// rename, delete, export) checks that the tag is the one of the request's
// cookie; the session list and the API log (apilog.go) show the sessions
// with the request's tag, and their records, and an import gets a new id
// with it. So a session
// belongs to the browser that opened it, across server restarts, and the
// server keeps no list of owners: replicas (-postgres) share nothing for
// this check, each computes the same tag from the same cookie. Anyone who reaches the port can get a
// cookie of their own, which opens sessions of their own only; a server
// reachable by others also wants its token (Options.Token).

const (
	// ownerCookie holds the browser's owner secret (hex).
	ownerCookie = "planround_owner"
	// ownerSecretLen is the length of an owner secret in hex digits.
	ownerSecretLen = 64
	// ownerTagLen is the length of an owner tag in hex digits: 128 bits
	// of the secret's hash.
	ownerTagLen = 32
	// cookieMaxAge keeps the cookies as long as browsers allow (400 days),
	// so a browser finds its conversations again after a restart.
	cookieMaxAge = 400 * 24 * time.Hour
)

var (
	errNoOwner       = fmt.Errorf("%w: no owner cookie: open the page first", ui.ErrUnauthenticated)
	errForeignOwner  = errors.New("this session belongs to another browser")
	errTokenRequired = errors.New("this server wants its access token: open the address it printed (with ?token=), or send Authorization: Bearer <token>")
)

// ownerTag returns the owner tag of r's browser, or false when r has no
// valid owner cookie.
func ownerTag(r *http.Request) (string, bool) {
	c, err := r.Cookie(ownerCookie)
	if err != nil || !isHex(c.Value, ownerSecretLen) {
		return "", false
	}
	sum := sha256.Sum256([]byte("planround webchat owner\x00" + c.Value))
	return hex.EncodeToString(sum[:])[:ownerTagLen], true
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// giveOwnerCookie sets a new owner cookie unless r has a valid one.
func giveOwnerCookie(w http.ResponseWriter, r *http.Request) {
	if _, ok := ownerTag(r); ok {
		return
	}
	var b [ownerSecretLen / 2]byte
	rand.Read(b[:])
	http.SetCookie(w, &http.Cookie{
		Name:     ownerCookie,
		Value:    hex.EncodeToString(b[:]),
		Path:     "/",
		MaxAge:   int(cookieMaxAge.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
}

// sessionOwner returns the owner tag a session id starts with.
func sessionOwner(sessionID string) string {
	tag, _, ok := strings.Cut(sessionID, "-")
	if !ok || len(tag) != ownerTagLen {
		return ""
	}
	return tag
}

// authorize reports whether r may act on the session: a nil error when
// r's owner cookie is the session's owner, with the principal the audit
// records for that browser (see principalOf). It is the check of every
// endpoint that names a session: the ui.AuthorizeFunc of the chat's
// protocol (ui/jsonapi, see Server.routes) and of the web chat's own
// endpoints (checkSession).
func authorize(r *http.Request, sessionID string) (principal string, err error) {
	tag, ok := ownerTag(r)
	if !ok {
		return "", errNoOwner
	}
	if sessionOwner(sessionID) != tag {
		return "", errForeignOwner
	}
	return principalOf(tag), nil
}

// principalLen is how many hex digits of the owner tag a principal keeps:
// 64 bits, enough to tell the browsers of one server apart in the audit.
const principalLen = 16

// principalOf returns the principal of the browser whose owner tag is tag,
// as the audit records its decisions: "browser:" and the tag's first
// principalLen hex digits. It is stable (the same cookie gives the same
// principal on every replica and after restarts) and tells nothing of the
// cookie beyond the tag, which the browser's session ids show anyway.
func principalOf(tag string) string {
	return "browser:" + tag[:min(len(tag), principalLen)]
}

// checkSession validates the session id r names and checks that r may act
// on it. On failure it writes the answer (400, 401 or 403) and returns
// false.
func checkSession(w http.ResponseWriter, r *http.Request, sessionID string) bool {
	if err := jsonapi.CheckSessionID(sessionID); err != nil {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: err.Error()})
		return false
	}
	switch _, err := authorize(r, sessionID); {
	case errors.Is(err, ui.ErrUnauthenticated):
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: err.Error()})
		return false
	case err != nil:
		writeJSON(w, http.StatusForbidden, apiResponse{Error: err.Error()})
		return false
	}
	return true
}

// newSessionID returns a new session id of the browser with owner tag
// tag: the tag, "-", and 64 random bits in hex.
func newSessionID(tag string) string {
	var b [8]byte
	rand.Read(b[:])
	return tag + "-" + hex.EncodeToString(b[:])
}

// requireToken lets through only the requests that carry token: in the
// cookie that a visit to any page with ?token=<token> sets (the visit is
// then redirected to the address without it), or in an Authorization:
// Bearer header.
func requireToken(token string, h http.Handler) http.Handler {
	sum := sha256.Sum256([]byte(token))
	// A name of its own per token: servers on other ports of the same
	// host see the cookie too, and must not overwrite each other's.
	name := "planround_token_" + hex.EncodeToString(sum[:4])
	same := func(got, want string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if t := q.Get("token"); t != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if !same(t, token) {
				writeJSON(w, http.StatusUnauthorized, apiResponse{Error: "wrong access token"})
				return
			}
			http.SetCookie(w, &http.Cookie{
				Name: name, Value: token, Path: "/",
				MaxAge: int(cookieMaxAge.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode,
			})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(name); err == nil && same(c.Value, token) {
			h.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/oauth/callback" && r.Method == http.MethodGet {
			// An authorization server's redirect, cross-site, comes without
			// the SameSite cookie: its page only shows a button whose POST,
			// from this site, carries the cookie and is checked.
			h.ServeHTTP(w, r)
			return
		}
		if same(r.Header.Get("Authorization"), "Bearer "+token) {
			h.ServeHTTP(w, r)
			return
		}
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: errTokenRequired.Error()})
	})
}

// bodyDeadline gives a request with a body d to arrive, so that a client
// that sends it a byte at a time cannot hold a connection and a handler
// forever: reading past the deadline fails, and the handler answers 408.
func bodyDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			// Not every ResponseWriter can (a test recorder): then the
			// http.Server's own timeouts are all there is.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}

// isJSON reports whether contentType says application/json (a charset
// parameter is fine).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
