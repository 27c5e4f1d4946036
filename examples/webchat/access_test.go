package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// getAs sends a GET with client and returns the status and the answer,
// or what came of it within a few seconds (an event stream does not end).
func getAs(t *testing.T, client *http.Client, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	if err != nil {
		b.WriteString(" (read: " + err.Error() + ")")
	}
	return resp.StatusCode, b.String()
}

// TestOtherClientsCannotTouchASession: a session belongs to the browser
// that opened it. A client without the owner cookie, or with another
// browser's, can neither watch it (events, history), nor send to it, nor
// decide its approvals, nor interrupt its run.
func TestOtherClientsCannotTouchASession(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	victim := h.newSession(t)
	ev, _ := h.openEvents(t, victim)
	h.chat(t, victim, "Please run `id`")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, "run_command", call.Name)

	noCookie := h.newClient(t)
	badCookie := h.newClient(t)
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	badCookie.Jar.SetCookies(u, []*http.Cookie{{Name: ownerCookie, Value: "not-a-secret"}})
	other := h.newBrowser(t)
	for _, tc := range []struct {
		name   string
		client *http.Client
		status int
	}{
		{"no cookie", noCookie, http.StatusUnauthorized},
		{"malformed cookie", badCookie, http.StatusUnauthorized},
		{"another browser", other, http.StatusForbidden},
	} {
		post := func(path, body string) {
			t.Helper()
			status, out := postAs(t, tc.client, h.ts.URL, path, body)
			assert.Equal(t, tc.status, status, "%s: POST %s %s: %v", tc.name, path, body, out)
			assert.Equal(t, false, out["success"], "%s: POST %s", tc.name, path)
		}
		post("/api/tool-approve", approveBody(victim, call, true, map[string]any{"scope": "always"}))
		post("/api/interrupt", mustString(map[string]any{"session_id": victim}))
		post("/api/chat", mustString(map[string]any{"session_id": victim, "message": "Please run `rm -rf ~`"}))
		for _, path := range []string{"/api/events", "/api/history"} {
			status, body := getAs(t, tc.client, h.ts.URL+path+"?session_id="+victim)
			assert.Equal(t, tc.status, status, "%s: GET %s: %s", tc.name, path, body)
			assert.NotContains(t, body, "run", "%s: GET %s shows nothing of the session", tc.name, path)
		}
	}
	// Another browser's own session does not unlock the victim's approval.
	mine := postSession(t, other, h.ts.URL)
	status, out := postAs(t, other, h.ts.URL, "/api/tool-approve", approveBody(mine, call, true, nil))
	assert.Equal(t, http.StatusForbidden, status, "%v", out)
	// Nor does a session id that claims the victim's owner.
	forged := sessionOwner(victim) + "-0123456789abcdef"
	status, out = postAs(t, other, h.ts.URL, "/api/chat", mustString(map[string]any{"session_id": forged, "message": "hi"}))
	assert.Equal(t, http.StatusForbidden, status, "%v", out)

	assert.Equal(t, 1, waiting(t, h.srv, false), "the approval still waits for its owner")
	assert.True(t, h.srv.busy(victim), "the run was not interrupted")
	assert.False(t, h.srv.busy(forged))

	// The owner decides.
	assert.Equal(t, true, h.decide(t, victim, call, false)["success"])
	done, _ := ev.runDone(t)
	assert.Equal(t, "rejected", done.Status)
	status, body := getAs(t, h.client, h.ts.URL+"/api/history?session_id="+victim)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "Please run `id`")
	assert.NotContains(t, body, "rm -rf", "nobody else sent to the session")
}

