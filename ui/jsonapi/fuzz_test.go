package jsonapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// FuzzRequests feeds the routes that read a body whatever a network may
// send. Authorize refuses every caller, so nothing acts: a body is either
// refused as a request (400, 413) or decoded, its session id checked, and
// the caller refused (403). Every answer is the JSON error.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		``, `{`, `[]`, `null`, `{"session_id":"s-1","message":"hi"}`, `{"session_id":"s 1","message":"hi"}`,
		`{"session_id":"s-1","message":"hi"} {}`, `{"session_id":1}`, `{"session_id":"s-1","approval_id":"a","approved":true}`,
		`{"session_id":"s-1","form_id":"f","answers":{"q":["a"]}}`, `{"session_id":"` + strings.Repeat("x", 65) + `"}`,
		"{\"session_id\":\"s-1\",\"title\":\"\u202e\"}", `{"session_id":"s-1","message":"` + strings.Repeat("x", 600) + `"}`,
	} {
		f.Add(seed, uint8(0))
		f.Add(seed, uint8(2))
	}
	b := uitest.New(f, uitest.Options{})
	nobody := errors.New("nobody may")
	h, err := NewHandler(ui.Config{Runner: b.Runner, MaxBodyBytes: 512,
		Authorize: func(*http.Request, string) (string, error) { return "", nobody }}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	paths := []string{"/chat", "/tool-approve", "/form-answer", "/interrupt", "/sessions/rename", "/sessions/delete"}
	f.Fuzz(func(t *testing.T, body string, route uint8) {
		path := paths[int(route)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out response
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Success || out.Error == "" {
			t.Fatalf("%s %q: answer %d %q is not a JSON error", path, body, rec.Code, rec.Body)
		}
		var s sessionRequest
		decoded := len(body) <= 512 && decodeBody([]byte(body), &s) == nil
		switch rec.Code {
		case http.StatusForbidden:
			if !decoded || CheckSessionID(s.SessionID) != nil {
				t.Fatalf("%s %q: refused the caller of a body that is no request", path, body)
			}
		case http.StatusRequestEntityTooLarge:
			if len(body) <= 512 {
				t.Fatalf("%s %q: 413 for %d bytes", path, body, len(body))
			}
		case http.StatusBadRequest:
			if decoded && CheckSessionID(s.SessionID) == nil && json.Valid([]byte(body)) && strings.HasPrefix(strings.TrimSpace(body), "{") {
				// Decoded, with a good id: only a field of the wrong type
				// for the route's own body is refused.
				if path == "/interrupt" || path == "/sessions/delete" {
					t.Fatalf("%s %q: 400 for a good request", path, body)
				}
			}
		default:
			t.Fatalf("%s %q: status %d", path, body, rec.Code)
		}
	})
}
