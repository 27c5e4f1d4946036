package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/planround/planround/memory"
)

// The API log viewer: every model call of a browser's sessions, as the
// Store's API log (memory.APILog, agent.Config.APILog) recorded it.
//
// The records are owned like the sessions they were made for: a browser
// lists the records of its own stored sessions only (their ids are passed
// to the log as the query's SessionIDs, never an empty list, which would
// select every browser's), reads one in full only when its session id
// starts with its owner tag (another browser's record answers 404, as a
// record that does not exist does), and deletes its own. Deleting a
// session deletes its records too. The log never holds the API key (a
// header, not part of the body recorded) nor the secrets of the MCP
// servers' configuration (they reach the servers, never the model).

// APILogMode says what the web chat's API log keeps of each model call
// (Options.APILog, -api-log).
type APILogMode string

// The modes of the API log.
const (
	// APILogFull keeps every call with its request and reply (the zero
	// value means it too).
	APILogFull APILogMode = "full"
	// APILogMetadata keeps the metadata only: session, round, purpose,
	// model, usage, status, error, timings.
	APILogMetadata APILogMode = "metadata"
	// APILogOff keeps nothing, and the log's endpoints answer 404.
	APILogOff APILogMode = "off"
)

// parseAPILogMode reads -api-log.
func parseAPILogMode(s string) (APILogMode, error) {
	switch m := APILogMode(s); m {
	case APILogFull, APILogMetadata, APILogOff:
		return m, nil
	}
	return "", fmt.Errorf("-api-log %q: want full, metadata or off", s)
}

// Bounds of GET /api/apilog.
const (
	// defaultAPILogList is how many records the list gives without limit.
	defaultAPILogList = 200
	// maxAPILogList is the largest limit the list accepts.
	maxAPILogList = 1000
)

var errNoAPILog = errors.New("the API log is off (-api-log off, or a store without one)")

// errNoAPICall is the answer for a record that does not exist and for one
// of another browser: the two are not told apart.
var errNoAPICall = errors.New("no such record: it was deleted, dropped by the log's bounds, or never existed")

// apiLogResponse is the answer of GET /api/apilog.
type apiLogResponse struct {
	// Mode is the log's mode: full or metadata.
	Mode APILogMode `json:"mode"`
	// Calls are the records, newest first, without their request and
	// reply (GET /api/apilog/call gives them).
	Calls []memory.APICall `json:"calls"`
	// More is true when there are more records than the limit.
	More bool `json:"more,omitempty"`
	// Sessions are the browser's stored sessions, most recent first, for
	// the page's filter and to name a record's session.
	Sessions []apiLogSession `json:"sessions"`
}

// apiLogSession is a session of an apiLogResponse.
type apiLogSession struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// ownedSessions returns the stored sessions of the browser with owner tag
// tag, as the Store lists them.
func (s *Server) ownedSessions(ctx context.Context, tag string) ([]memory.Session, error) {
	all, err := s.store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var out []memory.Session
	for _, ss := range all {
		if sessionOwner(ss.ID) == tag {
			out = append(out, ss)
		}
	}
	return out, nil
}

// apiLogOwner returns the owner tag of the request's browser, or answers
// 401 without one and 404 when the API log is off.
func (s *Server) apiLogOwner(w http.ResponseWriter, r *http.Request) (string, bool) {
	tag, ok := ownerTag(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: errNoOwner.Error()})
		return "", false
	}
	if s.apiLog == nil {
		writeJSON(w, http.StatusNotFound, apiResponse{Error: errNoAPILog.Error()})
		return "", false
	}
	return tag, true
}

