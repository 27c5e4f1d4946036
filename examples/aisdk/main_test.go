package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/planround/planround/ui/aisdk"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
)

// npmDir is the folder of the pinned npm packages the bundle is built from.
var npmDir = filepath.Join("..", "..", "ui", "testdata", "npm")

// lockedVersion returns the version package-lock.json pins for pkg.
func lockedVersion(t *testing.T, pkg string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(npmDir, "package-lock.json"))
	require.NoError(t, err)
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(raw, &lock))
	v := lock.Packages["node_modules/"+pkg].Version
	require.NotEmpty(t, v, "package-lock.json pins no %s", pkg)
	return v
}

// TestBundleHeader: the embedded ai-client.js starts with the header
// build.sh writes, naming the ai and esbuild versions package-lock.json
// pins: a version bump without a rebuild fails here.
func TestBundleHeader(t *testing.T) {
	bundle, err := fs.ReadFile(web, "web/ai-client.js")
	require.NoError(t, err)
	head, _, ok := strings.Cut(string(bundle), "\nvar ")
	require.True(t, ok, "no code after the header")
	require.True(t, strings.HasPrefix(head, "// ai-client.js: the browser build of the ai package's client"), "the bundle does not start with build.sh's header:\n%.300s", bundle)
	for _, l := range strings.Split(head, "\n") {
		require.True(t, strings.HasPrefix(l, "//"), "the header is comments only: %q", l)
	}
	ai := lockedVersion(t, "ai")
	assert.Equal(t, "7.0.173", ai, "the pinned ai: update this test with the bundle")
	assert.Contains(t, head, "\n//   ai@"+ai+" Apache-2.0\n")
	assert.Contains(t, head, "esbuild@"+lockedVersion(t, "esbuild")+" by examples/aisdk/web/build.sh")
	assert.Contains(t, head, "esbuild ai-client.entry.js --bundle --format=esm --platform=browser --target=es2022 --minify")
	for _, name := range []string{"AbstractChat", "DefaultChatTransport", "lastAssistantMessageIsCompleteWithApprovalResponses"} {
		assert.Regexp(t, `export\{[^}]*\bas `+name+`\b`, string(bundle[len(bundle)-300:]))
	}
}

// TestBundleReproducible: build.sh, run again on the installed packages,
// makes the committed ai-client.js byte for byte.
func TestBundleReproducible(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "node is not on PATH: install Node.js (>= 20) to rebuild the bundle")
	}
	if _, err := os.Stat(filepath.Join(npmDir, "node_modules", "esbuild", "package.json")); err != nil {
		unavailable(t, "esbuild is not installed: run `npm ci --no-fund --no-audit` in ui/testdata/npm")
	}
	out := filepath.Join(t.TempDir(), "ai-client.js")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join("web", "build.sh"), out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "build.sh: %s", stderr.String())
	built, err := os.ReadFile(out)
	require.NoError(t, err)
	committed, err := os.ReadFile(filepath.Join("web", "ai-client.js"))
	require.NoError(t, err)
	if !bytes.Equal(built, committed) {
		t.Fatalf("web/ai-client.js is not what build.sh makes (%d bytes, %d committed): run examples/aisdk/web/build.sh and commit it", len(built), len(committed))
	}
}

func unavailable(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
		t.Fatal(msg + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
	}
	t.Skip(msg)
}

func TestCheckExposure(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8090", "[::1]:8090", "127.0.0.2:0"} {
		assert.NoError(t, checkExposure(addr, false), addr)
	}
	for _, addr := range []string{":8090", "0.0.0.0:8090", "192.0.2.1:8090"} {
		assert.Error(t, checkExposure(addr, false), addr)
		assert.NoError(t, checkExposure(addr, true), addr)
	}
	var stderr bytes.Buffer
	assert.Equal(t, 2, run(t.Context(), []string{"-addr", ":0"}, io.Discard, &stderr))
	assert.Contains(t, stderr.String(), "-allow-remote")
}

// newBrowserClient returns a client with a cookie jar of its own that has
// loaded the page, and so holds an owner cookie.
func newBrowserClient(t *testing.T, ts *httptest.Server) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Transport: ts.Client().Transport, Jar: jar}
	resp, err := c.Get(ts.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return c
}

