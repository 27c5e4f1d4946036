package jsonapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/turn"
)

// Via is the audit's name for decisions and answers taken through the
// handler: approval.ViaHTTP.
const Via = approval.ViaHTTP

// Headers of GET {prefix}/history: where the history ends in the session's
// event log.
const (
	// HeaderSeq is the Seq of the last event of the session's log that the
	// history includes: the client opens the event stream after it.
	HeaderSeq = "X-Session-Seq"
	// HeaderRunning is "true" when a turn is in progress: the history ends
	// where it started, and the event stream brings the rest.
	HeaderRunning = "X-Session-Running"
)

// Options are what a host adds to the protocol. The zero value serves a
// working chat API: every hook is optional.
type Options struct {
	// Hello is added to the data of every event stream's hello event, a
	// JSON object (a struct or a map): what the host's page should know of
	// the server (its model, its limits...). Its fields must not be named
	// busy, turn, seq or replay.
	Hello any
	// Prepare is called with every chat message once its caller was
	// authorized and before its turn starts: it may refuse it (an *Error
	// says with which status; any other error is answered with 400), add
	// to the input (text, images of resources the body names) and return
	// the context the turn starts with (one that carries, say, the skills
	// it enables); the turn keeps that context's values. Nil starts the
	// turn with the message as it came.
	Prepare func(ctx context.Context, req ChatRequest, in *agent.Input) (context.Context, error)
	// Title titles a session that is not stored yet after its first
	// message, and the session is stored before its turn starts, so that
	// the session list shows it at once. Nil means CleanTitle; a Title that
	// returns "" stores nothing ahead (the turn stores the session,
	// untitled).
	Title func(message string) string
	// NewSessionID makes the id that POST {prefix}/sessions gives a caller:
	// an error wrapping ui.ErrUnauthenticated is answered with 401, another
	// with 403. Nil makes 16 random hex digits, which the request must then
	// be authorized for (ui.Config.Authorize): a host whose ids say whose
	// they are (such as a prefix of the owner's) makes them here.
	NewSessionID func(r *http.Request) (string, error)
	// Sessions says which stored sessions GET {prefix}/sessions lists for
	// the request: an error is answered as NewSessionID's. Nil lists those
	// the request is authorized for (ui.Config.Authorize). The list comes
	// from the Store's (memory.Store.Sessions).
	Sessions func(r *http.Request) (keep func(memory.Session) bool, err error)
	// Deleted is called after a session was deleted (POST
	// {prefix}/sessions/delete), for what the host keeps of it (an MCP
	// server's per-session instance).
	Deleted func(ctx context.Context, sessionID string)
	// KeepAlive is how often an idle event stream sends a comment, so that
	// proxies keep it open; zero means DefaultKeepAlive.
	KeepAlive time.Duration
}

// DefaultKeepAlive is the default of Options.KeepAlive.
const DefaultKeepAlive = 20 * time.Second

// Error is a request that a hook refuses: its HTTP status and the
// answer's error.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// ChatRequest is the body of POST {prefix}/chat as the handler reads it.
type ChatRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	// Body is the whole body, for the host's own fields (Options.Prepare).
	Body json.RawMessage `json:"-"`
	// Principal is who is asking, as ui.Config.Authorize said.
	Principal string `json:"-"`
}

// Handler serves the protocol (see the package documentation).
type Handler struct {
	b     turn.Backend
	o     Options
	store memory.Store
	hello []byte // the inside of Options.Hello's object, without braces
	mux   *http.ServeMux
}

