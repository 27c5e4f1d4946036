package mcpclient

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/weblink"
	"github.com/planround/planround/memory"
)

// OAuthConfig is how the client gets a user's authorization for a remote
// server (see [ServerConfig.OAuth] and the package documentation,
// "Authorization").
type OAuthConfig struct {
	// ClientID is the client's id at the server's authorization server,
	// when it was registered there beforehand. Empty means the client
	// registers itself (dynamic client registration) once, and keeps the
	// id it got in [Options.KV] for every replica.
	ClientID string `json:"client_id,omitempty"`
	// ClientSecret is the secret of a pre-registered confidential client;
	// write it as a reference such as ${GITHUB_CLIENT_SECRET}. It is
	// redacted like every secret of the configuration.
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes are the scopes asked for. A call the server refuses for want
	// of a scope (403 insufficient_scope) asks the person again, for these
	// and the scopes the server named.
	Scopes []string `json:"scopes,omitempty"`
}

// ConnectRequest is the side card a call shows (with [agent.ShowSide])
// when the server it calls needs the person to connect first: the host
// shows a "Connect <Server>" button that opens URL. Once the
// authorization server redirects to [Options.OAuthRedirectURL] and the
// host passes that request to [Client.OAuthCallback] (on any replica
// sharing [Options.KV]), the waiting call goes on.
type ConnectRequest struct {
	// Type is "connect_request".
	Type string `json:"type"`
	// Server is the name of the server in the configuration.
	Server string `json:"server"`
	// Host is the host of the authorization server, for the person to
	// see where the button leads, with its port: in ASCII, an
	// international name as punycode, as a browser's address bar shows
	// it.
	Host string `json:"host"`
	// URL is the authorization URL to open.
	URL string `json:"url"`
	// Scopes are the scopes asked for.
	Scopes []string `json:"scopes,omitempty"`
}

// The defaults and bounds of authorization.
const (
	// defaultOAuthWait is how long a call waits for the person to connect
	// when Options.OAuthWait is zero.
	defaultOAuthWait = 10 * time.Minute
	// oauthPoll is how often a waiting call reads the store for the token
	// a callback on another replica saved. A callback on the same replica
	// wakes it at once.
	oauthPoll = 500 * time.Millisecond
	// stateGrace is how long after the wait an authorization may still
	// complete: the token is kept for the user's next call.
	stateGrace = 10 * time.Minute
	// oauthNamespace is the namespace of everything of OAuth in Options.KV.
	oauthNamespace = "mcpclient.oauth"
	// oauthAttempts bounds the rounds of authorization of one call.
	oauthAttempts = 4
)

// oauthStore is what the servers of a Client that use OAuth share: the
// store, the sealing key and the calls waiting for a person.
type oauthStore struct {
	kv       memory.KV
	aead     cipher.AEAD // nil: values are stored in plain text
	redirect string
	wait     time.Duration
	userOf   func(context.Context) string
	hc       *http.Client // for the authorization server
	name     string       // the client's name, for registration

	mu      sync.Mutex
	waiters map[string]chan struct{} // by token key; closed when a callback here saved it

	refreshing sync.Map // token key → *sync.Mutex held while it is refreshed
}

func newOAuthStore(opts Options, name string) (*oauthStore, error) {
	if opts.OAuthRedirectURL == "" {
		return nil, errors.New("a server uses oauth, and Options.OAuthRedirectURL is empty")
	}
	if u, err := url.Parse(opts.OAuthRedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("Options.OAuthRedirectURL is not an absolute http or https URL")
	}
	s := &oauthStore{
		kv:       opts.KV,
		redirect: opts.OAuthRedirectURL,
		wait:     opts.OAuthWait,
		userOf:   opts.UserOf,
		hc:       &http.Client{Timeout: 30 * time.Second},
		name:     name,
		waiters:  make(map[string]chan struct{}),
	}
	if s.kv == nil {
		s.kv = new(memory.MemStore)
	}
	if s.wait <= 0 {
		s.wait = defaultOAuthWait
	}
	switch {
	case len(opts.OAuthKey) == 32:
		block, err := aes.NewCipher(opts.OAuthKey)
		if err != nil {
			return nil, err
		}
		if s.aead, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	case len(opts.OAuthKey) != 0:
		return nil, fmt.Errorf("Options.OAuthKey has %d bytes; it must have 32 (AES-256)", len(opts.OAuthKey))
	case !opts.InsecureOAuthPlaintext:
		return nil, errors.New("a server uses oauth, and there is no Options.OAuthKey to seal the tokens with (or InsecureOAuthPlaintext)")
	}
	return s, nil
}

