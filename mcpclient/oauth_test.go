package mcpclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/oauthtest"
	"github.com/planround/planround/internal/oteltest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
)

type testUserKey struct{}

func testUser(ctx context.Context) string {
	s, _ := ctx.Value(testUserKey{}).(string)
	return s
}

// syncBuffer is a log destination shared by the replicas.
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

// oauthWorld is an authorization server and its MCP server, a store, and
// what the test collects to look for tokens in.
type oauthWorld struct {
	t     *testing.T
	srv   *oauthtest.Servers
	kv    memory.KV   // replica 0's view of the store
	kvs   []memory.KV // the views replicas take in turn
	n     int         // replicas made
	key   []byte
	logs  *syncBuffer
	tp    *oteltest.TracerProvider
	model *agenttest.Server

	mu     sync.Mutex
	chunks []string // the JSON of every chunk of every run
	errs   []string
}

func newOAuthWorld(t *testing.T, kvs []memory.KV, opts ...oauthtest.Options) *oauthWorld {
	o := oauthtest.Options{OpenList: true}
	if len(opts) > 0 {
		o = opts[0]
	}
	w := &oauthWorld{t: t, srv: oauthtest.Start(t, o), kv: kvs[0], kvs: kvs, logs: &syncBuffer{}}
	w.key = make([]byte, 32)
	_, _ = rand.Read(w.key)
	w.tp = &oteltest.TracerProvider{}
	w.model = agenttest.NewServer()
	t.Cleanup(w.model.Close)
	return w
}

func (w *oauthWorld) config() ServerConfig {
	return ServerConfig{Name: "protected", URL: w.srv.MCPURL, SkipApproval: true, OAuth: &OAuthConfig{Scopes: []string{"read"}}}
}

func (w *oauthWorld) options() Options {
	kv := w.kvs[w.n%len(w.kvs)]
	w.n++
	return Options{
		Logger:           slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		UserOf:           testUser,
		KV:               kv,
		OAuthKey:         w.key,
		OAuthRedirectURL: "http://127.0.0.1:9/oauth/callback",
		OAuthWait:        30 * time.Second,
	}
}

// replica is a Client on the shared store, with an agent of its tools.
func (w *oauthWorld) replica() (*Client, *agent.Agent) {
	c := newClient(w.t, w.options(), w.config())
	reg, err := agent.NewToolRegistry()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		w.t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL: w.model.URL(), HTTPClient: w.model.Client(), Model: "m", Tools: reg,
		DisablePlanning: true, TracerProvider: w.tp,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return c, a
}