// NewHandler returns the handler of the protocol on cfg's runner. It serves
// its routes at /chat, /events, /history, /tool-approve, /form-answer,
// /interrupt, /sessions, /sessions/rename and /sessions/delete: a host
// mounts it under a prefix of its own with http.StripPrefix,
//
//	mux.Handle("/api/", http.StripPrefix("/api", h))
//
// and may serve routes of its own beside it (a more specific pattern of
// the host's mux wins). It fails when cfg lacks its Runner or its
// Authorize, or when o.Hello is not a JSON object.
//
// The turns it starts do not depend on the request that started them (a
// page that reloads follows them on from its cursor), so
// ui.Config.KeepRunningOnDisconnect does not apply: POST /interrupt
// stops a turn.
func NewHandler(cfg ui.Config, o Options) (*Handler, error) {
	b, err := turn.NewBackend("jsonapi", Via, cfg)
	if err != nil {
		return nil, err
	}
	h := &Handler{b: b, o: o, store: b.Runner.Agent().Store()}
	if h.o.KeepAlive <= 0 {
		h.o.KeepAlive = DefaultKeepAlive
	}
	if h.o.Title == nil {
		h.o.Title = CleanTitle
	}
	if o.Hello != nil {
		data, err := json.Marshal(o.Hello)
		if err != nil {
			return nil, fmt.Errorf("jsonapi: Options.Hello: %w", err)
		}
		data = bytes.TrimSpace(data)
		if len(data) < 2 || data[0] != '{' {
			return nil, errors.New("jsonapi: Options.Hello is not a JSON object")
		}
		h.hello = bytes.TrimSpace(data[1 : len(data)-1])
	}
	m := http.NewServeMux()
	m.HandleFunc("/chat", h.chat)
	m.HandleFunc("GET /events", h.events)
	m.HandleFunc("GET /history", h.history)
	m.HandleFunc("/tool-approve", h.decide)
	m.HandleFunc("/form-answer", h.answer)
	m.HandleFunc("/interrupt", h.stop)
	m.HandleFunc("GET /sessions", h.listSessions)
	m.HandleFunc("/sessions", h.newSession)
	m.HandleFunc("/sessions/rename", h.rename)
	m.HandleFunc("/sessions/delete", h.deleteSession)
	h.mux = m
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// sessionIDRe is what a session id may look like.
var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckSessionID says why id is no session id the handler takes, nil when
// it is one: 1 to 64 ASCII letters, digits, '-' or '_' (the id goes into
// the Store, logs and URLs).
func CheckSessionID(id string) error {
	if id == "" {
		return errors.New("missing session_id")
	}
	if !sessionIDRe.MatchString(id) {
		return errors.New("session_id must be 1 to 64 letters, digits, '-' or '_'")
	}
	return nil
}

// authorized checks the session id and that r may act on it; on failure it
// answers (400, 401 or 403) and returns false.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request, sessionID string) (principal string, ok bool) {
	if err := CheckSessionID(sessionID); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return h.b.Authorize.Check(w, r, sessionID)
}

// chat starts a turn: POST /chat.
func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	body, ok := h.decode(w, r, &req)
	if !ok {
		return
	}
	principal, ok := h.authorized(w, r, req.SessionID)
	if !ok {
		return
	}
	if strings.TrimSpace(req.Message) == "" {
		writeError(w, http.StatusBadRequest, "missing message")
		return
	}
	req.Body, req.Principal = body, principal
	ctx := r.Context()
	in := agent.Input{SessionID: req.SessionID, Message: req.Message}
	if h.o.Prepare != nil {
		pctx, err := h.o.Prepare(ctx, req, &in)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				writeError(w, e.Status, e.Message)
			} else {
				writeError(w, http.StatusBadRequest, err.Error())
			}
			return
		}
		if pctx != nil {
			ctx = pctx
		}
	}
	// Stored and titled now, not by the run: the session list shows it
	// once this answer is read.
	h.nameSession(ctx, req.SessionID, req.Message)
	// Acknowledged once stored: a server killed after its 202 keeps the
	// message (a run that could not store it says why on the stream).
	_, err := h.b.Runner.Start(ctx, in)
	if e := turn.StartError(err); e != nil {
		if errors.Is(err, runner.ErrTooManyRuns) {
			w.Header().Set("Retry-After", "5")
		}
		writeError(w, e.Status, e.Msg)
		return
	}
	writeJSON(w, http.StatusAccepted, response{Success: true})
}

// response is the JSON answer of most routes: {"success":bool,"error":"..."}.
type response struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// SessionID is set by POST /sessions.
	SessionID string `json:"session_id,omitempty"`
}

// decode reads r's body, exactly one JSON value of at most MaxBodyBytes,
// into v, and returns the body. On failure it answers (405, 415, 413, 408
// or 400) and returns false.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed, use POST")
		return nil, false
	}
	if !httpjson.IsJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, "the request body must be JSON (Content-Type: application/json)")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.b.MaxBodyBytes))
	if err == nil {
		err = decodeBody(body, v)
	}
	if err == nil {
		return body, true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, "the request body did not arrive in time")
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty request body")
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
	}
	return nil, false
}

// decodeBody decodes body, exactly one JSON value, into v; io.EOF for an
// empty body.
func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, response{Error: msg})
}

// writeJSON answers v as JSON with status, marked so that no browser takes
// it for anything else nor keeps it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// busy reports whether a turn runs in the session, here or on another
// process.
func (h *Handler) busy(sessionID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running, err := h.b.Runner.Running(ctx, sessionID)
	return err == nil && running
}
