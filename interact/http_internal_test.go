package interact

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/approval"
)

func serve(h http.Handler, method, contentType, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/api/form-answer", strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) approval.Response {
	t.Helper()
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var r approval.Response
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), rec.Body.String())
	return r
}

var anyCaller = approval.HandlerConfig{Authorize: approval.AllowAnyCaller}

// TestAnswerHandler: the handler's answers for each kind of request; bad
// requests leave the form open.
func TestAnswerHandler(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	id := e.FormID
	h := f.AnswerHandler(anyCaller)
	good := `{"session_id":"s1","form_id":"` + id + `","answers":{"name":"Ada","seat":["window"],"meals":["veg"]}}`
	for _, tc := range []struct {
		name, method, ctype, body string
		status                    int
		err                       string
	}{
		{"GET", "GET", "application/json", good, 405, "use POST"},
		{"not JSON", "POST", "text/plain", good, 415, "must be JSON"},
		{"no content type", "POST", "", good, 415, "must be JSON"},
		{"empty", "POST", "application/json", "", 400, "empty request body"},
		{"malformed", "POST", "application/json", `{"session_id":`, 400, "malformed JSON"},
		{"trailing data", "POST", "application/json", good + `{}`, 400, "unexpected data after the JSON object"},
		{"too big", "POST", "application/json", `{"session_id":"` + strings.Repeat("x", approval.MaxBodyBytes) + `"}`, 413, "larger than"},
		{"no session", "POST", "application/json", `{"form_id":"` + id + `","answers":{}}`, 400, "missing session_id"},
		{"no form id", "POST", "application/json", `{"session_id":"s1","answers":{}}`, 400, "missing form_id"},
		{"no answers", "POST", "application/json", `{"session_id":"s1","form_id":"` + id + `"}`, 400, "missing answers"},
		{"answer of the wrong shape", "POST", "application/json", `{"session_id":"s1","form_id":"` + id + `","answers":{"name":3}}`, 400, "an answer is a string or an array of strings"},
		{"invalid answers", "POST", "application/json", `{"session_id":"s1","form_id":"` + id + `","answers":{"name":"Ada"}}`, 400, `question "seat": no answer`},
		{"another session", "POST", "application/json", `{"session_id":"s2","form_id":"` + id + `","answers":{}}`, 403, "another session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, tc.method, tc.ctype, tc.body)
			assert.Equal(t, tc.status, rec.Code)
			r := decodeResponse(t, rec)
			assert.False(t, r.Success)
			assert.Contains(t, r.Error, tc.err)
			if tc.status == 400 {
				assert.NotContains(t, r.Error, "interact:", "a person reads it")
				assert.NotContains(t, r.Error, "invalid answers:", "the 400 says that already")
			}
			assert.Len(t, pending(t, f, "s1"), 1, "the form stays open")
		})
	}
	assert.Equal(t, "POST", serve(h, "GET", "", "").Header().Get("Allow"))

	rec := serve(h, "POST", "application/json; charset=utf-8", good)
	assert.Equal(t, 200, rec.Code)
	assert.Equal(t, approval.Response{Success: true}, decodeResponse(t, rec))
	rec = serve(h, "POST", "application/json", good)
	assert.Equal(t, 200, rec.Code, "a stale form is an answer, not a failure")
	r := decodeResponse(t, rec)
	assert.False(t, r.Success)
	assert.Contains(t, r.Error, "form is not open")

	got, err := takeAndWait(t.Context(), f, "s1", "call_1")
	require.NoError(t, err)
	assert.Equal(t, Answers{"name": {"Ada"}, "seat": {"window"}, "meals": {"veg"}}, got)
}

// TestAnswerHandlerNeedsAuthorize: without Authorize the handler answers
// 500 and takes nothing.
func TestAnswerHandlerNeedsAuthorize(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	rec := serve(f.AnswerHandler(approval.HandlerConfig{}), "POST", "application/json",
		`{"session_id":"s1","form_id":"`+e.FormID+`","answers":{"name":"Ada","seat":"window","meals":[]}}`)
	assert.Equal(t, 500, rec.Code)
	assert.Contains(t, decodeResponse(t, rec).Error, "no HandlerConfig.Authorize")
	assert.Len(t, pending(t, f, "s1"), 1)
}

