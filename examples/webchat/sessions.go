package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/planround/planround/memory"
)

// The session list: a browser's conversations as the Store keeps them.
//
// A browser sees, renames, deletes and exports only its own sessions (their
// ids begin with its owner tag, see access.go), and an import always gets a
// new id of the importing browser, whatever id the document names. The
// Store lists the sessions of every browser: the list is that list filtered
// by the tag, which is fine for a demo's store; a server with many users
// would want a store indexed by owner.

// DefaultMaxImportSize is the default of Options.MaxImportSize: room for an
// exported conversation with a few images (their bytes are base64 in the
// document).
const DefaultMaxImportSize = 32 << 20

// maxTitleLen bounds a session title, in characters.
const maxTitleLen = 120

// sessionEntry is one session of GET /api/sessions.
type sessionEntry struct {
	ID        string    `json:"id"`
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Busy is true while a run is active in the session.
	Busy bool `json:"busy,omitempty"`
}

// handleListSessions answers GET /api/sessions with the request's
// browser's stored sessions, most recently updated first. A session the
// page opened but never sent to is not stored yet, so not listed.
//
//	200 [{id, title?, created_at, updated_at, busy?}]
//	401 no owner cookie
func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	tag, ok := ownerTag(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: errNoOwner.Error()})
		return
	}
	all, err := s.store.Sessions(r.Context())
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "listing the sessions: " + err.Error()})
		return
	}
	out := make([]sessionEntry, 0, 16)
	for _, ss := range all {
		if sessionOwner(ss.ID) != tag {
			continue
		}
		out = append(out, sessionEntry{ID: ss.ID, Title: ss.Title, CreatedAt: ss.CreatedAt, UpdatedAt: ss.UpdatedAt})
	}
	for i := range out {
		running, err := s.runner.Running(r.Context(), out[i].ID)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "listing the sessions: " + err.Error()})
			return
		}
		out[i].Busy = running
	}
	writeJSONValue(w, http.StatusOK, out)
}

// titleFor makes a session title of a first message: its words on one
// line, cut to maxTitleLen characters.
func titleFor(message string) string { return cleanTitle(message) }

// cleanTitle puts a title on one line (runs of white space and control
// characters become one space) and cuts it to at most maxTitleLen
// characters, the last an ellipsis. A clean title stays as it is.
func cleanTitle(s string) string {
	words := strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	t := strings.Join(words, " ")
	if utf8.RuneCountInString(t) <= maxTitleLen {
		return t
	}
	return strings.TrimSpace(string([]rune(t)[:maxTitleLen-1])) + "…"
}

// nameSession stores a session that does not exist yet, titled after its
// first message, so that the list shows it as soon as its first run
// starts. A session that exists keeps its title. It is best effort: a
// Store that fails here fails the run too, which says why.
func (s *Server) nameSession(ctx context.Context, id, message string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.store.Session(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		return
	}
	s.store.CreateSession(ctx, memory.Session{ID: id, Title: titleFor(message)}) //nolint:errcheck // see above
}

// renameRequest is the body of POST /api/sessions/rename.
type renameRequest struct {
	SessionID string `json:"session_id"`
	Title     string `json:"title"`
}

// handleRename renames a stored session: POST /api/sessions/rename
// {session_id, title}. The title is put on one line and cut to 120
// characters.
//
//	200 {"success":true}
//	400 malformed JSON, an invalid session id, a blank title
//	401, 403 no owner cookie; the session is another browser's
//	404 no such stored session
func (s *Server) handleRename(w http.ResponseWriter, r *http.Request) {
	var req renameRequest
	if !decodeJSON(w, r, &req) || !checkSession(w, r, req.SessionID) {
		return
	}
	title := cleanTitle(req.Title)
	if title == "" {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing title: a session's title cannot be blank"})
		return
	}
	if err := s.store.RenameSession(r.Context(), req.SessionID, title); err != nil {
		writeStoreError(w, "renaming the session", err)
		return
	}
	writeJSON(w, http.StatusOK, apiResponse{Success: true})
}

// deleteRequest is the body of POST /api/sessions/delete.
type deleteRequest struct {
	SessionID string `json:"session_id"`
}

