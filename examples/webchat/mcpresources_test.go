package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// replyModel is a scripted model that answers every request "Noted." and
// asks for no tool.
func replyModel(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Respond(func(*agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("Noted. <no_tool>").Finish("stop")
	})
	return srv
}

// contentServers are the MCP servers of the resource tests: the stdio test
// server with resources and prompts (-mode=content), shared and per
// conversation, and one with tools only.
func contentServers(t *testing.T) []mcpclient.ServerConfig {
	bin := stdioServer(t)
	return []mcpclient.ServerConfig{
		{Name: "content", Command: bin, Args: []string{"-mode=content"}},
		{Name: "tools", Command: bin, DisabledTools: only("echo")},
		{Name: "sandbox", Command: bin, Args: []string{"-mode=content"}, Isolation: mcpclient.IsolationPerConversation},
	}
}

// getResources reads GET /api/mcp/resources?session_id=session as client.
func getResources(t *testing.T, client *http.Client, base, session string) (int, string) {
	t.Helper()
	resp, err := client.Get(base + "/api/mcp/resources?session_id=" + url.QueryEscape(session))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// userText is the text of a request's last user message (its parts'
// joined, when it has parts) and the image URLs of its parts.
func userText(req *agenttest.Request) (string, []string) {
	m, _ := req.LastMessageWithRole("user")
	if len(m.Parts) == 0 {
		return m.Content, nil
	}
	var text string
	var images []string
	for _, p := range m.Parts {
		text += p.Text
		if p.ImageURL != "" {
			images = append(images, p.ImageURL)
		}
	}
	return text, images
}

// GET /api/mcp/resources lists the resources of the servers that offer
// some, for the session's owner only; POST /api/chat attaches resources:
// their text, delimited and named, goes to the model with the message,
// binary data as a note, an image as an image; what cannot be attached is
// refused before the run starts.
func TestMCPResources(t *testing.T) {
	leaktest.Check(t)
	model := replyModel(t)
	h := newMCPHarness(t, model, contentServers(t)...)
	session := h.newSession(t)

	status, body := getResources(t, h.newClient(t), h.ts.URL, session)
	assert.Equal(t, http.StatusUnauthorized, status, body)
	status, body = getResources(t, h.newBrowser(t), h.ts.URL, session)
	assert.Equal(t, http.StatusForbidden, status, "another browser's session: %s", body)
	status, body = getResources(t, h.client, h.ts.URL, "")
	assert.Equal(t, http.StatusBadRequest, status, body)

	status, body = getResources(t, h.client, h.ts.URL, session)
	require.Equal(t, http.StatusOK, status, body)
	var list []serverResources
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list, 2, "the tools server offers no resources: %s", body)
	for i, name := range []string{"content", "sandbox"} {
		assert.Equal(t, name, list[i].Server)
		assert.Empty(t, list[i].Error)
		var uris []string
		for _, r := range list[i].Resources {
			uris = append(uris, r.URI)
		}
		assert.Equal(t, []string{"mcptest://notes/a.txt", "mcptest://notes/b.md", "mcptest://big.txt",
			"mcptest://data/blob.bin", "mcptest://notes/c.txt", "mcptest://images/dot.png"}, uris, name)
	}
	assert.Contains(t, body, `"mime_type":"text/markdown"`)
	assert.Equal(t, 1, h.srv.mcp.Servers()[2].Instances, "the listing started the session's instance")

	chat := func(session string, refs ...resourceRef) (int, map[string]any) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"session_id": session, "message": "Read these.", "resources": refs})
		require.NoError(t, err)
		return h.post(t, "/api/chat", string(b))
	}
	ev, _ := h.openEvents(t, session)
	defer ev.close()
	status, out := chat(session,
		resourceRef{"content", "mcptest://notes/b.md"},
		resourceRef{"sandbox", "mcptest://data/blob.bin"},
		resourceRef{"content", "mcptest://images/dot.png"})
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	done, _ := ev.runDone(t)
	require.Equal(t, "finished", done.Status, "%+v", done)
	reqs := model.Requests()
	require.NotEmpty(t, reqs)
	text, images := userText(reqs[0])
	assert.Equal(t, "Read these.\n\n"+
		"[Resource mcptest://notes/b.md from MCP server \"content\", text/markdown]\n```\n# note b\n```\n[End of resource mcptest://notes/b.md]\n\n"+
		"[Resource mcptest://data/blob.bin from MCP server \"sandbox\", application/octet-stream: 4 bytes of binary data, not shown]\n\n"+
		"[Resource mcptest://images/dot.png from MCP server \"content\", image/png: an image, attached]", text)
	require.Len(t, images, 1)
	assert.True(t, strings.HasPrefix(images[0], "data:image/png;base64,"), images[0])
	sessions := listSessions(t, h.client, h.ts.URL)
	require.Len(t, sessions, 1)
	assert.Equal(t, "Read these.", sessions[0].Title, "the title is the user's words")

	for _, c := range []struct {
		refs   []resourceRef
		status int
		error  string
	}{
		{[]resourceRef{{"nope", "mcptest://notes/a.txt"}}, http.StatusBadRequest, "unknown server"},
		{[]resourceRef{{"tools", "mcptest://notes/a.txt"}}, http.StatusBadRequest, "declared no resources"},
		{[]resourceRef{{"content", ""}}, http.StatusBadRequest, "needs a server and a uri"},
		{make([]resourceRef, 9), http.StatusBadRequest, "at most 8"},
		{[]resourceRef{{"content", "mcptest://big.txt"}}, http.StatusRequestEntityTooLarge, "too large"},
		{[]resourceRef{{"content", "mcptest://missing"}}, http.StatusBadGateway, "mcptest://missing"},
	} {
		status, out := chat(h.newSession(t), c.refs...)
		assert.Equal(t, c.status, status, "%v: %v", c.refs, out)
		assert.Contains(t, out["error"], c.error, "%v", c.refs)
	}
	assert.Len(t, listSessions(t, h.client, h.ts.URL), 1, "a refused message stores no session")
	assert.Len(t, model.Requests(), len(reqs), "no refused message reached the model")
}

