package main

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/mcpclient"
)

// mcpUser is the person an MCP call is made for: the owner of the session
// the run (or the run a sub-agent's run was started from) belongs to. The
// MCP client keeps that person's OAuth tokens under it.
func mcpUser(ctx context.Context) string {
	call, ok := agent.CallFromContext(ctx)
	if !ok {
		return ""
	}
	return sessionOwner(call.RootSession())
}

// oauthPage is the page of /oauth/callback. The GET shows a button that
// POSTs the callback's query back: a link preview or prefetch that follows
// the redirect does not use the code, and the POST, made from this site,
// carries the owner cookie (SameSite=Strict keeps it off the redirect from
// the authorization server).
var oauthPage = template.Must(template.New("oauth").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect an MCP server</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/style.css"></head>
<body class="oauth-page"><main style="max-width:32em;margin:3em auto;font-family:sans-serif">
{{if .Form}}<form method="post" action="/oauth/callback">
{{range $k, $vs := .Form}}{{range $vs}}<input type="hidden" name="{{$k}}" value="{{.}}">{{end}}{{end}}
<p>Finish connecting the server to your conversation?</p>
<button type="submit">Finish connecting</button>
</form>{{else if .Server}}<p>Connected <b>{{.Server}}</b>. You can close this tab: the conversation goes on.</p>
{{else}}<p>The server could not be connected: {{.Error}}</p>{{end}}
</main></body></html>`))

type oauthView struct {
	Form   url.Values
	Server string
	Error  string
}

// handleOAuthCallback is where authorization servers send the person back
// after a "Connect <server>" card:
//
//	GET  /oauth/callback?code&state  a page whose button POSTs them
//	POST /oauth/callback             completes the authorization for the
//	                                 browser's owner: 200 with a page saying
//	                                 so, 403 for another owner's or a used
//	                                 state, 401 without an owner cookie
//
// The call waiting for the authorization, on this replica or another, goes
// on once the token is stored.
func (s *Server) handleOAuthCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch r.Method {
	case http.MethodGet:
		q := url.Values{}
		for _, k := range []string{"code", "state", "error", "iss"} {
			if v := r.URL.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		if q.Get("state") == "" {
			w.WriteHeader(http.StatusBadRequest)
			_ = oauthPage.Execute(w, oauthView{Error: "the link has no state"})
			return
		}
		_ = oauthPage.Execute(w, oauthView{Form: q})
	case http.MethodPost:
		tag, ok := ownerTag(r)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_ = oauthPage.Execute(w, oauthView{Error: "this browser has not opened the chat (no owner cookie)"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = oauthPage.Execute(w, oauthView{Error: "the form does not parse"})
			return
		}
		if s.mcp == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = oauthPage.Execute(w, oauthView{Error: "no MCP servers"})
			return
		}
		server, err := s.mcp.OAuthCallback(r.Context(), tag, r.PostForm)
		if err != nil {
			status := http.StatusBadGateway
			if errors.Is(err, mcpclient.ErrOAuthState) {
				status = http.StatusForbidden
			}
			s.logger.Warn("an MCP authorization failed", "err", err)
			w.WriteHeader(status)
			_ = oauthPage.Execute(w, oauthView{Error: err.Error()})
			return
		}
		_ = oauthPage.Execute(w, oauthView{Server: dropFormat(server)})
	default:
		w.Header().Set("Allow", "GET, POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}
