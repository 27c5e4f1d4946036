package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/ui/jsonapi"
)

// Export and import of a browser's conversations as the Store keeps them.
// The list, a new id, rename and delete are ui/jsonapi's routes, with the
// web chat's NewSessionID and Sessions (see NewServer).
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

// Defaults of the Options that bound the imports in flight: an import holds
// its decoded document (about the size of its body) until it is stored, so
// these bound the memory that imports take, in the whole server and per
// browser.
const (
	DefaultMaxImports             = 8
	DefaultMaxImportsPerOwner     = 2
	DefaultMaxImportBytes         = 4 * DefaultMaxImportSize
	DefaultMaxImportBytesPerOwner = DefaultMaxImportSize
)

// importLoad is what imports in flight hold, or may hold: how many and
// the bytes of their bodies.
type importLoad struct {
	n     int
	bytes int64
}

// importedSuffix ends the title of an imported copy.
const importedSuffix = " (imported)"

// importedTitle is the title of an imported copy of a session titled t:
// t cleaned (see cleanTitle) and marked, within jsonapi.MaxTitleLen; an export of a
// copy is not marked twice.
func importedTitle(t string) string {
	t = strings.TrimSuffix(jsonapi.CleanTitle(t), importedSuffix)
	if t == "" {
		return strings.TrimSpace(importedSuffix)
	}
	if max := jsonapi.MaxTitleLen - utf8.RuneCountInString(importedSuffix); utf8.RuneCountInString(t) > max {
		t = strings.TrimSpace(string([]rune(t)[:max-1])) + "…"
	}
	return t + importedSuffix
}

// dropFormat removes the Unicode format characters (category Cf) of a name
// the page shows: bidi overrides and isolates (U+202A..U+202E,
// U+2066..U+2069), zero-width spaces and joiners, byte order marks. They
// are invisible, and they can make a name read as another ("\u202Egnp.exe"
// shows as "exe.png"); a name needs none of them.
func dropFormat(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
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
// body is decoded as it arrives (memory.ImportFrom), and the whole
// document is checked before anything is stored.
//
// Only what the page shows is imported (see importShown): a file's hook
// injections, system messages and summaries, which the model would read
// in every turn and the page never shows, are left out; the answer says
// how many.
//
// Imports in flight are bounded, in number and in the bytes of their
// bodies (the Content-Length, or MaxImportSize without one), per browser
// (429) and in the whole server (503); an import counts from before its
// body is read until its answer, whether it succeeded or not.
//
//	200 {"success":true,"session_id":"...","title":"...",
//	     "left_out_messages":n?,"left_out_summaries":n?}
//	400 not a session export (the error says what is wrong)
//	401 no owner cookie
//	408 the body did not arrive in time
//	413 larger than MaxImportSize
//	415 not Content-Type: application/json
//	429 this browser has MaxImportsPerOwner imports in flight, or would
//	    hold more than MaxImportBytesPerOwner
//	503 the server has MaxImports imports in flight, or would hold more
//	    than MaxImportBytes
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
	size := r.ContentLength
	if size > s.maxImport {
		writeJSON(w, http.StatusRequestEntityTooLarge, apiResponse{Error: fmt.Sprintf("the export is larger than %d bytes, the most this server imports", s.maxImport)})
		return
	}
	if size < 0 {
		size = s.maxImport // unknown: it may be as large as that
	}
	release, ok := s.reserveImport(w, tag, size)
	if !ok {
		return
	}
	defer release()

	body := &bodyReader{r: bufio.NewReader(http.MaxBytesReader(w, r.Body, s.maxImport))}
	if body.empty() {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "empty request body: send a session export"})
		return
	}
	var (
		sess memory.Session
		left leftOut
		err  error
	)
	if body.err == nil {
		sess, left, err = importShown(r.Context(), s.store, body, newSessionID(tag))
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil && body.err == nil:
	case errors.As(body.err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, apiResponse{Error: fmt.Sprintf("the export is larger than %d bytes, the most this server imports", tooBig.Limit)})
		return
	case errors.Is(body.err, os.ErrDeadlineExceeded):
		writeJSON(w, http.StatusRequestTimeout, apiResponse{Error: "the export did not arrive in time"})
		return
	case body.err != nil:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "reading the export: " + body.err.Error()})
		return
	case errors.Is(err, memory.ErrInvalidExport):
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "not a session export: " + err.Error()})
		return
	default:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "importing the session: " + err.Error()})
		return
	}
	// A title on one line and of a bounded length, like a rename's, that
	// says it is a copy: the list shows the copy beside its original.
	if t := importedTitle(sess.Title); t != sess.Title {
		if err := s.store.RenameSession(r.Context(), sess.ID, t); err == nil {
			sess.Title = t
		}
	}
	writeJSONValue(w, http.StatusOK, struct {
		apiResponse
		Title string `json:"title,omitempty"`
		leftOut
	}{apiResponse{Success: true, SessionID: sess.ID}, sess.Title, left})
}

// leftOut counts what an import left out (see importShown).
type leftOut struct {
	Messages  int `json:"left_out_messages,omitempty"`
	Summaries int `json:"left_out_summaries,omitempty"`
}