// TestBrowserAttachResource: the page's Resources panel lists the
// resources, a click attaches one (a chip), and the message sent with it
// reaches the model with the resource's text; the chip goes, and the
// message is drawn once.
func TestBrowserAttachResource(t *testing.T) {
	leaktest.Check(t)
	model := replyModel(t)
	h := newMCPHarness(t, model, contentServers(t)[:2]...)
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	p.WaitFor("the Resources button", `!document.querySelector('#attach').hidden`)
	p.Click("#attach")
	const note = `document.querySelector('#resource-panel button.res[data-uri="mcptest://notes/c.txt"]')`
	p.WaitFor("the resources", note+` !== null`)
	assert.Equal(t, "content", p.Str(`[...document.querySelectorAll('#resource-panel .res-server')].map(e => e.textContent).join()`), "only the server with resources")
	p.ClickJS(note)
	p.WaitFor("the chip", `document.querySelectorAll('#attached .chip').length === 1 && !document.querySelector('#attached').hidden`)
	assert.Equal(t, "true", p.Str(note+`.getAttribute('aria-pressed')`))
	assert.Contains(t, p.Str(`document.querySelector('#attached .chip').textContent`), "c.txt")

	sendAndWait(p, "What does the note say?")
	p.WaitFor("the chip to go", `document.querySelector('#attached').hidden && document.querySelectorAll('#attached .chip').length === 0`)
	assert.Equal(t, "1", p.Str(`String(document.querySelectorAll('.msg.user').length)`), "the message is drawn once")
	assert.Contains(t, p.Str(`document.querySelector('.msg.user').textContent`), "[resource: content · mcptest://notes/c.txt]")

	reqs := model.Requests()
	require.NotEmpty(t, reqs)
	text, _ := userText(reqs[0])
	assert.Equal(t, fmt.Sprintf("What does the note say?\n\n[Resource mcptest://notes/c.txt from MCP server %q, text/plain]\n```\nnote c\n```\n[End of resource mcptest://notes/c.txt]", "content"), text)
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// A server whose resource has its configuration's secret in its URI, name,
// title, description, MIME type and text: the list the page gets shows
// none of it, and attaching the resource by the URI the list shows reads
// it, and adds it to the model's message without the secret.
func TestMCPResourcesRedacted(t *testing.T) {
	leaktest.Check(t)
	const secret = "res-token-7c6b5a49"
	t.Setenv("WEBCHAT_RES_TOKEN", secret)
	srv := server.NewMCPServer("leaky", "1.0.0", server.WithResourceCapabilities(false, false))
	doc := mcp.NewResource("leak://"+secret+"/doc", "doc "+secret, mcp.WithResourceDescription("about "+secret), mcp.WithMIMEType("text/x-"+secret))
	doc.Title = "Doc " + secret
	srv.AddResource(doc, func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/x-" + secret, Text: "the doc of " + secret}}, nil
	})
	ts := servertest.NewTestStreamableHTTPServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	model := replyModel(t)
	h := newMCPHarness(t, model, mcpclient.ServerConfig{Name: "leaky", URL: ts.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer ${WEBCHAT_RES_TOKEN}"}})
	session := h.newSession(t)

	status, body := getResources(t, h.client, h.ts.URL, session)
	require.Equal(t, http.StatusOK, status, body)
	assert.NotContains(t, body, secret)
	var list []serverResources
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list, 1, body)
	require.Len(t, list[0].Resources, 1, body)
	res := list[0].Resources[0]
	assert.Equal(t, mcpclient.Resource{URI: "leak://[redacted]/doc", Name: "doc [redacted]", Title: "Doc [redacted]",
		Description: "about [redacted]", MIMEType: "text/x-[redacted]", Size: -1}, res)

	ev, _ := h.openEvents(t, session)
	defer ev.close()
	b, err := json.Marshal(map[string]any{"session_id": session, "message": "Read this.", "resources": []resourceRef{{"leaky", res.URI}}})
	require.NoError(t, err)
	status, out := h.post(t, "/api/chat", string(b))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	done, _ := ev.runDone(t)
	require.Equal(t, "finished", done.Status, "%+v", done)
	reqs := model.Requests()
	require.NotEmpty(t, reqs)
	text, _ := userText(reqs[0])
	assert.Equal(t, "Read this.\n\n[Resource leak://[redacted]/doc from MCP server \"leaky\", text/x-[redacted]]\n```\nthe doc of [redacted]\n```\n[End of resource leak://[redacted]/doc]", text)
	for _, r := range reqs {
		raw, err := json.Marshal(r)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), secret, "what the model got")
	}
}