// TestPage: the page and its scripts are served with a CSP, the page sets
// the owner cookie, and nothing else of web/ is served.
func TestPage(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	resp, err := h.ts.Client().Get(h.ts.URL + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `<script type="module" src="app.js">`)
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	var owner *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == ownerCookie {
			owner = c
		}
	}
	require.NotNil(t, owner, "no owner cookie")
	assert.Len(t, owner.Value, 32)
	assert.True(t, owner.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, owner.SameSite)
	assert.Equal(t, ownerCookieAge, owner.MaxAge, "a browser restarted keeps its chats")

	for path, typ := range map[string]string{"/app.js": "text/javascript", "/ai-client.js": "text/javascript", "/style.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		resp, err := h.ts.Client().Get(h.ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), typ, path)
	}
	for _, path := range []string{"/build.sh", "/ai-client.entry.js", "/zod-jitless.js", "/web/app.js", "/index.html"} {
		resp, err := h.ts.Client().Get(h.ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.NotEqual(t, http.StatusOK, resp.StatusCode, path)
	}
}

// TestOwner: a chat belongs to the browser that named it first; another
// browser is refused (403), a client without the cookie too (401).
func TestOwner(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	alice, bob := newBrowserClient(t, h.ts), newBrowserClient(t, h.ts)
	stop := func(c *http.Client, chat string) int {
		t.Helper()
		resp, err := c.Post(h.ts.URL+"/api/chat/"+chat+"/stop", "application/json", nil)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, stop(alice, "chat-a"), "the first request claims the chat")
	assert.Equal(t, http.StatusOK, stop(alice, "chat-a"))
	assert.Equal(t, http.StatusForbidden, stop(bob, "chat-a"))
	assert.Equal(t, http.StatusOK, stop(bob, "chat-b"))
	assert.Equal(t, http.StatusForbidden, stop(alice, "chat-b"))
	assert.Equal(t, http.StatusUnauthorized, stop(h.ts.Client(), "chat-c"))
	assert.Equal(t, http.StatusForbidden, stop(alice, "bad.id"))

	// A chat request of another browser on alice's chat.
	body := `{"id":"chat-a","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}]}`
	resp, err := bob.Post(h.ts.URL+"/api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Zero(t, h.runs.Load())
}

// TestHost: a request whose Host is a name other than localhost (a
// DNS-rebinding page's: evil.example resolving to 127.0.0.1) is refused
// (421) before anything is served, the page and its owner cookie
// included; localhost and IP addresses are served.
func TestHost(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	alice := newBrowserClient(t, h.ts)
	do := func(c *http.Client, method, path, host string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, h.ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for the connection
		resp.Body.Close()
		return resp
	}
	port := h.ts.Listener.Addr().(*net.TCPAddr).Port
	chat := `{"id":"chat-h","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}]}`
	for _, host := range []string{"evil.example", fmt.Sprintf("evil.example:%d", port), "127.0.0.1.evil.example", "localhost.evil.example:80"} {
		resp := do(http.DefaultClient, http.MethodGet, "/", host, "")
		assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, host)
		assert.Empty(t, resp.Cookies(), "%s: no owner cookie for a rebound name", host)
		for _, path := range []string{"/app.js", "/ai-client.js"} {
			assert.Equal(t, http.StatusMisdirectedRequest, do(alice, http.MethodGet, path, host, "").StatusCode, host+path)
		}
		assert.Equal(t, http.StatusMisdirectedRequest, do(alice, http.MethodPost, "/api/chat", host, chat).StatusCode, host)
		assert.Equal(t, http.StatusMisdirectedRequest, do(alice, http.MethodPost, "/api/chat/chat-h/stop", host, "").StatusCode, host)
	}
	assert.Zero(t, h.runs.Load())
	for i, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), "localhost", fmt.Sprintf("[::1]:%d", port)} {
		// A browser keeps cookies by host name: one of its own per name.
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		c := &http.Client{Transport: h.ts.Client().Transport, Jar: jar}
		assert.Equal(t, http.StatusOK, do(c, http.MethodGet, "/", host, "").StatusCode, host)
		assert.Equal(t, http.StatusOK, do(c, http.MethodPost, fmt.Sprintf("/api/chat/chat-%d/stop", i), host, "").StatusCode, host)
	}
}