// importShown adds the session in the export read from r to st under
// newID, as memory.ImportFrom does, with only what the page shows: a person
// must be able to see everything the model will read of an imported file,
// and a file is anyone's to write. So it leaves out
//
//   - hook injections (memory.Message.Hook): sent to the model in every
//     turn, never shown; the server's own hooks inject theirs again;
//   - system messages: the page shows none, and the agent stores none but
//     a hook's;
//   - summaries: the model reads a session's summaries (with SummarizeAt)
//     in place of its archived messages, and the page shows the messages,
//     not the summaries. The messages they archived come back active, so
//     the model reads what the page shows; a long conversation is
//     summarised again, by this server's model.
//
// The document is checked whole (by memory.ImportFrom, into a MemStore of
// its own) before anything is written to st; a failure while writing
// deletes the session again.
func importShown(ctx context.Context, st memory.Store, r io.Reader, newID string) (memory.Session, leftOut, error) {
	var tmp memory.MemStore
	doc, err := memory.ImportFrom(ctx, &tmp, r, newID)
	if err != nil {
		return memory.Session{}, leftOut{}, err
	}
	msgs, err := tmp.Messages(ctx, doc.ID, true)
	if err != nil {
		return memory.Session{}, leftOut{}, err
	}
	sums, err := tmp.Summaries(ctx, doc.ID)
	if err != nil {
		return memory.Session{}, leftOut{}, err
	}
	left := leftOut{Summaries: len(sums)}
	kept := msgs[:0]
	for _, m := range msgs {
		if m.Hook || m.Role == memory.RoleSystem {
			left.Messages++
			continue
		}
		m.ID, m.SummaryID = 0, 0
		kept = append(kept, m)
	}
	if err := tmp.DeleteSession(ctx, doc.ID); err != nil {
		return memory.Session{}, leftOut{}, err
	}
	sess, err := st.CreateSession(ctx, memory.Session{ID: doc.ID, Title: doc.Title, CreatedAt: doc.CreatedAt, UpdatedAt: doc.CreatedAt})
	if err != nil {
		return memory.Session{}, leftOut{}, fmt.Errorf("memory: import: %w", err)
	}
	if len(kept) > 0 {
		if _, err := st.Append(ctx, sess.ID, kept...); err != nil {
			if derr := st.DeleteSession(context.WithoutCancel(ctx), sess.ID); derr != nil {
				err = errors.Join(err, fmt.Errorf("clean-up failed: %w", derr))
			}
			return memory.Session{}, leftOut{}, fmt.Errorf("importing %q: %w", sess.ID, err)
		}
	}
	sess, err = st.Session(ctx, sess.ID)
	return sess, left, err
}

// reserveImport counts an import of size bytes of the browser with owner
// tag as in flight, and returns the function that ends it. When the import
// would take the browser or the server beyond its limits it counts
// nothing, answers 429 or 503, and returns false.
func (s *Server) reserveImport(w http.ResponseWriter, owner string, size int64) (release func(), ok bool) {
	s.mu.Lock()
	mine := s.ownerImports[owner]
	switch {
	case mine.n >= s.maxImportsPerOwner.n:
		s.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser already has %d imports in flight: wait for one to end", mine.n)})
		return nil, false
	case mine.bytes+size > s.maxImportsPerOwner.bytes:
		s.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser's imports in flight hold %d bytes, and this one's %d would take them beyond %d: wait for one to end", mine.bytes, size, s.maxImportsPerOwner.bytes)})
		return nil, false
	case s.imports.n >= s.maxImports.n:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: fmt.Sprintf("the server is busy (%d imports in flight): try again shortly", s.imports.n)})
		return nil, false
	case s.imports.bytes+size > s.maxImports.bytes:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: fmt.Sprintf("the server is busy (imports of %d bytes in flight, at most %d): try again shortly", s.imports.bytes, s.maxImports.bytes)})
		return nil, false
	}
	s.imports.n++
	s.imports.bytes += size
	s.ownerImports[owner] = importLoad{mine.n + 1, mine.bytes + size}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.imports.n--
		s.imports.bytes -= size
		mine := s.ownerImports[owner]
		if mine.n--; mine.n == 0 {
			delete(s.ownerImports, owner)
		} else {
			mine.bytes -= size
			s.ownerImports[owner] = mine
		}
	}, true
}

// bodyReader reads a request body and keeps the first error of its
// reading (other than io.EOF), which memory.ImportFrom returns wrapped
// among others: the answer tells a body too large or too slow from a
// document that is not an export.
type bodyReader struct {
	r   *bufio.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// empty reports whether the body holds nothing but white space, reading
// it up to the first other byte; a body that failed to read is not empty
// (b.err says why).
func (b *bodyReader) empty() bool {
	for {
		c, err := b.r.ReadByte()
		if err == io.EOF {
			return true
		}
		if err != nil {
			b.err = err
			return false
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			b.r.UnreadByte() //nolint:errcheck // the byte just read
			return false
		}
	}
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
