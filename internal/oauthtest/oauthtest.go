// Package oauthtest runs an OAuth authorization server and an MCP server
// it protects, in process on 127.0.0.1, for tests of clients that connect
// to remote MCP servers on behalf of their users.
//
// The authorization server publishes its metadata (RFC 8414), registers
// clients dynamically (RFC 7591), authorizes at once (its authorize
// endpoint redirects with a code without asking anyone; the account the
// code is for is the login query parameter, "anonymous" without one),
// checks PKCE (S256) at its token endpoint, and rotates refresh tokens.
// Codes and refresh tokens are good for one use.
//
// The MCP server speaks streamable HTTP at /mcp. It publishes its protected
// resource metadata (RFC 9728) and answers a request without a valid
// bearer token with 401 and a WWW-Authenticate challenge naming that
// metadata. Its tool whoami returns the account the token was issued for;
// its tool admin needs the scope "admin" and is refused with 403
// insufficient_scope without it.
package oauthtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Options configures [Start].
type Options struct {
	// OpenList lets requests without a token initialize a session and list
	// the tools; calls still need one.
	OpenList bool
	// AuthorizeEndpoint, when set, is the authorization endpoint the
	// server's metadata advertises instead of its own /authorize: a test
	// of what a client shows for an endpoint it is given.
	AuthorizeEndpoint string
}

// Servers are a running authorization server and the MCP server it
// protects.
type Servers struct {
	// AuthURL is the authorization server's issuer URL.
	AuthURL string
	// MCPURL is the MCP server's endpoint.
	MCPURL string

	opts Options
	as   *httptest.Server
	rs   *httptest.Server
	mcp  *server.StreamableHTTPServer

	mu       sync.Mutex
	clients  map[string]client // by client id
	codes    map[string]grant  // unused codes
	access   map[string]grant  // valid access tokens
	refresh  map[string]grant  // unused refresh tokens
	issued   []string          // every access and refresh token issued
	seen     []string          // the bearer tokens the MCP server accepted
	refreshN int
}

type client struct {
	redirects []string
}

// grant is what a code or token stands for.
type grant struct {
	client    string
	redirect  string
	challenge string
	login     string
	scope     string
}

// Start starts both servers; they are closed when the test ends.
func Start(t interface {
	Helper()
	Cleanup(func())
	Fatal(...any)
}, opts Options) *Servers {
	t.Helper()
	s := &Servers{
		opts:    opts,
		clients: make(map[string]client),
		codes:   make(map[string]grant),
		access:  make(map[string]grant),
		refresh: make(map[string]grant),
	}
	s.as = newLocalServer(t, s.authHandler())

	ms := server.NewMCPServer("protected", "1.0.0", server.WithToolCapabilities(false))
	ms.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Says whom the token is for.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("you are " + loginFrom(ctx)), nil
		})
	ms.AddTool(mcp.NewTool("admin", mcp.WithDescription("Needs the admin scope.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("admin for " + loginFrom(ctx)), nil
		})
	s.mcp = server.NewStreamableHTTPServer(ms,
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			if g, ok := s.grantOf(r); ok {
				ctx = context.WithValue(ctx, loginKey{}, g.login)
			}
			return ctx
		}))
	s.rs = newLocalServer(t, s.resourceHandler())
	s.AuthURL = s.as.URL
	s.MCPURL = s.rs.URL + "/mcp"
	return s
}

func newLocalServer(t interface {
	Cleanup(func())
	Fatal(...any)
}, h http.Handler) *httptest.Server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type loginKey struct{}

func loginFrom(ctx context.Context) string {
	s, _ := ctx.Value(loginKey{}).(string)
	return s
}

// Issued returns every access and refresh token the authorization server
// issued, for a test to look for them where they must not be.
func (s *Servers) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Seen returns the bearer tokens the MCP server accepted, in order.
func (s *Servers) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// Refreshes is the number of refresh grants the server honoured.
func (s *Servers) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshN
}

// ExpireAccess invalidates every access token issued so far, as if they
// had expired; refresh tokens stay good.
func (s *Servers) ExpireAccess() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
}