// run has the model call tool as user on a; onCard answers each connect
// card. It returns the call's result and the cards shown.
func (w *oauthWorld) run(a *agent.Agent, user, tool string, onCard func(*ConnectRequest)) (string, []*ConnectRequest) {
	w.t.Helper()
	w.model.Enqueue(
		agenttest.Reply().Call(0, "call_1", tool, `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), testUserKey{}, user), 60*time.Second)
	defer cancel()
	var result string
	var cards []*ConnectRequest
	for c, err := range a.Run(ctx, agent.Input{Message: "go"}) {
		if err != nil {
			w.t.Fatalf("run: %v", err)
		}
		b, _ := json.Marshal(c)
		w.mu.Lock()
		w.chunks = append(w.chunks, string(b))
		w.mu.Unlock()
		if c.Kind == agent.KindSide {
			card, ok := c.Side.(*ConnectRequest)
			if !ok {
				w.t.Fatalf("side chunk %T, want *ConnectRequest", c.Side)
			}
			cards = append(cards, card)
			onCard(card)
		}
		if c.Tool != nil && (c.Tool.State == agent.StateResult || c.Tool.State == agent.StateRejected) {
			result = c.Tool.Result + c.Tool.Reason
		}
	}
	return result, cards
}

// authorize follows a card's URL at the authorization server as login and
// returns the query the server redirected to the callback with.
func (w *oauthWorld) authorize(card *ConnectRequest, login string) url.Values {
	w.t.Helper()
	u, err := url.Parse(card.URL)
	if err != nil {
		w.t.Fatal(err)
	}
	if want, _ := url.Parse(w.srv.AuthURL); card.Host != want.Host || u.Host != want.Host {
		w.t.Errorf("card host %q, URL host %q; want the authorization server's %q", card.Host, u.Host, want.Host)
	}
	q := u.Query()
	q.Set("login", login)
	u.RawQuery = q.Encode()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(u.String())
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		w.t.Fatalf("authorize: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	if loc.Path != "/oauth/callback" {
		w.t.Fatalf("redirected to %s, want the callback", loc)
	}
	return loc.Query()
}

// callback hands q to c's OAuthCallback as user.
func (w *oauthWorld) callback(c *Client, user string, q url.Values) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.OAuthCallback(ctx, user, q)
	if err != nil {
		w.mu.Lock()
		w.errs = append(w.errs, err.Error())
		w.mu.Unlock()
	}
	return err
}

// noTokens fails when a token the authorization server issued is in a log
// record, a chunk, an error, a span or a stored value.
func (w *oauthWorld) noTokens(storedKeys ...string) {
	w.t.Helper()
	w.mu.Lock()
	where := map[string]string{
		"logs":   w.logs.String(),
		"chunks": strings.Join(w.chunks, "\n"),
		"errors": strings.Join(w.errs, "\n"),
	}
	w.mu.Unlock()
	var spans strings.Builder
	for _, s := range w.tp.Ended() {
		fmt.Fprintf(&spans, "%s %v %v %v\n", s.Name, s.Attributes, s.Events, s.Status)
	}
	where["spans"] = spans.String()
	var stored strings.Builder
	for _, k := range storedKeys {
		v, err := w.kv.GetValue(context.Background(), oauthNamespace, k)
		if err != nil {
			w.t.Errorf("stored %s: %v", k, err)
		}
		stored.Write(v)
	}
	where["store"] = stored.String()
	issued := w.srv.Issued()
	if len(issued) == 0 {
		w.t.Fatal("no token was issued")
	}
	if where["logs"] == "" || where["store"] == "" || w.model.Requests() != nil && (where["chunks"] == "" || where["spans"] == "") {
		w.t.Fatalf("nothing to look in: %v", where)
	}
	for _, tok := range issued {
		for name, text := range where {
			if strings.Contains(text, tok) {
				t := tok[:6]
				w.t.Errorf("a token (%s...) is in the %s", t, name)
			}
		}
	}
}

// TestOAuthConnectOnAnotherReplica: a user's first call shows the connect
// card on replica A, the callback is delivered to replica B, and A's call
// goes on with the user's token; another user gets a card of their own;
// an access token the server no longer takes is refreshed without a card;
// a tool that needs a larger scope asks again (step up). No token shows in
// a log, chunk, error, span or stored value.
func TestOAuthConnectOnAnotherReplica(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	testOAuthReplicas(t, new(memory.MemStore))
}

// The same with the replicas on two handles of one SQLite file.
func TestOAuthConnectOnAnotherReplicaSQLite(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	path := filepath.Join(t.TempDir(), "db")
	var kvs []memory.KV
	for range 2 {
		st, err := sqlitestore.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		kvs = append(kvs, st)
	}
	testOAuthReplicas(t, kvs...)
}

// The same with the replicas on two pools of one PostgreSQL schema.
func TestOAuthConnectOnAnotherReplicaPostgres(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url, "mcpclient_oauth_")
	var kvs []memory.KV
	for range 2 {
		st, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		kvs = append(kvs, st)
	}
	testOAuthReplicas(t, kvs...)
}

func testOAuthReplicas(t *testing.T, kvs ...memory.KV) {
	w := newOAuthWorld(t, kvs)
	ca, a := w.replica()
	cb, b := w.replica()

	got, cards := w.run(a, "alice", "whoami", func(card *ConnectRequest) {
		if card.Type != "connect_request" || card.Server != "protected" {
			t.Errorf("card = %+v", card)
		}
		if err := w.callback(cb, "alice", w.authorize(card, "alice-at-as")); err != nil {
			t.Errorf("callback on B: %v", err)
		}
	})
	if got != "you are alice-at-as" || len(cards) != 1 {
		t.Fatalf("alice's call = %q with %d cards; want her account, one card", got, len(cards))
	}
	seen := w.srv.Seen()
	if len(seen) != 1 {
		t.Fatalf("the server saw %d calls, want 1", len(seen))
	}
	if login, ok := w.srv.LoginOf(seen[0]); !ok || login != "alice-at-as" {
		t.Errorf("the server saw a token of %q (valid %v), want alice's", login, ok)
	}

	// Alice again, on B: her token, no card.
	if got, cards := w.run(b, "alice", "whoami", func(*ConnectRequest) { t.Error("a card for a connected user") }); got != "you are alice-at-as" || len(cards) != 0 {
		t.Errorf("alice on B = %q", got)
	}

	// Bob has a card of his own; his callback comes to A this time.
	got, cards = w.run(a, "bob", "whoami", func(card *ConnectRequest) {
		if err := w.callback(ca, "bob", w.authorize(card, "bob-at-as")); err != nil {
			t.Errorf("callback on A: %v", err)
		}
	})
	if got != "you are bob-at-as" || len(cards) != 1 {
		t.Errorf("bob's call = %q with %d cards", got, len(cards))
	}

	// The access tokens stop working: refreshed without a card, once.
	w.srv.ExpireAccess()
	if got, cards := w.run(a, "alice", "whoami", func(*ConnectRequest) { t.Error("a card for an expired token") }); got != "you are alice-at-as" || len(cards) != 0 {
		t.Errorf("alice after expiry = %q", got)
	}
	if n := w.srv.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	// B's connection has the old token; it reads the refreshed one.
	if got, _ := w.run(b, "alice", "whoami", func(*ConnectRequest) { t.Error("a card on B after A refreshed") }); got != "you are alice-at-as" {
		t.Errorf("alice on B after the refresh = %q", got)
	}
	if n := w.srv.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1 (B uses A's)", n)
	}

	// Step up: admin needs a scope alice has not granted.
	got, cards = w.run(b, "alice", "admin", func(card *ConnectRequest) {
		if !strings.Contains(card.URL, "admin") {
			t.Errorf("the step-up card asks for %v, want admin too", card.Scopes)
		}
		if err := w.callback(ca, "alice", w.authorize(card, "alice-at-as")); err != nil {
			t.Errorf("step-up callback: %v", err)
		}
	})
	if got != "admin for alice-at-as" || len(cards) != 1 {
		t.Errorf("admin = %q with %d cards; want one step-up card", got, len(cards))
	}

	w.noTokens(tokenKey("protected", "alice"), tokenKey("protected", "bob"))
}

// TestOAuthServerListsOnlyToUsers: a server that refuses to list its tools
// without a token is offered as a tool that connects it; the person's
// connection lists the tools, which the Client then offers, and which a
// replica started later offers at once (the list is kept in the store).
func TestOAuthServerListsOnlyToUsers(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	w := newOAuthWorld(t, []memory.KV{new(memory.MemStore)}, oauthtest.Options{})
	ca, a := w.replica()
	names := func(c *Client) string {
		var out []string
		for _, tl := range c.Tools() {
			out = append(out, tl.Definition().Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(ca); got != "connect_protected" {
		t.Fatalf("tools before anyone connected = %q, want connect_protected", got)
	}
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Register(reg); err != nil {
		t.Fatal(err)
	}
	got, cards := w.run(a, "alice", "connect_protected", func(card *ConnectRequest) {
		if err := w.callback(ca, "alice", w.authorize(card, "alice-at-as")); err != nil {
			t.Errorf("callback: %v", err)
		}
	})
	if len(cards) != 1 || !strings.Contains(got, "Connected to protected") || !strings.Contains(got, "whoami") {
		t.Errorf("connect = %q with %d cards", got, len(cards))
	}
	if got := names(ca); got != "admin,whoami" {
		t.Errorf("tools after alice connected = %q", got)
	}
	if got := strings.Join(reg.Names(), ","); got != "admin,whoami" {
		t.Errorf("the registry Register filled holds %q after alice connected, want admin,whoami", got)
	}
	cc, c := w.replica()
	if got := names(cc); got != "admin,whoami" {
		t.Errorf("tools of a replica started later = %q", got)
	}
	if got, cards := w.run(c, "alice", "whoami", func(*ConnectRequest) { t.Error("a card for a connected user") }); got != "you are alice-at-as" || len(cards) != 0 {
		t.Errorf("whoami on the later replica = %q", got)
	}
	w.noTokens(tokenKey("protected", "alice"), toolsKey(cc.entries[0]))
}

// TestOAuthRefusals: callbacks with a state that is unknown, another
// user's or used are refused; a client without a key is not made; a call
// outside a run cannot show a card and says so.
func TestOAuthRefusals(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	w := newOAuthWorld(t, []memory.KV{new(memory.MemStore)})
	c, _ := w.replica()
	e := c.entries[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := w.callback(c, "alice", url.Values{"state": {"made-up"}, "code": {"x"}}); !errors.Is(err, ErrOAuthState) {
		t.Errorf("unknown state: %v", err)
	}
	if err := w.callback(c, "alice", url.Values{"code": {"x"}}); !errors.Is(err, ErrOAuthState) {
		t.Errorf("no state: %v", err)
	}

	card, err := c.oauth.start(ctx, e, "alice", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	q := w.authorize(card, "alice-at-as")
	if err := w.callback(c, "mallory", q); !errors.Is(err, ErrOAuthState) {
		t.Errorf("another user's state: %v", err)
	}
	if err := w.callback(c, "alice", q); err != nil {
		t.Fatalf("alice's own callback after mallory's try: %v", err)
	}
	if err := w.callback(c, "alice", q); !errors.Is(err, ErrOAuthState) {
		t.Errorf("replayed callback: %v", err)
	}

	// A code that does not fit the verifier (another flow's) is refused by
	// the authorization server, and the error holds no secret.
	card2, err := c.oauth.start(ctx, e, "alice", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	card3, err := c.oauth.start(ctx, e, "alice", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	q2, q3 := w.authorize(card2, "alice-at-as"), w.authorize(card3, "alice-at-as")
	q2.Set("code", q3.Get("code"))
	if err := w.callback(c, "alice", q2); err == nil || errors.Is(err, ErrOAuthState) {
		t.Errorf("a code of another flow: %v, want the token request refused", err)
	}
	if err := w.callback(c, "alice", url.Values{"state": {q3.Get("state")}, "error": {"access_denied\n<b>"}}); err == nil || !strings.Contains(err.Error(), "access_denied") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a refusal: %v", err)
	}
	// A response that names another issuer (a mix-up) is refused.
	card4, err := c.oauth.start(ctx, e, "alice", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	q4 := w.authorize(card4, "alice-at-as")
	q4.Set("iss", "https://evil.example")
	if err := w.callback(c, "alice", q4); err == nil || !strings.Contains(err.Error(), "another issuer") {
		t.Errorf("another issuer: %v", err)
	}

	// Outside an agent's run there is no card to show.
	other := newClient(t, Options{UserOf: testUser, KV: new(memory.MemStore), OAuthKey: w.key, OAuthRedirectURL: "http://127.0.0.1:9/cb"}, w.config())
	_, err = run(t, tool(t, other, "whoami"), `{}`, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot show them the card") {
		t.Errorf("a call outside a run: %v", err)
	}

	// Configurations New refuses.
	for name, opts := range map[string]Options{
		"no key":       {OAuthRedirectURL: "http://127.0.0.1:9/cb"},
		"short key":    {OAuthRedirectURL: "http://127.0.0.1:9/cb", OAuthKey: []byte("short")},
		"no redirect":  {OAuthKey: w.key},
		"bad redirect": {OAuthKey: w.key, OAuthRedirectURL: "/cb"},
	} {
		if c, err := New(ctx, []ServerConfig{w.config()}, opts); err == nil {
			c.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
	cfg := w.config()
	cfg.Transport = TransportSSE
	if c, err := New(ctx, []ServerConfig{cfg}, w.options()); err == nil || !strings.Contains(err.Error(), "http servers only") {
		if c != nil {
			c.Close()
		}
		t.Errorf("oauth over sse: %v", err)
	}

	// A replica with another key does not read the tokens: it asks again.
	var tok struct{}
	otherKey := Options{OAuthKey: make([]byte, 32), OAuthRedirectURL: "http://127.0.0.1:9/cb", KV: w.kv}
	s2, err := newOAuthStore(otherKey, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := s2.get(ctx, tokenKey("protected", "alice"), &tok); found || !errors.Is(err, errSealed) {
		t.Errorf("read with another key: found %v, %v", found, err)
	}
	w.noTokens(tokenKey("protected", "alice"))
}

func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		`Bearer error="insufficient_scope", scope="read admin", resource_metadata="https://x/.well-known/oauth-protected-resource"`,
		`Bearer realm="x",error=invalid_token`,
		`Basic realm="x"`,
		`Bearer scope="a\"b`,
		`Bearer ,,,=,"`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		p := parseChallenge(h)
		if len(p) > 16 {
			t.Fatalf("%d parameters", len(p))
		}
		for k := range p {
			if k == "" {
				t.Fatal("an empty name")
			}
		}
	})
}

