package ui_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/planround/planround/ui"
)

// TestCheck: Check asks the function with the request and the session, and
// answers for it when the handler must not go on: 500 without a function,
// 401 for ErrUnauthenticated, 403 for any other refusal; a principal left
// empty is "unknown".
func TestCheck(t *testing.T) {
	var asked []string
	for _, tc := range []struct {
		name      string
		f         ui.AuthorizeFunc
		ok        bool
		status    int
		principal string
	}{
		{"no function", nil, false, http.StatusInternalServerError, ""},
		{"unauthenticated", func(r *http.Request, s string) (string, error) {
			asked = append(asked, s)
			return "", ui.ErrUnauthenticated
		}, false, http.StatusUnauthorized, ""},
		{"forbidden", func(r *http.Request, s string) (string, error) {
			asked = append(asked, s)
			return "bob", errors.New("not yours")
		}, false, http.StatusForbidden, ""},
		{"allowed", func(r *http.Request, s string) (string, error) {
			asked = append(asked, s)
			return "alice", nil
		}, true, http.StatusOK, "alice"},
		{"allowed, nobody named", func(r *http.Request, s string) (string, error) {
			asked = append(asked, s)
			return "", nil
		}, true, http.StatusOK, "unknown"},
		{"any caller", ui.AllowAnyCaller, true, http.StatusOK, ui.AnyCaller},
	} {
		rec := httptest.NewRecorder()
		principal, ok := tc.f.Check(rec, httptest.NewRequest("POST", "/x", nil), "s1")
		if ok != tc.ok || principal != tc.principal || rec.Code != tc.status {
			t.Errorf("%s: Check = %q, %v, status %d; want %q, %v, %d", tc.name, principal, ok, rec.Code, tc.principal, tc.ok, tc.status)
		}
		if !ok && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: a refusal answered %q, want JSON", tc.name, rec.Header().Get("Content-Type"))
		}
	}
	if len(asked) != 4 {
		t.Errorf("the functions were asked %d times, want 4", len(asked))
	}
	for _, s := range asked {
		if s != "s1" {
			t.Errorf("asked about session %q, want s1", s)
		}
	}
}