// TestAnswerHandlerAsksAuthorize: Authorize gets the request and the
// session of the body; its refusal is 401 or 403 and takes nothing.
func TestAnswerHandlerAsksAuthorize(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	var sessions []string
	h := f.AnswerHandler(approval.HandlerConfig{Authorize: func(r *http.Request, session string) (string, error) {
		sessions = append(sessions, session)
		switch r.Header.Get("X-Who") {
		case "":
			return "", approval.ErrUnauthenticated
		case "owner":
			return "user:ada", nil
		}
		return "", assert.AnError
	}})
	body := `{"session_id":"s1","form_id":"` + e.FormID + `","answers":{"name":"Ada","seat":"window","meals":[]}}`
	for _, tc := range []struct {
		who    string
		status int
	}{{"", 401}, {"stranger", 403}, {"owner", 200}} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Who", tc.who)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.status, rec.Code, tc.who)
		assert.Equal(t, tc.status != 200, len(pending(t, f, "s1")) == 1, "%q: a refusal leaves the form open", tc.who)
	}
	assert.Equal(t, []string{"s1", "s1", "s1"}, sessions)
	assert.Empty(t, pending(t, f, "s1"))

	// The answer is kept with who gave it (the principal Authorize
	// returned) and through what.
	rec, err := f.core.Store().GetApproval(t.Context(), e.FormID)
	require.NoError(t, err)
	require.True(t, rec.Decided)
	assert.True(t, rec.Decision.Approved)
	assert.Equal(t, "user:ada", rec.Decision.Principal)
	assert.Equal(t, "http", rec.Decision.Channel)
	assert.JSONEq(t, `{"name":["Ada"],"seat":["window"],"meals":[]}`, string(rec.Decision.Arguments))
}

// FuzzAnswerHandler: whatever the body, the handler answers with one of its
// statuses and JSON, never panics, and takes only answers that fit the
// questions. FORM in a body stands for the open form's id.
func FuzzAnswerHandler(f *testing.F) {
	for _, seed := range []string{
		`{"session_id":"s1","form_id":"FORM","answers":{"name":"Ada","seat":"window","meals":["veg","fish"]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":["Ada"],"seat":["aisle"],"meals":[]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":"Ada","seat":"roof","meals":[]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":"Ada","seat":"window","meals":["veg","veg"]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":null,"seat":"window","meals":[null]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"x":"y"}}`,
		`{"session_id":"s2","form_id":"FORM","answers":{}}`,
		`{"session_id":"s1","form_id":"nope","answers":{}}`,
		`{"session_id":"s1","form_id":"FORM","answers":[]}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":"\ud800","seat":"window","meals":[]}}`,
		`{"session_id":"s1","form_id":"FORM","answers":{"name":"Ada","seat":"window","meals":[]}} trailing`,
		`{"session_id":1}`,
		`null`,
		``,
		`[`,
		`{"answers":{"name":{"a":"b"}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		forms := newForms(t, time.Minute)
		e := open(t, t.Context(), forms, "s1", "call_1")
		body = strings.ReplaceAll(body, "FORM", e.FormID)
		rec := serve(forms.AnswerHandler(anyCaller), "POST", "application/json", body)
		var r approval.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("status %d: the answer is not JSON: %q", rec.Code, rec.Body.String())
		}
		switch rec.Code {
		case 200, 400, 403, 413:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		answered := len(pending(t, forms, "s1")) == 0
		if answered != (rec.Code == 200 && r.Success) {
			t.Fatalf("status %d %+v but answered=%v", rec.Code, r, answered)
		}
		if !answered {
			return
		}
		got, err := takeAndWait(t.Context(), forms, "s1", "call_1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkAnswers(e.Questions, got); err != nil {
			t.Fatalf("took answers that do not fit: %v", err)
		}
		if forms.Len() != 0 {
			t.Fatal("a form stayed")
		}
	})
}