// seal encrypts a value for key: the key is the additional data, so that a
// value copied under another key (another user's) does not open.
func (s *oauthStore) seal(key string, plain []byte) []byte {
	if s.aead == nil {
		return append([]byte{'p'}, plain...)
	}
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	out[0] = 'k'
	_, _ = rand.Read(out[1:])
	return s.aead.Seal(out, out[1:], plain, []byte(key))
}

var errSealed = errors.New("a stored value does not open with this key")

func (s *oauthStore) open(key string, sealed []byte) ([]byte, error) {
	switch {
	case len(sealed) > 0 && sealed[0] == 'p' && s.aead == nil:
		return sealed[1:], nil
	case len(sealed) > 1+12 && sealed[0] == 'k' && s.aead != nil:
		n := 1 + s.aead.NonceSize()
		out, err := s.aead.Open(nil, sealed[1:n], sealed[n:], []byte(key))
		if err != nil {
			return nil, errSealed
		}
		return out, nil
	}
	return nil, errSealed
}

// get reads and opens key's value into v; found is false when it has none.
func (s *oauthStore) get(ctx context.Context, key string, v any) (raw []byte, found bool, err error) {
	raw, err = s.kv.GetValue(ctx, oauthNamespace, key)
	if errors.Is(err, memory.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	plain, err := s.open(key, raw)
	if err != nil {
		return raw, false, err
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return raw, false, errors.New("a stored value is not valid")
	}
	return raw, true, nil
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The keys in the namespace: hashes, so that no name is too long and no
// state is kept in clear.
func tokenKey(server, user string) string { return "token/" + digest(server, user) }
func (s *oauthStore) clientKey(e *serverEntry) string {
	return "client/" + digest(e.cfg.Name, e.cfg.URL, s.redirect)
}
func stateKey(state string) string { return "state/" + digest(state) }

func (s *oauthStore) user(ctx context.Context) string {
	if s.userOf == nil {
		return ""
	}
	return s.userOf(ctx)
}

// kvTokenStore is mcp-go's TokenStore for one user of one server, in the
// KV, sealed. A save after a read replaces only the value read: when
// another replica refreshed the token meanwhile, its token stays.
type kvTokenStore struct {
	s   *oauthStore
	key string

	mu   sync.Mutex
	last []byte // the value last read or written
}

func (t *kvTokenStore) GetToken(ctx context.Context) (*transport.Token, error) {
	var tok transport.Token
	raw, found, err := t.s.get(ctx, t.key, &tok)
	if errors.Is(err, errSealed) || (err == nil && !found) {
		return nil, transport.ErrNoToken
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.last = raw
	t.mu.Unlock()
	return &tok, nil
}

func (t *kvTokenStore) SaveToken(ctx context.Context, tok *transport.Token) error {
	plain, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	sealed := t.s.seal(t.key, plain)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		err = t.s.kv.PutValue(ctx, oauthNamespace, t.key, sealed)
	} else {
		// Lost to another replica's refresh: its token is as good.
		_, err = t.s.kv.SwapValue(ctx, oauthNamespace, t.key, t.last, sealed)
	}
	if err == nil {
		t.last = sealed
	}
	return err
}

// clientCreds are the client's credentials at a server's authorization
// server.
type clientCreds struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	Method string `json:"method,omitempty"`
}

// handler is an mcp-go OAuth handler for the server, with PKCE.
func (s *oauthStore) handler(e *serverEntry, creds clientCreds, store transport.TokenStore, scopes []string) *transport.OAuthHandler {
	h := transport.NewOAuthHandler(s.config(e, creds, store, scopes))
	h.SetBaseURL(e.cfg.URL)
	return h
}

func (s *oauthStore) config(e *serverEntry, creds clientCreds, store transport.TokenStore, scopes []string) transport.OAuthConfig {
	return transport.OAuthConfig{
		ClientID:                creds.ID,
		ClientSecret:            creds.Secret,
		TokenEndpointAuthMethod: creds.Method,
		RedirectURI:             s.redirect,
		Scopes:                  scopes,
		TokenStore:              store,
		PKCEEnabled:             true,
		HTTPClient:              s.hc,
	}
}

// client returns the client's credentials for e's authorization server:
// the configured ones, or those of a registration, made once for all
// replicas (the first to store its registration wins).
func (s *oauthStore) client(ctx context.Context, e *serverEntry) (clientCreds, error) {
	if id := e.cfg.OAuth.ClientID; id != "" {
		return clientCreds{ID: id, Secret: e.cfg.OAuth.ClientSecret}, nil
	}
	key := s.clientKey(e)
	var creds clientCreds
	if _, found, err := s.get(ctx, key, &creds); err != nil && !errors.Is(err, errSealed) {
		return creds, err
	} else if found {
		return creds, nil
	}
	h := s.handler(e, clientCreds{}, nil, e.cfg.OAuth.Scopes)
	if err := h.RegisterClient(ctx, s.name); err != nil {
		return creds, fmt.Errorf("registering the client at the authorization server: %w", err)
	}
	creds = clientCreds{ID: h.GetClientID(), Secret: h.GetClientSecret(), Method: h.GetTokenEndpointAuthMethod()}
	plain, _ := json.Marshal(creds)
	if ok, err := s.kv.SwapValue(ctx, oauthNamespace, key, nil, s.seal(key, plain)); err != nil {
		return creds, err
	} else if !ok {
		// Another replica registered first: use its registration.
		if _, found, err := s.get(ctx, key, &creds); err != nil || !found {
			return creds, errors.Join(errors.New("reading the client registration"), err)
		}
	}
	e.log.Info("client registered at the authorization server")
	return creds, nil
}

// pending is an authorization under way, by its state.
type pending struct {
	User     string    `json:"user"`
	Server   string    `json:"server"`
	Verifier string    `json:"verifier"`
	Scopes   []string  `json:"scopes,omitempty"`
	Expires  time.Time `json:"expires"`
}

// used marks a state whose callback came: a second one is refused.
var used = []byte("used")

// oauthUserKey carries the user a per-user connection is for, from a call
// to the start of its connection.
type oauthUserKey struct{}

// userCall runs a tool of an OAuth server with the user's connection,
// asking the person to connect first when there is no token (or it lacks
// a scope the server wants), and refreshing the token when the server
// refuses it.
func (e *serverEntry) userCall(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	s := e.oauth
	user := s.user(ctx)
	key := tokenKey(e.cfg.Name, user)
	scopes := e.cfg.OAuth.Scopes
	var ask bool // the person must connect (again)
	for range oauthAttempts {
		var tok transport.Token
		raw, found, err := s.get(ctx, key, &tok)
		if err != nil && !errors.Is(err, errSealed) {
			return "", err
		}
		if !found || ask {
			if err := s.authorize(ctx, e, user, scopes, raw); err != nil {
				return "", err
			}
			ask = false
			continue
		}
		inst, release, err := e.sb.get(context.WithValue(ctx, oauthUserKey{}, user), "user:"+user)
		if err == nil && tool == "" { // connectCall: connected is all
			release()
			return "", nil
		}
		if err == nil {
			out, cerr := inst.call(ctx, tool, args, progress)
			release()
			if cerr == nil {
				return out, nil
			}
			err = cerr
			if errors.Is(err, errLost) || errors.Is(err, errNotSent) {
				e.sb.discard("user:"+user, inst)
			}
			if c, ok := inst.(*conn); ok {
				if more := c.wantScope(); more != nil {
					// Step up: the person is asked for the larger scope.
					scopes = union(scopes, more)
					ask = true
					continue
				}
			}
			if errors.Is(err, errNotSent) {
				continue
			}
		}
		if !authRequired(err) {
			return "", err
		}
		// The server refused the token: refreshed, or else the person
		// connects again.
		if !s.refresh(ctx, e, key, raw, &tok, scopes) {
			ask = true
		}
	}
	return "", errors.New("the server kept refusing the authorization")
}

// refresh gets a fresh access token with the refresh token of tok (raw as
// stored), unless another replica did already. It reports whether there is
// a new token to try.
func (s *oauthStore) refresh(ctx context.Context, e *serverEntry, key string, raw []byte, tok *transport.Token, scopes []string) bool {
	changed := func() bool {
		cur, err := s.kv.GetValue(ctx, oauthNamespace, key)
		return err == nil && !bytes.Equal(cur, raw)
	}
	// One refresh at a time per token in this process: a refresh token
	// may be good for one use, and a server may revoke the tokens of one
	// sent twice.
	mu, _ := s.refreshing.LoadOrStore(key, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if changed() {
		return true
	}
	if tok.RefreshToken == "" {
		return false
	}
	creds, err := s.client(ctx, e)
	if err != nil {
		e.log.Warn("refreshing a token failed", "err", err)
		return false
	}
	store := &kvTokenStore{s: s, key: key, last: raw}
	if _, err := s.handler(e, creds, store, scopes).RefreshToken(ctx, tok.RefreshToken); err != nil {
		if changed() { // another replica used the refresh token first
			return true
		}
		e.log.Info("refreshing a token failed; the person is asked to connect again", "err", scrub(err, tok.RefreshToken, tok.AccessToken))
		return false
	}
	e.log.Info("token refreshed")
	return true
}

// authorize shows the person the card to connect e and waits until a
// callback (on any replica) saved a token other than before.
func (s *oauthStore) authorize(ctx context.Context, e *serverEntry, user string, scopes []string, before []byte) error {
	card, err := s.start(ctx, e, user, scopes)
	if err != nil {
		return err
	}
	if !agent.ShowSide(ctx, card) {
		return fmt.Errorf("the person must connect to %s at %s first, and this call cannot show them the card (it runs outside an agent's run)", e.cfg.Name, card.Host)
	}
	e.log.Info("the person is asked to connect", "host", card.Host)

	ctx, cancel := context.WithTimeoutCause(ctx, s.wait, fmt.Errorf("nobody connected within %s", s.wait))
	defer cancel()
	key := tokenKey(e.cfg.Name, user)
	tick := time.NewTicker(oauthPoll)
	defer tick.Stop()
	for {
		wake := s.waiter(key)
		cur, err := s.kv.GetValue(ctx, oauthNamespace, key)
		if err == nil && !bytes.Equal(cur, before) {
			return nil
		}
		if err != nil && !errors.Is(err, memory.ErrNotFound) {
			return err
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the person to connect to %s: %w", e.cfg.Name, context.Cause(ctx))
		}
	}
}

// start begins an authorization of e for user: it keeps the state and the
// PKCE verifier in the store and returns the card to show.
func (s *oauthStore) start(ctx context.Context, e *serverEntry, user string, scopes []string) (*ConnectRequest, error) {
	creds, err := s.client(ctx, e)
	if err != nil {
		return nil, err
	}
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return nil, err
	}
	state, err := transport.GenerateState()
	if err != nil {
		return nil, err
	}
	authURL, err := s.handler(e, creds, nil, scopes).GetAuthorizationURL(ctx, state, transport.GenerateCodeChallenge(verifier))
	if err != nil {
		return nil, fmt.Errorf("discovering the authorization server: %w", err)
	}
	// The card shows the person where the button leads: the host as a
	// browser's address bar shows it (an international name as punycode),
	// the URL with nothing in it that reads as something it is not, as
	// for a URL-mode elicitation.
	link, _, err := weblink.Check(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization server's authorization endpoint cannot be shown to a person: %w", err)
	}
	u, err := url.Parse(link)
	if err != nil {
		return nil, fmt.Errorf("the authorization server's authorization endpoint: %w", err)
	}
	p := pending{User: user, Server: e.cfg.Name, Verifier: verifier, Scopes: scopes, Expires: time.Now().Add(s.wait + stateGrace)}
	plain, _ := json.Marshal(p)
	skey := stateKey(state)
	if err := s.kv.PutValue(ctx, oauthNamespace, skey, s.seal(skey, plain)); err != nil {
		return nil, err
	}
	return &ConnectRequest{Type: "connect_request", Server: e.cfg.Name, Host: u.Host, URL: link, Scopes: scopes}, nil
}

// waiter returns the channel closed when a callback on this replica saves
// the token of key.
func (s *oauthStore) waiter(key string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.waiters[key]
	if ch == nil {
		ch = make(chan struct{})
		s.waiters[key] = ch
	}
	return ch
}

func (s *oauthStore) wake(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.waiters[key]; ch != nil {
		close(ch)
		delete(s.waiters, key)
	}
}

// Errors of [Client.OAuthCallback].
var (
	// ErrOAuthState: the callback's state is unknown, used, expired, or
	// another user's.
	ErrOAuthState = errors.New("mcpclient: this authorization is unknown, used, expired or another user's")
)

// OAuthCallback completes an authorization a [ConnectRequest] card
// started: the host calls it with the query of the request that reached
// [Options.OAuthRedirectURL], and user, the person who made that request
// (as Options.UserOf names them). It checks that the state belongs to
// that user and was not used, exchanges the code (with the PKCE verifier
// kept since the card was shown), and stores the token; the call waiting
// for it, on this replica or another that shares Options.KV, goes on. It
// returns the name of the server connected.
//
// An error never holds a token. Errors for a state that does not fit wrap
// [ErrOAuthState].
func (c *Client) OAuthCallback(ctx context.Context, user string, query url.Values) (server string, err error) {
	if c.oauth == nil {
		return "", errors.New("mcpclient: no server uses oauth")
	}
	s := c.oauth
	state := query.Get("state")
	if state == "" || len(state) > 512 {
		return "", fmt.Errorf("%w (no state)", ErrOAuthState)
	}
	skey := stateKey(state)
	var p pending
	raw, found, err := s.get(ctx, skey, &p)
	if err != nil || !found {
		if err != nil && !errors.Is(err, errSealed) && !bytes.Equal(raw, used) {
			return "", fmt.Errorf("mcpclient: %w", err)
		}
		return "", ErrOAuthState
	}
	if p.User != user {
		return "", fmt.Errorf("%w: it was started for another user", ErrOAuthState)
	}
	if ok, err := s.kv.SwapValue(ctx, oauthNamespace, skey, raw, used); err != nil {
		return "", fmt.Errorf("mcpclient: %w", err)
	} else if !ok {
		return "", fmt.Errorf("%w: it was used already", ErrOAuthState)
	}
	// The marker keeps a replay out until the state is gone.
	defer func() { _ = s.kv.DeleteValue(context.WithoutCancel(ctx), oauthNamespace, skey) }()
	if time.Now().After(p.Expires) {
		return "", fmt.Errorf("%w: it expired", ErrOAuthState)
	}
	var e *serverEntry
	for _, x := range c.entries {
		if x.cfg.Name == p.Server && x.oauth != nil {
			e = x
		}
	}
	if e == nil {
		return "", fmt.Errorf("mcpclient: no oauth server %q", p.Server)
	}
	if code := query.Get("error"); code != "" {
		return p.Server, e.wrap(fmt.Errorf("the authorization server refused: %s", errorCode(code)))
	}
	code := query.Get("code")
	if code == "" {
		return p.Server, e.wrap(errors.New("the callback has no code"))
	}
	creds, err := s.client(ctx, e)
	if err != nil {
		return p.Server, e.wrap(err)
	}
	key := tokenKey(p.Server, user)
	h := s.handler(e, creds, &kvTokenStore{s: s, key: key}, p.Scopes)
	if iss := query.Get("iss"); iss != "" {
		// RFC 9207: the response names the server that issued it; one
		// from another authorization server than the one asked is a
		// mix-up.
		md, err := h.GetServerMetadata(ctx)
		if err != nil {
			return p.Server, e.wrap(fmt.Errorf("discovering the authorization server: %w", err))
		}
		if iss != md.Issuer {
			return p.Server, e.wrap(errors.New("the authorization response names another issuer than the server's authorization server"))
		}
	}
	h.SetExpectedState(state)
	if err := h.ProcessAuthorizationResponse(ctx, code, state, p.Verifier); err != nil {
		return p.Server, e.wrap(fmt.Errorf("exchanging the code for a token: %s", scrub(err, code, p.Verifier)))
	}
	s.wake(key)
	e.log.Info("the person connected")
	return p.Server, nil
}

// errorCode is an OAuth error code from a callback, as safe to show: the
// characters RFC 6749 allows, at most 64 of them.
func errorCode(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r >= 0x20 && r <= 0x7e && r != '"' && r != '\\' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// scopeWatch is the HTTP transport of a per-user connection: it notes the
// scope a 403 insufficient_scope challenge asks for, which mcp-go's
// transport does not pass on.
type scopeWatch struct {
	rt http.RoundTripper
	c  *conn
}

func (w *scopeWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		for _, h := range resp.Header.Values("WWW-Authenticate") {
			if p := parseChallenge(h); p["error"] == "insufficient_scope" {
				scopes := strings.Fields(p["scope"])
				if len(scopes) == 0 {
					scopes = []string{}
				}
				w.c.scopeMu.Lock()
				w.c.scope = scopes
				w.c.scopeMu.Unlock()
			}
		}
	}
	return resp, err
}

// wantScope returns the scopes a 403 insufficient_scope asked for, or nil
// when none came.
func (c *conn) wantScope() []string {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	return c.scope
}

// parseChallenge reads the parameters of a Bearer challenge of a
// WWW-Authenticate header (RFC 6750 §3): name=value or name="quoted value"
// pairs, separated by commas. Other schemes and what does not parse give
// no parameters; at most 16 are read.
func parseChallenge(h string) map[string]string {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	out := make(map[string]string)
	for len(out) < 16 {
		rest = strings.TrimLeft(rest, " ,\t")
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		name = strings.ToLower(strings.TrimSpace(name))
		after = strings.TrimLeft(after, " \t")
		var val string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			if i >= len(after) {
				break // unterminated
			}
			val, rest = b.String(), after[i+1:]
		} else {
			end := strings.IndexAny(after, ", \t")
			if end < 0 {
				end = len(after)
			}
			val, rest = after[:end], after[end:]
		}
		if name != "" {
			if _, dup := out[name]; !dup {
				out[name] = val
			}
		}
	}
	return out
}