// LoginOf returns the account an access token was issued for.
func (s *Servers) LoginOf(token string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[token]
	return g.login, ok
}

func (s *Servers) grantOf(r *http.Request) (grant, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return grant{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[tok]
	return g, ok
}

func newToken(prefix string) string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func (s *Servers) authHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := s.as.URL
		authorize := base + "/authorize"
		if s.opts.AuthorizeEndpoint != "" {
			authorize = s.opts.AuthorizeEndpoint
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                base,
			"authorization_endpoint":                authorize,
			"token_endpoint":                        base + "/token",
			"registration_endpoint":                 base + "/register",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post"},
			"scopes_supported":                      []string{"read", "admin"},
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
			oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "redirect_uris are required")
			return
		}
		id := newToken("client-")
		s.mu.Lock()
		s.clients[id] = client{redirects: req.RedirectURIs}
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{
			"client_id":                  id,
			"redirect_uris":              req.RedirectURIs,
			"token_endpoint_auth_method": "none",
		})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		s.mu.Lock()
		c, ok := s.clients[q.Get("client_id")]
		s.mu.Unlock()
		redirect := q.Get("redirect_uri")
		if !ok || !slices.Contains(c.redirects, redirect) {
			http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
			return
		}
		if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "a code with PKCE (S256) only", http.StatusBadRequest)
			return
		}
		login := q.Get("login")
		if login == "" {
			login = "anonymous"
		}
		code := newToken("code-")
		s.mu.Lock()
		s.codes[code] = grant{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"), login: login, scope: q.Get("scope")}
		s.mu.Unlock()
		u, err := url.Parse(redirect)
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		v := u.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", s.as.URL)
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
			return
		}
		f := r.PostForm
		s.mu.Lock()
		defer s.mu.Unlock()
		var g grant
		switch f.Get("grant_type") {
		case "authorization_code":
			var ok bool
			g, ok = s.codes[f.Get("code")]
			delete(s.codes, f.Get("code"))
			sum := sha256.Sum256([]byte(f.Get("code_verifier")))
			switch {
			case !ok:
				oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
				return
			case g.client != f.Get("client_id") || g.redirect != f.Get("redirect_uri"):
				oauthError(w, http.StatusBadRequest, "invalid_grant", "client or redirect_uri mismatch")
				return
			case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
				oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
				return
			}
		case "refresh_token":
			var ok bool
			g, ok = s.refresh[f.Get("refresh_token")]
			delete(s.refresh, f.Get("refresh_token"))
			if !ok || g.client != f.Get("client_id") {
				oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used refresh token")
				return
			}
			s.refreshN++
		default:
			oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "")
			return
		}
		at, rt := newToken("at-"), newToken("rt-")
		s.access[at] = g
		s.refresh[rt] = g
		s.issued = append(s.issued, at, rt)
		writeJSON(w, http.StatusOK, map[string]any{
			"access_token":  at,
			"token_type":    "Bearer",
			"refresh_token": rt,
			"expires_in":    3600,
			"scope":         g.scope,
		})
	})
	return mux
}

func (s *Servers) resourceHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/{path...}", s.resourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", s.resourceMetadata)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		g, ok := s.grantOf(r)
		method := rpcMethod(body)
		if !ok && !(s.opts.OpenList && method != "tools/call") {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.rs.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if ok && method == "tools/call" && bytes.Contains(body, []byte(`"admin"`)) && !slices.Contains(strings.Fields(g.scope), "admin") {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="read admin", resource_metadata="`+s.rs.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		if ok && method == "tools/call" {
			s.mu.Lock()
			s.seen = append(s.seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			s.mu.Unlock()
		}
		s.mcp.ServeHTTP(w, r)
	})
	return mux
}

func (s *Servers) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.rs.URL + "/mcp",
		"authorization_servers":    []string{s.as.URL},
		"scopes_supported":         []string{"read", "admin"},
		"bearer_methods_supported": []string{"header"},
	})
}

// rpcMethod is the method of a JSON-RPC message, or "" for a response or
// anything else.
func rpcMethod(body []byte) string {
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Method
}
