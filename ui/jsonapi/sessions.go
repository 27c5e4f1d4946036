package jsonapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/ui"
)

// MaxTitleLen bounds a session title, in characters.
const MaxTitleLen = 120

// SessionEntry is one session of GET {prefix}/sessions.
type SessionEntry struct {
	ID        string    `json:"id"`
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Busy is true while a run is active in the session.
	Busy bool `json:"busy,omitempty"`
}

// RenameRequest is the body of POST {prefix}/sessions/rename.
type RenameRequest struct {
	SessionID string `json:"session_id"`
	Title     string `json:"title"`
}

// CleanTitle puts a title on one line (runs of white space and control
// characters become one space), drops its Unicode format characters
// (category Cf: bidi overrides, zero-width spaces, which can make a name
// read as another), and cuts it to at most MaxTitleLen characters, the last
// an ellipsis. A clean title stays as it is. It is the default of
// Options.Title, and what POST {prefix}/sessions/rename stores.
func CleanTitle(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	words := strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	t := strings.Join(words, " ")
	if utf8.RuneCountInString(t) <= MaxTitleLen {
		return t
	}
	return strings.TrimSpace(string([]rune(t)[:MaxTitleLen-1])) + "…"
}

// nameSession stores a session that does not exist yet, titled after its
// first message. A session that exists keeps its title. It is best effort:
// a Store that fails here fails the run too, which says why.
func (h *Handler) nameSession(ctx context.Context, id, message string) {
	title := h.o.Title(message)
	if title == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := h.store.Session(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		return
	}
	h.store.CreateSession(ctx, memory.Session{ID: id, Title: title}) //nolint:errcheck // see above
}

// refuse answers a hook's refusal of a request: 401 for an error wrapping
// ui.ErrUnauthenticated, 403 otherwise.
func refuse(w http.ResponseWriter, err error) {
	if errors.Is(err, ui.ErrUnauthenticated) {
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	writeError(w, http.StatusForbidden, err.Error())
}

// listSessions answers GET /sessions.
func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request) {
	keep := func(s memory.Session) bool {
		_, err := h.b.Authorize(r, s.ID)
		return err == nil
	}
	if h.o.Sessions != nil {
		k, err := h.o.Sessions(r)
		if err != nil {
			refuse(w, err)
			return
		}
		keep = k
	}
	all, err := h.store.Sessions(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "listing the sessions: "+err.Error())
		return
	}
	out := make([]SessionEntry, 0, 16)
	for _, s := range all {
		if keep(s) {
			out = append(out, SessionEntry{ID: s.ID, Title: s.Title, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt})
		}
	}
	for i := range out {
		running, err := h.b.Runner.Running(r.Context(), out[i].ID)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "listing the sessions: "+err.Error())
			return
		}
		out[i].Busy = running
	}
	writeJSON(w, http.StatusOK, out)
}

// newSession answers POST /sessions.
func (h *Handler) newSession(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	var id string
	if h.o.NewSessionID != nil {
		var err error
		if id, err = h.o.NewSessionID(r); err != nil {
			refuse(w, err)
			return
		}
	} else {
		id = randomID()
		if _, ok := h.authorized(w, r, id); !ok {
			return
		}
	}
	writeJSON(w, http.StatusOK, response{Success: true, SessionID: id})
}

// rename answers POST /sessions/rename.
func (h *Handler) rename(w http.ResponseWriter, r *http.Request) {
	var req RenameRequest
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	if _, ok := h.authorized(w, r, req.SessionID); !ok {
		return
	}
	title := CleanTitle(req.Title)
	if title == "" {
		writeError(w, http.StatusBadRequest, "missing title: a session's title cannot be blank")
		return
	}
	if err := h.store.RenameSession(r.Context(), req.SessionID, title); err != nil {
		writeStoreError(w, "renaming the session", err)
		return
	}
	writeJSON(w, http.StatusOK, response{Success: true})
}

// deleteSession answers POST /sessions/delete.
func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if _, ok := h.decode(w, r, &req); !ok {
		return
	}
	if _, ok := h.authorized(w, r, req.SessionID); !ok {
		return
	}
	if h.busy(req.SessionID) {
		writeError(w, http.StatusConflict, "a run is active in this session: interrupt it before deleting the session")
		return
	}
	if _, err := h.store.Session(r.Context(), req.SessionID); err != nil {
		writeStoreError(w, "deleting the session", err)
		return
	}
	// The runner ends the session's event streams, here and on the other
	// processes, with session_deleted.
	if err := h.b.Runner.Delete(r.Context(), req.SessionID); err != nil {
		writeStoreError(w, "deleting the session", err)
		return
	}
	if h.o.Deleted != nil {
		h.o.Deleted(r.Context(), req.SessionID)
	}
	writeJSON(w, http.StatusOK, response{Success: true})
}

// writeStoreError answers a Store error: 404 for a session it does not
// have, 500 otherwise.
func writeStoreError(w http.ResponseWriter, doing string, err error) {
	if errors.Is(err, memory.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such session: it was never stored (nothing was sent in it yet) or it was deleted")
		return
	}
	writeError(w, http.StatusInternalServerError, doing+": "+err.Error())
}