// handleDelete deletes a stored session with its messages: POST
// /api/sessions/delete {session_id}. The session's open event streams get a
// session_deleted event (another tab of the browser may show it), and its
// per_conversation MCP servers end.
//
//	200 {"success":true}
//	400 malformed JSON, an invalid session id
//	401, 403 no owner cookie; the session is another browser's
//	404 no such stored session
//	409 a run is active in the session: interrupt it first
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	var req deleteRequest
	if !decodeJSON(w, r, &req) || !checkSession(w, r, req.SessionID) {
		return
	}
	if s.busy(req.SessionID) {
		writeJSON(w, http.StatusConflict, apiResponse{Error: "a run is active in this session: interrupt it before deleting the session"})
		return
	}
	if _, err := s.store.Session(r.Context(), req.SessionID); err != nil {
		writeStoreError(w, "deleting the session", err)
		return
	}
	// The runner ends the session's event streams, here and on the other
	// replicas, with session_deleted.
	if err := s.runner.Delete(r.Context(), req.SessionID); err != nil {
		writeStoreError(w, "deleting the session", err)
		return
	}
	s.forms.CancelSession(req.SessionID)
	if s.mcp != nil {
		s.mcp.CloseConversation(req.SessionID)
	}
	writeJSON(w, http.StatusOK, apiResponse{Success: true})
}

// handleExport answers GET /api/sessions/export?session_id=... with the
// session as a memory.Export document (archived messages, summaries and
// images included), as a download named after the session.
//
//	200 the document (Content-Disposition: attachment)
//	400 an invalid session id
//	401, 403 no owner cookie; the session is another browser's
//	404 no such stored session
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	data, err := memory.Export(r.Context(), s.store, id)
	if err != nil {
		writeStoreError(w, "exporting the session", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", `attachment; filename="planround-`+id+`.json"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(data) //nolint:errcheck // the client went away
}

// handleImport adds the session in the body, a document of GET
// /api/sessions/export (memory.Export), under a new session id of the
// request's browser: POST /api/sessions/import with the document as a JSON
// body of at most Options.MaxImportSize bytes. The id the document names
// is ignored, so an import never reaches another browser's session. The
// whole document is checked before anything is stored.
//
//	200 {"success":true,"session_id":"...","title":"..."}
//	400 not a session export (the error says what is wrong)
//	401 no owner cookie
//	408 the body did not arrive in time
//	413 larger than MaxImportSize
//	415 not Content-Type: application/json
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, apiResponse{Error: "method " + r.Method + " not allowed, use POST"})
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		writeJSON(w, http.StatusUnsupportedMediaType, apiResponse{Error: "the request body must be a session export (Content-Type: application/json)"})
		return
	}
	tag, ok := ownerTag(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: errNoOwner.Error()})
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxImport))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, apiResponse{Error: fmt.Sprintf("the export is larger than %d bytes, the most this server imports", tooBig.Limit)})
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeJSON(w, http.StatusRequestTimeout, apiResponse{Error: "the export did not arrive in time"})
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "reading the export: " + err.Error()})
		return
	case len(strings.TrimSpace(string(data))) == 0:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "empty request body: send a session export"})
		return
	}
	sess, err := memory.ImportAs(r.Context(), s.store, data, newSessionID(tag))
	switch {
	case errors.Is(err, memory.ErrInvalidExport):
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "not a session export: " + err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "importing the session: " + err.Error()})
		return
	}
	// A title on one line and of a bounded length, like a rename's.
	if t := cleanTitle(sess.Title); t != sess.Title {
		if err := s.store.RenameSession(r.Context(), sess.ID, t); err == nil {
			sess.Title = t
		}
	}
	writeJSONValue(w, http.StatusOK, struct {
		apiResponse
		Title string `json:"title,omitempty"`
	}{apiResponse{Success: true, SessionID: sess.ID}, sess.Title})
}

// writeStoreError answers a Store error: 404 for a session it does not
// have, 500 otherwise.
func writeStoreError(w http.ResponseWriter, doing string, err error) {
	if errors.Is(err, memory.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, apiResponse{Error: "no such session: it was never stored (nothing was sent in it yet) or it was deleted"})
		return
	}
	writeJSON(w, http.StatusInternalServerError, apiResponse{Error: doing + ": " + err.Error()})
}