// TestClaimsPerBrowser: one browser that names chat ids in a loop claims
// at most maxChatsPerOwner of them, and never takes the room of another:
// after a thousand of its claims (the handler's Authorize, called with
// its cookie), another browser claims its chat and runs a turn; the first
// keeps its own chats.
func TestClaimsPerBrowser(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	flood, bob := newBrowserClient(t, h.ts), newBrowserClient(t, h.ts)
	stop := func(c *http.Client, chat string) int {
		t.Helper()
		resp, err := c.Post(h.ts.URL+"/api/chat/"+chat+"/stop", "application/json", nil)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for the connection
		resp.Body.Close()
		return resp.StatusCode
	}
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	cookies := flood.Jar.Cookies(u)
	require.NotEmpty(t, cookies)
	claimed := 0
	for i := range 1_000 {
		r := httptest.NewRequest(http.MethodPost, "/api/chat/x/stop", nil)
		for _, c := range cookies {
			r.AddCookie(c)
		}
		if _, err := h.srv.authorize(r, fmt.Sprintf("flood-%d", i)); err == nil {
			claimed++
		}
	}
	assert.Equal(t, maxChatsPerOwner, claimed, "the claims of one browser")
	assert.Equal(t, http.StatusOK, stop(flood, "flood-0"), "its chats stay its own")
	assert.Equal(t, http.StatusForbidden, stop(flood, "flood-999"))
	assert.Equal(t, http.StatusForbidden, stop(bob, "flood-0"))

	assert.Equal(t, http.StatusOK, stop(bob, "bob-1"), "another browser claims a chat")
	body := `{"id":"bob-2","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"show me a card"}]}]}`
	resp, err := bob.Post(h.ts.URL+"/api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	stream, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", stream)
	assert.Contains(t, string(stream), `"type":"data-planround-card"`)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunDemo runs the program as go run does, without a model configured:
// the demo model answers a turn that shows a card, and the program ends
// when its context does.
func TestRunDemo(t *testing.T) {
	leaktest.Check(t)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	status := make(chan int, 1)
	go func() { status <- run(ctx, []string{"-addr", "127.0.0.1:0"}, &stdout, &stderr) }()
	var base string
	require.Eventually(t, func() bool {
		_, after, ok := strings.Cut(stdout.String(), "listening on ")
		base = strings.TrimSpace(after)
		return ok && strings.HasSuffix(base, "/")
	}, 10*time.Second, 10*time.Millisecond, "the program's address; stderr: %s", &stderr)
	assert.Contains(t, stderr.String(), "built-in demo model")
	db := filepath.Join(data, "planround-aisdk", "aisdk.db")
	assert.Contains(t, stderr.String(), "keeping the chats in "+db)
	fi, err := os.Stat(filepath.Dir(db))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the chats are the user's only")

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Jar: jar}
	resp, err := c.Get(base)
	require.NoError(t, err)
	resp.Body.Close()
	body := `{"id":"demo-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"show me a card about Paris"}]}]}`
	resp, err = c.Post(base+"api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	stream, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(stream), `"type":"data-planround-card"`)
	assert.Contains(t, string(stream), `"status":"finished"`)
	assert.True(t, strings.HasSuffix(string(stream), "data: [DONE]\n\n"))

	cancel()
	select {
	case s := <-status:
		assert.Zero(t, s, "stderr: %s", &stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("the program did not end with its context")
	}
	_, err = os.Stat(db)
	assert.NoError(t, err, "the chats are kept in the default file")
}

// chatStream posts body to the chat endpoint with c and returns the status
// and the stream's chunks.
func chatStream(t *testing.T, c *http.Client, base, body string) (int, []map[string]any) {
	t.Helper()
	resp, err := c.Post(base+"/api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var chunks []map[string]any
	for line := range strings.Lines(string(raw)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		var c map[string]any
		if ok && json.Unmarshal([]byte(data), &c) == nil {
			chunks = append(chunks, c)
		}
	}
	return resp.StatusCode, chunks
}

// TestOwnerAfterRestart: a chat that waits for an approval, and who owns
// it, outlive a restart on the same SQLite file: the same browser (its
// cookie) loads the chat again, sees the approval, approves it, and the
// turn ends with the tool run once; another browser is refused (403).
func TestOwnerAfterRestart(t *testing.T) {
	leaktest.Check(t)
	db := filepath.Join(t.TempDir(), "aisdk.db")
	h1 := newTestServerOn(t, db)
	alice, bob := newBrowserClient(t, h1.ts), newBrowserClient(t, h1.ts)

	status, chunks := chatStream(t, alice, h1.ts.URL, `{"id":"chat-r","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}]}`)
	require.Equal(t, http.StatusOK, status)
	var approvalID string
	for _, c := range chunks {
		if c["type"] == "tool-approval-request" {
			approvalID = c["approvalId"].(string)
		}
	}
	require.NotEmpty(t, approvalID, "the turn waits for the approval: %v", chunks)
	h1.close() // the waiting turn is suspended in the file

	// The cookie jars hold the cookies by host: 127.0.0.1 again, on
	// another port.
	h2 := newTestServerOn(t, db)
	get := func(c *http.Client, path string) (int, string) {
		t.Helper()
		resp, err := c.Get(h2.ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get(bob, "/api/chat/chat-r/messages")
	assert.Equal(t, http.StatusForbidden, status, body)
	status, body = get(alice, "/api/chat/chat-r/messages")
	require.Equal(t, http.StatusOK, status, body)
	var msgs []aisdk.UIMessage
	require.NoError(t, json.Unmarshal([]byte(body), &msgs))
	require.Len(t, msgs, 2, body)
	assert.Equal(t, "what is the weather in Lima", msgs[0].Parts[0].Text)
	last := msgs[1]
	require.Equal(t, "assistant", last.Role)
	assert.Equal(t, map[string]any{"status": "waiting"}, last.Metadata["planround"])
	var tool aisdk.UIPart
	for _, p := range last.Parts {
		if p.Type == "dynamic-tool" {
			tool = p
		}
	}
	require.Equal(t, "approval-requested", tool.State, body)
	require.NotNil(t, tool.Approval)
	assert.Equal(t, approvalID, tool.Approval.ID, "the same approval, answerable")
	assert.JSONEq(t, `{"city":"Lima"}`, string(tool.Input))

	// Bob cannot answer it; Alice approves the part she loaded.
	yes := true
	tool.State, tool.Approval.Approved = "approval-responded", &yes
	last.Parts = []aisdk.UIPart{tool}
	answer, err := json.Marshal(map[string]any{"id": "chat-r", "trigger": "submit-message", "messages": []any{msgs[0], last}})
	require.NoError(t, err)
	status, _ = chatStream(t, bob, h2.ts.URL, string(answer))
	assert.Equal(t, http.StatusForbidden, status)
	status, chunks = chatStream(t, alice, h2.ts.URL, string(answer))
	require.Equal(t, http.StatusOK, status)
	var output, finish any
	for _, c := range chunks {
		switch c["type"] {
		case "tool-output-available":
			output = c["output"]
		case "finish":
			finish = c["finishReason"]
		}
	}
	assert.Equal(t, "sunny in Lima", output, "%v", chunks)
	assert.Equal(t, "stop", finish, "%v", chunks)
	assert.Equal(t, int32(1), h2.runs.Load(), "get_weather ran once, after the restart")
	assert.Zero(t, h1.runs.Load())

	// The claim and the decision's audit name Alice by a hash of her
	// cookie, never by the cookie, which would let whoever reads them act
	// as her.
	u, err := url.Parse(h2.ts.URL)
	require.NoError(t, err)
	var cookie string
	for _, c := range alice.Jar.Cookies(u) {
		if c.Name == ownerCookie {
			cookie = c.Value
		}
	}
	require.NotEmpty(t, cookie)
	owner, err := h2.srv.owner(t.Context(), "chat-r")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(owner, "browser:"), owner)
	assert.NotContains(t, owner, cookie)
	n := 0
	for d, err := range h2.srv.runner.Decisions(t.Context(), approval.DecisionQuery{SessionID: "chat-r"}) {
		require.NoError(t, err)
		assert.Equal(t, owner, d.Decision.By)
		n++
	}
	assert.Equal(t, 1, n, "one decision")
}
