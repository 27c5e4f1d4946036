package approval_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
)

// decideThroughList registers a call of session s1 with an AllowList in
// front of m, lets answer decide it over HTTP, and returns the decision
// the agent got.
func decideThroughList(t *testing.T, m *approval.Manager, l *approval.AllowList, answer func(id string) int) agent.Decision {
	t.Helper()
	tk, err := l.Wrap(m).Request(context.Background(), request("s1", 1))
	require.NoError(t, err)
	require.Equal(t, 200, answer(tk.ApprovalID()))
	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	return d
}

// TestClientGrantStaysInItsSession: a browser that asks for scope "always"
// grants the tool in its own session only, unless the host allows more.
func TestClientGrantStaysInItsSession(t *testing.T) {
	leaktest.Check(t)
	for _, tc := range []struct {
		name        string
		cfg         approval.HandlerConfig
		scope       string
		wantScope   agent.Scope
		otherAllows bool
	}{
		{"always is capped", approval.HandlerConfig{Authorize: approval.AllowAnyCaller}, "always", agent.ScopeSession, false},
		{"session", approval.HandlerConfig{Authorize: approval.AllowAnyCaller}, "session", agent.ScopeSession, false},
		{"always allowed by the host", approval.HandlerConfig{Authorize: approval.AllowAnyCaller, AllowAlways: true}, "always", agent.ScopeAlways, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, approval.ManagerConfig{})
			l := approval.NewAllowList()
			h := m.ApproveHandler(tc.cfg)
			d := decideThroughList(t, m, l, func(id string) int {
				return serve(h, "POST", approveBody("s1", id, request("s1", 1), `"approved":true,"scope":"`+tc.scope+`"`)).Code
			})
			assert.True(t, d.Approved)
			assert.Equal(t, tc.wantScope, d.Scope)
			assert.True(t, l.Allowed("s1", "run_command"), "the grant holds in the client's session")
			assert.Equal(t, tc.otherAllows, l.Allowed("s2", "run_command"), "the grant reaches another session")
		})
	}
}

// TestAuthorize: the host's check runs on every request of both handlers,
// with the request and the session its body names; a refusal is 401 or 403
// and changes nothing.
func TestAuthorize(t *testing.T) {
	leaktest.Check(t)
	m := newManager(t, approval.ManagerConfig{})
	type call struct{ session, cookie string }
	var calls []call
	cfg := approval.HandlerConfig{Authorize: func(r *http.Request, sessionID string) (string, error) {
		c, err := r.Cookie("owner")
		if err != nil {
			calls = append(calls, call{sessionID, ""})
			return "", fmt.Errorf("%w: who are you?", approval.ErrUnauthenticated)
		}
		calls = append(calls, call{sessionID, c.Value})
		if c.Value != "alice" {
			return "", errors.New("not your session")
		}
		return c.Value, nil
	}}
	approve := m.ApproveHandler(cfg)
	send := func(h http.Handler, cookie, body string) (int, approval.Response) {
		req := httptest.NewRequest("POST", "/api/x", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "owner", Value: cookie})
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, decodeResponse(t, rec)
	}

	tk, err := m.Request(context.Background(), request("s1", 1))
	require.NoError(t, err)
	decide := approveBody("s1", tk.ApprovalID(), request("s1", 1), `"approved":true`)
	for _, tc := range []struct {
		cookie  string
		status  int
		wantErr string
	}{
		{"", http.StatusUnauthorized, "who are you?"},
		{"mallory", http.StatusForbidden, "not your session"},
	} {
		status, r := send(approve, tc.cookie, decide)
		assert.Equal(t, tc.status, status, "approve with cookie %q", tc.cookie)
		assert.Contains(t, r.Error, tc.wantErr)
	}
	assert.Equal(t, 1, m.Len(), "the approval is still pending")
	assert.Equal(t, []call{{"s1", ""}, {"s1", "mallory"}}, calls)

	status, r := send(approve, "alice", decide)
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, r.Success)
	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	assert.True(t, d.Approved)
	assert.Equal(t, "alice", d.By, "the decision is recorded as the principal's Authorize returned")
	assert.Equal(t, approval.ViaHTTP, d.Via)
}

// TestHandlersWantJSON: a body that does not say it is JSON is refused
// with 415 before it is read (a form post from another site cannot be one).
func TestHandlersWantJSON(t *testing.T) {
	m := newManager(t, approval.ManagerConfig{})
	for _, h := range []http.Handler{m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller})} {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
			req := httptest.NewRequest("POST", "/api/x", strings.NewReader(`{"session_id":"s1"}`))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusUnsupportedMediaType, rec.Code, "Content-Type %q", ct)
			decodeResponse(t, rec)
		}
		req := httptest.NewRequest("POST", "/api/x", strings.NewReader(`{"session_id":"s1"}`))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.NotEqual(t, http.StatusUnsupportedMediaType, rec.Code, "a charset is fine")
	}
}

// TestSlowBodyTimesOut: behind a server with a read deadline, a body that
// trickles in is answered 408 when the deadline passes.
func TestSlowBodyTimesOut(t *testing.T) {
	leaktest.Check(t)
	m := newManager(t, approval.ManagerConfig{})
	srv := httptest.NewUnstartedServer(m.ApproveHandler(approval.HandlerConfig{Authorize: approval.AllowAnyCaller}))
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "POST /api/tool-approve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "an answer before the client's own deadline")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
}