// handleAPILog answers GET /api/apilog[?session_id=][&limit=] with the
// model calls of the browser's sessions (of the one named), newest first,
// metadata only.
//
//	200 apiLogResponse
//	400 an invalid session id or limit
//	401, 403 no owner cookie; the session named is another browser's
//	404 the API log is off
func (s *Server) handleAPILog(w http.ResponseWriter, r *http.Request) {
	tag, ok := s.apiLogOwner(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := defaultAPILogList
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAPILogList {
			writeJSON(w, http.StatusBadRequest, apiResponse{Error: fmt.Sprintf("limit must be a number from 1 to %d", maxAPILogList)})
			return
		}
		limit = n
	}
	filter := q.Get("session_id")
	if q.Has("session_id") && !checkSession(w, r, filter) {
		return
	}
	sessions, err := s.ownedSessions(r.Context(), tag)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "listing the sessions: " + err.Error()})
		return
	}
	out := apiLogResponse{Mode: s.apiLogMode, Calls: []memory.APICall{}, Sessions: make([]apiLogSession, 0, len(sessions))}
	ids := make([]string, 0, len(sessions))
	for _, ss := range sessions {
		out.Sessions = append(out.Sessions, apiLogSession{ID: ss.ID, Title: ss.Title})
		ids = append(ids, ss.ID)
	}
	if filter != "" {
		ids = []string{filter}
	}
	if len(ids) > 0 { // never an empty list: it would select every record
		calls, err := s.apiLog.APICalls(r.Context(), memory.APICallQuery{SessionIDs: ids, Limit: limit + 1})
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "reading the API log: " + err.Error()})
			return
		}
		if len(calls) > limit {
			calls, out.More = calls[:limit], true
		}
		for _, c := range calls {
			c.Request, c.Reply = nil, nil
			out.Calls = append(out.Calls, c)
		}
	}
	writeJSONValue(w, http.StatusOK, out)
}

// handleAPICall answers GET /api/apilog/call?id= with one record in full:
// its request as sent and its reply (absent when the log keeps metadata
// only).
//
//	200 memory.APICall
//	400 a missing or invalid id
//	401 no owner cookie
//	404 no such record, or another browser's; the API log is off
func (s *Server) handleAPICall(w http.ResponseWriter, r *http.Request) {
	tag, ok := s.apiLogOwner(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil || id < 1 {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "id must be a record's id, a positive number"})
		return
	}
	c, err := s.apiLog.APICall(r.Context(), id)
	switch {
	case errors.Is(err, memory.ErrNotFound) || err == nil && sessionOwner(c.SessionID) != tag:
		writeJSON(w, http.StatusNotFound, apiResponse{Error: errNoAPICall.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "reading the API log: " + err.Error()})
		return
	}
	writeJSONValue(w, http.StatusOK, c)
}

// apiLogDeleteRequest is the body of POST /api/apilog/delete.
type apiLogDeleteRequest struct {
	// SessionID, when not empty, deletes that session's records only.
	SessionID string `json:"session_id"`
}

// handleAPILogDelete deletes records of the API log: POST
// /api/apilog/delete {session_id?}, the session's records, or without
// session_id those of every stored session of the browser.
//
//	200 {"success":true}
//	400 malformed JSON, an invalid session id
//	401, 403 no owner cookie; the session is another browser's
//	404 the API log is off
func (s *Server) handleAPILogDelete(w http.ResponseWriter, r *http.Request) {
	var req apiLogDeleteRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	tag, ok := s.apiLogOwner(w, r)
	if !ok || req.SessionID != "" && !checkSession(w, r, req.SessionID) {
		return
	}
	ids := []string{req.SessionID}
	if req.SessionID == "" {
		sessions, err := s.ownedSessions(r.Context(), tag)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "listing the sessions: " + err.Error()})
			return
		}
		ids = ids[:0]
		for _, ss := range sessions {
			ids = append(ids, ss.ID)
		}
	}
	if len(ids) > 0 { // never an empty list: it would delete every record
		if err := s.apiLog.DeleteAPICalls(r.Context(), memory.APICallQuery{SessionIDs: ids}); err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "deleting from the API log: " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, apiResponse{Success: true})
}
