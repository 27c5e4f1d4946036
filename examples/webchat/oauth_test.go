package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/oauthtest"
	"github.com/planround/planround/mcpclient"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newOAuthHarness starts an authorization server and the MCP server it
// protects, and a web chat whose model calls that server's whoami.
func newOAuthHarness(t *testing.T) (*harness, *oauthtest.Servers, *lockedBuffer) {
	t.Helper()
	as := oauthtest.Start(t, oauthtest.Options{OpenList: true})
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	logs := &lockedBuffer{}
	mc, err := mcpclient.New(t.Context(), []mcpclient.ServerConfig{{
		Name: "protected", URL: as.MCPURL, SkipApproval: true, DisabledTools: []string{"admin"},
		OAuth: &mcpclient.OAuthConfig{Scopes: []string{"read"}},
	}}, mcpclient.Options{
		Logger:           slog.New(slog.NewJSONHandler(logs, nil)),
		UserOf:           mcpUser,
		OAuthKey:         key,
		OAuthRedirectURL: "http://127.0.0.1:9/oauth/callback",
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mc.Close()) })
	model := toolModel(t, toolCall{"whoami", `{}`})
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: demo.Tools(), MCP: mc,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h, as, logs
}

// callbackURL follows an authorization URL at the authorization server as
// login and returns the web chat's callback URL it redirects to.
func callbackURL(t *testing.T, h *harness, authURL, login string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("login", login)
	u.RawQuery = q.Encode()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer noFollow.CloseIdleConnections()
	resp, err := noFollow.Get(u.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	return h.ts.URL + "/oauth/callback?" + loc.RawQuery, loc.Query()
}

// TestMCPOAuthConnect: a call to an OAuth-protected MCP server shows a
// connect_request card; the authorization server's redirect to
// /oauth/callback shows a page whose POST, with the owner cookie of the
// session's browser, completes it (another browser's is refused) and the
// waiting call goes on with the person's token. No token is in the events
// or the logs.
func TestMCPOAuthConnect(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	h, as, logs := newOAuthHarness(t)

	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	defer ev.close()
	h.chat(t, session, "who am I?")
	seen := ev.until(t, func(e sseEvent) bool {
		require.NotEqual(t, "run_done", e.name, "the run ended before the card: %s", e.data)
		return e.name == "" && e.chunk(t).Kind == agent.KindSide
	})
	var side struct {
		Side mcpclient.ConnectRequest `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &side))
	card := side.Side
	require.Equal(t, "connect_request", card.Type)
	require.Equal(t, "protected", card.Server)

	// The person follows the card's link; the authorization server sends
	// them back with a code.
	u, err := url.Parse(card.URL)
	require.NoError(t, err)
	assert.Equal(t, u.Host, card.Host)
	callback, form := callbackURL(t, h, card.URL, "alice-at-as")

	// The redirect comes without the owner cookie: a page, nothing done.
	stranger := h.newClient(t)
	resp, err := stranger.Get(callback)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	assert.Contains(t, string(page), `method="post"`)
	assert.Contains(t, string(page), `name="state"`)

	post := func(c *http.Client) (int, string) {
		resp, err := c.PostForm(h.ts.URL+"/oauth/callback", form)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := post(stranger)
	assert.Equal(t, http.StatusUnauthorized, status, body)
	status, body = post(h.newBrowser(t))
	assert.Equal(t, http.StatusForbidden, status, "another browser's POST: %s", body)
	status, body = post(h.client)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "Connected <b>protected</b>")
	status, _ = post(h.client)
	assert.Equal(t, http.StatusForbidden, status, "a replayed callback")

	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status, "%+v", done)
	var result string
	var all strings.Builder
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		all.Write(b)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Equal(t, "you are alice-at-as", result)
	issued := as.Issued()
	require.NotEmpty(t, issued)
	for _, tok := range issued {
		assert.NotContains(t, all.String(), tok, "a token in the events")
		assert.NotContains(t, logs.String(), tok, "a token in the logs")
	}
}

// -mcp-oauth-key takes 64 hex digits or a file holding them, and nothing
// else.
func TestReadOAuthKey(t *testing.T) {
	const hexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	key, err := readOAuthKey(hexKey)
	require.NoError(t, err)
	assert.Len(t, key, 32)
	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, []byte(hexKey+"\n"), 0o600))
	fromFile, err := readOAuthKey(file)
	require.NoError(t, err)
	assert.Equal(t, key, fromFile)
	key, err = readOAuthKey("")
	assert.NoError(t, err)
	assert.Nil(t, key)
	require.NoError(t, os.WriteFile(file, []byte("short"), 0o600))
	for _, v := range []string{"nonsense", file, hexKey[:62]} {
		_, err := readOAuthKey(v)
		assert.Error(t, err, v)
	}
}

// With an access token, the authorization server's redirect (which comes
// without the token's SameSite cookie) reaches the callback's page; its
// POST, and every other request, still need the token.
func TestOAuthCallbackWithToken(t *testing.T) {
	var reached []string
	h := requireToken("a-token-of-16-chars-or-more", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Path)
	}))
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/oauth/callback?state=s&code=c", nil),
		httptest.NewRequest(http.MethodPost, "/oauth/callback", strings.NewReader("state=s&code=c")),
		httptest.NewRequest(http.MethodGet, "/api/sessions", nil),
	} {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	assert.Equal(t, []string{"GET /oauth/callback"}, reached)
}

// TestBrowserMCPOAuth: the connect card in the page, a "Connect <server>"
// link to the authorization server in a new tab with its host shown; the
// callback's page, in the same browser, completes the authorization with
// its button, and the waiting call's result comes to the card.
func TestBrowserMCPOAuth(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	h, as, _ := newOAuthHarness(t)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "who am I?")
	p.Click("#send")
	p.WaitFor("the connect card", `!!document.querySelector('.side.connect a.connect-button')`)
	var card struct{ Text, Href, Host, Target, Rel string }
	require.NoError(t, p.Eval(`(() => { const a = document.querySelector('.side.connect a.connect-button');
		return {Text: a.textContent, Href: a.href, Target: a.target, Rel: a.rel, Host: document.querySelector('.side.connect .connect-host').textContent}; })()`, &card))
	asURL, err := url.Parse(as.AuthURL)
	require.NoError(t, err)
	assert.Equal(t, "Connect protected", card.Text)
	assert.Equal(t, "opens "+asURL.Host, card.Host)
	assert.Equal(t, "_blank", card.Target)
	assert.Contains(t, card.Rel, "noopener")
	assert.True(t, strings.HasPrefix(card.Href, as.AuthURL+"/authorize?"), card.Href)
	p.Screenshot(filepath.Join(t.ArtifactDir(), "connect-card.png"))

	callback, _ := callbackURL(t, h, card.Href, "alice-at-as")
	p2 := b.NewPage(800, 600)
	p2.Navigate(callback)
	p2.WaitFor("the callback's button", `!!document.querySelector('form button[type=submit]')`)
	p2.Click(`form button[type=submit]`)
	p2.WaitFor("the connected page", `document.body.innerText.includes('Connected protected')`)
	p.WaitFor("the call's result", `[...document.querySelectorAll('#messages .card[data-tool="whoami"]')].some(c => c.textContent.includes('you are alice-at-as'))`)
	assert.Empty(t, b.PageErrors())
}