// authRequired reports whether err is a server's refusal for want of
// authorization (401).
func authRequired(err error) bool {
	var ae *transport.AuthorizationRequiredError
	return errors.Is(err, transport.ErrOAuthAuthorizationRequired) || errors.Is(err, transport.ErrUnauthorized) || errors.As(err, &ae)
}

// toolsKey is the key of the tools a user's connection listed last.
func toolsKey(e *serverEntry) string { return "tools/" + digest(e.cfg.Name, e.cfg.URL) }

// keepTools stores the tools a user's connection listed, for the replicas
// and restarts whose probe the server refuses.
func (s *oauthStore) keepTools(ctx context.Context, e *serverEntry, tools []mcp.Tool) {
	plain, err := json.Marshal(tools)
	if err != nil || len(plain) > memory.MaxKVValue/2 {
		return
	}
	key := toolsKey(e)
	if err := s.kv.PutValue(ctx, oauthNamespace, key, s.seal(key, plain)); err != nil {
		e.log.Warn("keeping the tool list failed", "err", err)
	}
}

// restoreTools gives e, whose server lists its tools to authorized users
// only, the tools a user's connection listed last, or else the stand-in
// tool that connects the person.
func (s *oauthStore) restoreTools(ctx context.Context, e *serverEntry) {
	var tools []mcp.Tool
	if _, found, err := s.get(ctx, toolsKey(e), &tools); err == nil && found {
		e.setTools(tools)
		e.log.Info("server lists its tools to authorized users only: its last list is offered", "tools", len(tools))
		return
	}
	spec := &toolSpec{
		base:   fitName("connect_" + sanitizeName(e.cfg.Name)),
		desc:   fmt.Sprintf("Connects the MCP server %q: the person is asked to authorize access. Its tools are offered once a person has connected.", e.cfg.Name),
		params: map[string]any{"type": "object", "properties": map[string]any{}},
		skip:   true,
	}
	e.mu.Lock()
	e.converted = []*toolSpec{spec}
	e.mu.Unlock()
	e.log.Info("server lists its tools to authorized users only: a tool to connect it is offered until one did")
}

// connectCall is the stand-in tool's call: it connects the person (asking
// them to authorize first, as a call of a tool does) and names the tools
// the connection listed.
func (e *serverEntry) connectCall(ctx context.Context) (string, error) {
	if _, err := e.call(ctx, "", nil, nil); err != nil {
		return "", err
	}
	var names []string
	for _, s := range e.specs() {
		if s.mcpName != "" {
			names = append(names, s.base)
		}
	}
	return fmt.Sprintf("Connected to %s. Its tools (%s) are offered from the next request on.", e.cfg.Name, strings.Join(names, ", ")), nil
}

// scrub is err's text without the secrets given: an authorization server's
// error may echo what it was sent.
func scrub(err error, secrets ...string) string {
	text := err.Error()
	for _, s := range secrets {
		if len(s) >= minSecret {
			text = strings.ReplaceAll(text, s, "[redacted]")
		}
	}
	return text
}