func postSession(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	status, out := postAs(t, client, base, "/api/sessions", `{}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	return out["session_id"].(string)
}

// TestOwnerCookie: the page sets an HttpOnly, SameSite=Strict owner cookie
// once; the session ids of a browser carry its owner, and a browser without
// the cookie gets none.
func TestOwnerCookie(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	resp, err := h.newClient(t).Get(h.ts.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == ownerCookie {
			c = k
		}
	}
	require.NotNil(t, c, "the page sets the owner cookie")
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.Len(t, c.Value, ownerSecretLen)

	resp, err = h.client.Get(h.ts.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, resp.Cookies(), "a browser that has its cookie keeps it")

	a, b := h.newSession(t), h.newSession(t)
	assert.NotEqual(t, a, b)
	assert.Equal(t, sessionOwner(a), sessionOwner(b), "one owner")
	assert.NotEqual(t, sessionOwner(a), sessionOwner(postSession(t, h.newBrowser(t), h.ts.URL)), "another browser, another owner")
	status, out := postAs(t, h.newClient(t), h.ts.URL, "/api/sessions", `{}`)
	assert.Equal(t, http.StatusUnauthorized, status, "%v", out)
}

// TestRunLimits: runs are bounded per browser (429) and in the whole
// server (503), and a slot is free again when a run ends.
func TestRunLimits(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{MaxRuns: 2, MaxRunsPerOwner: 1})
	chat := func(client *http.Client, session string) (int, map[string]any, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, h.ts.URL+"/api/chat", strings.NewReader(mustString(map[string]string{"session_id": session, "message": "What's the weather in Paris?"})))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, jsonDecode(resp, &out))
		return resp.StatusCode, out, resp.Header
	}
	a1, a2 := h.newSession(t), h.newSession(t)
	ev, _ := h.openEvents(t, a1)
	status, out, _ := chat(h.client, a1)
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	status, out, _ = chat(h.client, a2)
	assert.Equal(t, http.StatusTooManyRequests, status, "a second run of the same browser: %v", out)
	assert.NotEmpty(t, out["error"])

	b := h.newBrowser(t)
	status, out, _ = chat(b, postSession(t, b, h.ts.URL))
	require.Equal(t, http.StatusAccepted, status, "another browser: %v", out)
	c := h.newBrowser(t)
	cs := postSession(t, c, h.ts.URL)
	status, out, hdr := chat(c, cs)
	assert.Equal(t, http.StatusServiceUnavailable, status, "a third run in a server of two: %v", out)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	assert.False(t, h.srv.busy(a2))
	assert.False(t, h.srv.busy(cs))

	// a1 ends: one slot for the server, one for its browser.
	st, _ := h.post(t, "/api/interrupt", mustString(map[string]string{"session_id": a1}))
	require.Equal(t, http.StatusOK, st)
	ev.runDone(t)
	status, out, _ = chat(c, cs)
	assert.Equal(t, http.StatusAccepted, status, "%v", out)
}

// TestStreamLimits: event streams are bounded per browser (429) and in the
// whole server (503), and a closed stream frees its slot.
func TestStreamLimits(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{MaxStreams: 3, MaxStreamsPerOwner: 2})
	getEvents := func(client *http.Client, session string) int {
		t.Helper()
		resp, err := client.Get(h.ts.URL + "/api/events?session_id=" + session)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	a1, a2 := h.newSession(t), h.newSession(t)
	first, _ := h.openEvents(t, a1)
	h.openEvents(t, a2)
	assert.Equal(t, http.StatusTooManyRequests, getEvents(h.client, a1), "a third stream of one browser")

	b := h.newBrowser(t)
	h.client = b
	h.openEvents(t, postSession(t, b, h.ts.URL))
	c := h.newBrowser(t)
	assert.Equal(t, http.StatusServiceUnavailable, getEvents(c, postSession(t, c, h.ts.URL)), "a fourth stream in a server of three")

	first.close()
	require.Eventually(t, func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.streamCount == 2
	}, 5*time.Second, 10*time.Millisecond, "a closed stream frees its slot")
	h.client = c
	h.openEvents(t, postSession(t, c, h.ts.URL))
}

// TestBlankMessageIsRefused: a message of white space starts no run.
func TestBlankMessageIsRefused(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s := h.newSession(t)
	status, out := h.post(t, "/api/chat", mustString(map[string]string{"session_id": s, "message": " \n\t  "}))
	assert.Equal(t, http.StatusBadRequest, status, "%v", out)
	assert.False(t, h.srv.busy(s))
}

// TestBodiesMustBeJSON: every POST endpoint wants Content-Type:
// application/json (415 otherwise), which also keeps HTML forms of other
// sites out.
func TestBodiesMustBeJSON(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s := h.newSession(t)
	for _, path := range []string{"/api/chat", "/api/sessions", "/api/tool-approve", "/api/interrupt", "/api/sessions/rename", "/api/sessions/delete", "/api/sessions/import"} {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
			req, err := http.NewRequest(http.MethodPost, h.ts.URL+path, strings.NewReader(mustString(map[string]string{"session_id": s, "message": "hi"})))
			require.NoError(t, err)
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := h.client.Do(req)
			require.NoError(t, err)
			var out map[string]any
			err = jsonDecode(resp, &out)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "POST %s as %q", path, ct)
			assert.NoError(t, err, "POST %s: the answer is JSON", path)
		}
	}
	assert.False(t, h.srv.busy(s))
}

// TestSlowBodyTimesOut: a body sent a byte at a time is cut off after
// BodyTimeout with 408, on the server's endpoints and on the approval
// handlers alike.
func TestSlowBodyTimesOut(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{BodyTimeout: 200 * time.Millisecond})
	for _, path := range []string{"/api/chat", "/api/tool-approve"} {
		conn, err := net.Dial("tcp", h.ts.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close() // before the harness closes: it waits for the handler
		require.NoError(t, conn.SetDeadline(time.Now().Add(waitLimit)))
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"se", path)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "POST %s: an answer before the client's own deadline", path)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "POST %s", path)
	}
}

// TestToken: with a token, the server answers only requests that carry it:
// once as ?token= (which sets a cookie and redirects), in the cookie, or
// as a bearer token. Any Host name is then fine.
func TestToken(t *testing.T) {
	leaktest.Check(t)
	const token = "a-token-of-24-characters"
	h := newHarness(t, Options{Token: token})
	for _, path := range []string{"/", "/api/skills", "/?token=wrong-token-of-24-chars"} {
		status, body := getAs(t, h.newClient(t), h.ts.URL+path)
		assert.Equal(t, http.StatusUnauthorized, status, "GET %s: %s", path, body)
	}

	browser := h.newClient(t)
	browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := browser.Get(h.ts.URL + "/?token=" + url.QueryEscape(token))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/", resp.Header.Get("Location"), "the token leaves the address")
	status, body := getAs(t, browser, h.ts.URL+"/")
	assert.Equal(t, http.StatusOK, status, body)
	s := postSession(t, browser, h.ts.URL)
	status, out := postAs(t, browser, h.ts.URL, "/api/chat", mustString(map[string]string{"session_id": s, "message": "hello"}))
	assert.Equal(t, http.StatusAccepted, status, "%v", out)

	req, err := http.NewRequest(http.MethodGet, h.ts.URL+"/api/skills", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Host = "chat.example:8080"
	resp, err = h.newClient(t).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a bearer token, and a Host name other than localhost")
	require.Eventually(t, func() bool { return !h.srv.busy(s) }, waitLimit, 5*time.Millisecond)
}

// TestNonLoopbackNeedsFlagAndToken: the command refuses an address others
// can reach unless told so with -allow-remote and a token.
func TestNonLoopbackNeedsFlagAndToken(t *testing.T) {
	const token = "a-token-of-24-characters"
	for _, tc := range []struct {
		addr        string
		allowRemote bool
		token       string
		want        string // "" when served
	}{
		{"127.0.0.1:8080", false, "", ""},
		{"localhost:8080", false, "", ""},
		{"[::1]:8080", false, token, ""},
		{"0.0.0.0:8080", false, "", "-allow-remote"},
		{":8080", false, "", "-allow-remote"},
		{"[::]:8080", false, token, "-allow-remote"},
		{"192.0.2.1:8080", false, token, "-allow-remote"},
		{"0.0.0.0:8080", true, "", "token"},
		{"0.0.0.0:8080", true, "short", "at least 16"},
		{"127.0.0.1:8080", false, "short", "at least 16"},
		{"0.0.0.0:8080", true, token, ""},
	} {
		err := checkExposure(tc.addr, tc.allowRemote, tc.token)
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc)
		} else if assert.Error(t, err, "%+v", tc) {
			assert.Contains(t, err.Error(), tc.want, "%+v", tc)
		}
	}

	// The command checks before it listens. 192.0.2.1 (a documentation
	// address) is no address of this machine: were the check missing,
	// listening would fail with another status and message, and nothing
	// would be served.
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "WEBCHAT_TOKEN"} {
		t.Setenv(k, "")
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	for _, args := range [][]string{
		{"-addr", "192.0.2.1:0"},
		{"-addr", "192.0.2.1:0", "-allow-remote"},
		{"-addr", "192.0.2.1:0", "-token", token},
	} {
		var stdout, stderr strings.Builder
		assert.Equal(t, 2, run(ctx, args, &stdout, &stderr, nil), "%v: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), "-allow-remote", "%v", args)
		assert.Empty(t, stdout.String(), "%v: nothing listened", args)
	}
}

// TestMainPrintsTheTokenAddress: with a token on loopback, the address the
// command prints carries it, and the page answers only with it.
func TestMainPrintsTheTokenAddress(t *testing.T) {
	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"} {
		t.Setenv(k, "")
	}
	t.Setenv("WEBCHAT_TOKEN", "a-token-of-24-characters")
	p := startProgram(t)
	u := p.URL
	assert.True(t, strings.HasSuffix(u, "/?token=a-token-of-24-characters"), u)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	bare, _, _ := strings.Cut(u, "?")
	st, _ := getAs(t, client, bare)
	assert.Equal(t, http.StatusUnauthorized, st)
	st, _ = getAs(t, client, u) // follows the redirect, without a jar
	assert.Equal(t, http.StatusUnauthorized, st, "the cookie is the credential after the redirect")
	assert.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
