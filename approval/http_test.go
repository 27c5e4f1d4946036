package approval_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

func serve(h http.Handler, method, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/api/x", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) approval.Response {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var r approval.Response
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("body %q is not a JSON Response: %v", rec.Body.String(), err)
	}
	if !r.Success && r.Error == "" {
		t.Errorf("success:false without an error: %s", rec.Body.String())
	}
	return r
}

func TestApproveHandler(t *testing.T) {
	m := newManager(t, approval.ManagerConfig{})
	h := m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller})
	register := func() agent.Ticket {
		tk, err := m.Request(context.Background(), request("s1", 1))
		require.NoError(t, err)
		return tk
	}
	tests := []struct {
		name        string
		method      string
		body        func(id string) string
		wantStatus  int
		wantSuccess bool
		wantErr     string // substring of the error
		wantPending bool   // the approval is still pending afterwards
		wantD       *agent.Decision
	}{
		{"approve", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true`)
		}, 200, true, "", false, &agent.Decision{Approved: true}},
		{"reject with reason, edit and scope", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":false,"reason":"no","arguments":{"n":2},"scope":"session"`)
		}, 200, true, "", false, &agent.Decision{Reason: "no", Arguments: json.RawMessage(`{"n":2}`), Scope: agent.ScopeSession}},
		{"null arguments mean none", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true,"arguments":null,"scope":"always"`)
		}, 200, true, "", false, &agent.Decision{Approved: true, Scope: agent.ScopeSession}}, // "always" is capped
		{"stale key", "POST", func(string) string {
			return approveBody("s1", "0123456789abcdef0123456789abcdef", request("s1", 1), `"approved":true`)
		}, 200, false, "not pending", true, nil},
		{"another session", "POST", func(id string) string {
			return approveBody("s2", id, request("s1", 1), `"approved":true`)
		}, 403, false, "another session", true, nil},
		{"arguments not an object", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true,"arguments":[1]`)
		}, 400, false, "JSON object", true, nil},
		{"unknown scope", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true,"scope":"forever"`)
		}, 400, false, "scope", true, nil},
		{"another call id", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 2), `"approved":true`) // call_2, same tool
		}, 409, false, "not for the call", true, nil},
		{"another tool", "POST", func(id string) string {
			other := request("s1", 1)
			other.Call.Name = "delete_files"
			return approveBody("s1", id, other, `"approved":true`)
		}, 409, false, "tool", true, nil},
		{"other arguments", "POST", func(id string) string {
			other := request("s1", 1)
			other.Call.ID, other.Call.Arguments = "call_1", json.RawMessage(`{"n":666}`)
			return approveBody("s1", id, other, `"approved":true`)
		}, 409, false, "digest", true, nil},
		{"missing binding", "POST", func(id string) string {
			return `{"session_id":"s1","approval_id":"` + id + `","approved":true}`
		}, 400, false, "call_id", true, nil},
		{"missing session_id", "POST", func(id string) string { return `{"approval_id":"` + id + `","approved":true}` }, 400, false, "session_id", true, nil},
		{"missing approval_id", "POST", func(string) string { return `{"session_id":"s1","approved":true}` }, 400, false, "approval_id", true, nil},
		{"missing approved", "POST", func(id string) string { return approveBody("s1", id, request("s1", 1), "") }, 400, false, "approved", true, nil},
		{"malformed JSON", "POST", func(string) string { return `{"session_id":` }, 400, false, "malformed", true, nil},
		{"wrong type", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":"yes"`)
		}, 400, false, "malformed", true, nil},
		{"trailing data", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true} {`)
		}, 400, false, "after the JSON", true, nil},
		{"empty body", "POST", func(string) string { return "" }, 400, false, "empty", true, nil},
		{"JSON null", "POST", func(string) string { return "null" }, 400, false, "session_id", true, nil},
		{"wrong method", "GET", func(string) string { return "" }, 405, false, "POST", true, nil},
		{"oversized body", "POST", func(id string) string {
			return approveBody("s1", id, request("s1", 1), `"approved":true,"reason":"`+strings.Repeat("x", approval.MaxBodyBytes)+`"`)
		}, 413, false, "larger", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := register()
			rec := serve(h, tt.method, tt.body(tk.ApprovalID()))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body.String())
			}
			r := decodeResponse(t, rec)
			if r.Success != tt.wantSuccess {
				t.Errorf("success = %v, want %v", r.Success, tt.wantSuccess)
			}
			if !strings.Contains(r.Error, tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", r.Error, tt.wantErr)
			}
			if tt.method == "GET" {
				assert.Equal(t, "POST", rec.Header().Get("Allow"))
			}
			stillPending := len(pendingList(t, m, "s1")) == 1
			if stillPending != tt.wantPending {
				t.Errorf("still pending = %v, want %v", stillPending, tt.wantPending)
			}
			cancelSession(t, m, "s1")
			d, err := tk.Wait(context.Background())
			require.NoError(t, err)
			if tt.wantD != nil {
				assert.Equal(t, tt.wantD.Approved, d.Approved)
				assert.Equal(t, tt.wantD.Reason, d.Reason)
				assert.Equal(t, tt.wantD.Scope, d.Scope)
				assert.Equal(t, string(tt.wantD.Arguments), string(d.Arguments))
			}
			assert.Equal(t, 0, m.Len())
		})
	}
}

// The whole path over a real server on 127.0.0.1: the agent waits, the
// browser approves over HTTP, a stale card is answered success:false.
func TestApproveOverHTTP(t *testing.T) {
	leaktest.Check(t)
	m := newManager(t, approval.ManagerConfig{})
	mux := http.NewServeMux()
	mux.Handle("POST /api/tool-approve", m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	tk, err := m.Request(context.Background(), request("s1", 1))
	require.NoError(t, err)
	id := tk.ApprovalID()
	done := make(chan outcome, 1)
	go func() {
		d, err := tk.Wait(context.Background())
		done <- outcome{d, err}
	}()
	post := func() approval.Response {
		body := approveBody("s1", id, request("s1", 1), `"approved":true`)
		resp, err := srv.Client().Post(srv.URL+"/api/tool-approve", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		var r approval.Response
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		return r
	}
	assert.True(t, post().Success)
	got := <-done
	require.NoError(t, got.err)
	assert.True(t, got.d.Approved)
	r := post()
	assert.False(t, r.Success, "a second answer finds a stale card")
	assert.Equal(t, 0, m.Len())
}

// TestHandlersNeedAuthorize: the session id in a body is no credential, so
// a handler whose config has no Authorize acts on nothing and says why; a
// host that means "anyone" says so with AllowAnyCaller.
func TestHandlersNeedAuthorize(t *testing.T) {
	m := newManager(t, approval.ManagerConfig{})
	tk, err := m.Request(context.Background(), request("s1", 1))
	require.NoError(t, err)
	handlers := map[string]struct {
		h    func(approval.HandlerConfig) http.Handler
		body string
	}{
		"approve": {m.ApproveHandler, approveBody("s1", tk.ApprovalID(), request("s1", 1), `"approved":true`)},
	}
	for name, tt := range handlers {
		t.Run(name, func(t *testing.T) {
			for _, body := range []string{tt.body, `{`} {
				rec := serve(tt.h(approval.HandlerConfig{AllowAlways: true}), "POST", body)
				require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
				r := decodeResponse(t, rec)
				assert.Contains(t, r.Error, "HandlerConfig.Authorize")
				assert.Contains(t, r.Error, "AllowAnyCaller")
			}
			assert.Len(t, pendingList(t, m, "s1"), 1, "nothing was decided or cancelled")
		})
	}
	rec := serve(m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller}), "POST", handlers["approve"].body)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	assert.True(t, d.Approved)
}

// TestDurableHandlers: two durable Managers on one Store stand for two
// replicas behind a load balancer, each serving the handlers on 127.0.0.1.
// A decision posted to B reaches the Wait on A.
func TestDurableHandlers(t *testing.T) {
	leaktest.Check(t)
	st := &failingStore{MemStore: &memory.MemStore{}}
	a := replica(t, approval.ManagerConfig{Store: st, Notifier: st.MemStore})
	b := replica(t, approval.ManagerConfig{Store: st, Notifier: st.MemStore})
	cfg := approval.HandlerConfig{Authorize: approval.AllowAnyCaller}
	mux := http.NewServeMux()
	mux.Handle("POST /api/tool-approve", b.ApproveHandler(cfg))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	post := func(path, body string) (int, approval.Response) {
		t.Helper()
		resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var r approval.Response
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		return resp.StatusCode, r
	}
	approve := func(session, id, extra string) (int, approval.Response) {
		return post("/api/tool-approve", approveBody(session, id, request("s1", 1), `"approved":true`+extra))
	}

	tk, err := a.Request(t.Context(), request("s1", 1))
	require.NoError(t, err)
	id := tk.ApprovalID()
	done := waitAsync(t.Context(), tk)

	code, r := approve("s2", id, "")
	assert.Equal(t, http.StatusForbidden, code, "another session's approval")
	assert.Contains(t, r.Error, "another session")
	code, r = approve("s1", id, `,"arguments":[1]`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, r.Error, "JSON object")
	st.set(true)
	code, r = approve("s1", id, "")
	assert.Equal(t, http.StatusInternalServerError, code, "the Store failed")
	assert.Contains(t, r.Error, "store down")
	_, err = b.CancelSession(t.Context(), "s1")
	assert.ErrorContains(t, err, "store down")
	st.set(false)
	require.Len(t, pendingList(t, a, "s1"), 1, "nothing was decided")

	code, r = approve("s1", id, `,"scope":"always","reason":"ok"`)
	require.Equal(t, http.StatusOK, code)
	assert.True(t, r.Success, r.Error)
	got := within(t, done)
	require.NoError(t, got.err)
	assert.Equal(t, agent.Decision{Approved: true, Reason: "ok", Scope: agent.ScopeSession, By: approval.AnyCaller, Via: approval.ViaHTTP}, got.d, "decided on B, woken on A; always capped to session")
	code, r = approve("s1", id, "")
	assert.Equal(t, http.StatusOK, code)
	assert.False(t, r.Success, "a stale card")
	assert.Contains(t, r.Error, "not pending")

	tk, err = a.Request(t.Context(), request("s1", 2))
	require.NoError(t, err)
	done = waitAsync(t.Context(), tk)
	n, err := b.CancelSession(t.Context(), "s1")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the approval waited for on A, cancelled on B")
	got = within(t, done)
	require.NoError(t, got.err)
	assert.Equal(t, cancelledDecision, got.d)
	n, err = b.CancelSession(t.Context(), "s1")
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to cancel")
	assert.Equal(t, 0, a.Len())
	assert.Equal(t, 0, b.Len())
}