func FuzzOAuthCallbackQuery(f *testing.F) {
	s, err := newOAuthStore(Options{InsecureOAuthPlaintext: true, OAuthRedirectURL: "http://127.0.0.1:9/cb"}, "x")
	if err != nil {
		f.Fatal(err)
	}
	c := &Client{oauth: s}
	for _, q := range []string{"state=abc&code=x", "error=access_denied&state=", "state=" + strings.Repeat("a", 600), "%zz"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		if _, err := c.OAuthCallback(context.Background(), "u", q); !errors.Is(err, ErrOAuthState) {
			t.Fatalf("OAuthCallback(%q) = %v, want ErrOAuthState", raw, err)
		}
		_ = errorCode(raw)
	})
}

// The configuration file's "oauth" entry, and the servers it may not be on.
func TestOAuthConfigFile(t *testing.T) {
	cfgs, err := ParseConfig([]byte(`{"mcpServers": {"gh": {"url": "https://example.com/mcp",
		"oauth": {"client_id": "abc", "client_secret": "${GH_SECRET}", "scopes": ["repo", "read:org"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := cfgs[0].OAuth
	if o == nil || o.ClientID != "abc" || o.ClientSecret != "${GH_SECRET}" || strings.Join(o.Scopes, " ") != "repo read:org" {
		t.Fatalf("oauth = %+v", o)
	}
	t.Setenv("GH_SECRET", "s3cret-value")
	ex, err := expand(cfgs[0], os.LookupEnv)
	if err != nil || ex.OAuth.ClientSecret != "s3cret-value" || !slices.Contains(ex.secrets, "s3cret-value") {
		t.Errorf("expanded: %+v, %v; want the secret expanded and redacted", ex.OAuth, err)
	}
	for _, bad := range []string{
		`{"mcpServers": {"x": {"command": "x", "oauth": {}}}}`,
		`{"mcpServers": {"x": {"url": "https://example.com/sse", "type": "sse", "oauth": {}}}}`,
		`{"mcpServers": {"x": {"url": "https://example.com/mcp", "isolation": "per_conversation", "oauth": {}}}}`,
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) succeeded", bad)
		}
	}
}

// The connect card shows the authorization endpoint it leads to as a
// browser's address bar would: a look-alike international name as
// punycode, in the card's host and in its URL. An endpoint with a
// character a person cannot see in its host gets no card: the call says
// why.
func TestOAuthCardHost(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint string
		host           string // the card's host; "" when no card may be shown
	}{
		// "аpple" with a Cyrillic а.
		{"look-alike", "https://\u0430pple.example:8443/authorize", "xn--pple-43d.example:8443"},
		{"zero-width space", "https://exa\u200bmple.com/authorize", ""},
		{"right-to-left override", "https://example.com\u202e.evil/authorize", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOAuthWorld(t, []memory.KV{new(memory.MemStore)}, oauthtest.Options{OpenList: true, AuthorizeEndpoint: tc.endpoint})
			_, a := w.replica()
			w.model.Enqueue(
				agenttest.Reply().Call(0, "call_1", "whoami", `{}`).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"),
			)
			ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), testUserKey{}, "alice"), 60*time.Second)
			defer cancel()
			var card *ConnectRequest
			var result string
			for c, err := range a.Run(ctx, agent.Input{Message: "go"}) {
				require.NoError(t, err)
				if c.Kind == agent.KindSide {
					card, _ = c.Side.(*ConnectRequest)
					break // the person never connects: the run ends here
				}
				if c.Tool != nil && (c.Tool.State == agent.StateResult || c.Tool.State == agent.StateRejected) {
					result = c.Tool.Result + c.Tool.Reason
				}
			}
			if tc.host == "" {
				require.Nil(t, card, "a card for %q", tc.endpoint)
				require.Contains(t, result, "authorization endpoint cannot be shown to a person")
				return
			}
			require.NotNil(t, card, "no card; the call said %q", result)
			require.Equal(t, tc.host, card.Host)
			u, err := url.Parse(card.URL)
			require.NoError(t, err)
			require.Equal(t, tc.host, u.Host, "the URL leads where the card says")
			require.Equal(t, "/authorize", u.Path)
			require.NotEmpty(t, u.Query().Get("code_challenge"), "the URL keeps its query: %s", card.URL)
		})
	}
}
