package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// untilElicitation waits for an elicitation_request side chunk.
func (ev *events) untilElicitation(t *testing.T) interact.ElicitationRequest {
	t.Helper()
	seen := ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			require.NotEqual(t, "run_done", e.name, "the run ended before a request for input: %s", e.data)
			return false
		}
		return e.chunk(t).Kind == agent.KindSide && strings.Contains(e.data, `"elicitation_request"`)
	})
	var side struct {
		Side interact.ElicitationRequest `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &side))
	return side.Side
}

// newElicitHarness starts a Server whose MCP server (the stdio test
// server with its elicitation tools, skipping approval) asks for input
// through the Server's forms. Call leaktest.Check before it.
func newElicitHarness(t *testing.T, model *agenttest.Server) *harness {
	t.Helper()
	mc, err := mcpclient.New(t.Context(), []mcpclient.ServerConfig{{Name: "asker", Command: stdioServer(t), Args: []string{"-elicit"}, SkipApproval: true}},
		mcpclient.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mc.Close()) })
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: demo.Tools(), MCP: mc})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h
}

// TestMCPElicitation: an MCP server's request for input is a card of the
// page, answered through POST /api/form-answer with an action: content
// that does not fit the requested schema is refused (400, the form stays
// open), another browser is refused, and the owner's answer reaches the
// server, whose call completes with it.
func TestMCPElicitation(t *testing.T) {
	leaktest.Check(t)
	h := newElicitHarness(t, toolModel(t, toolCall{"ask", `{}`}))

	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "who am I?")
	req := ev.untilElicitation(t)
	assert.Equal(t, "asker", req.Server)
	assert.Equal(t, "Who are you?", req.Message)
	require.Len(t, req.Fields, 2)

	answer := func(client *http.Client, body map[string]any) (int, map[string]any) {
		body["session_id"], body["form_id"] = s1, req.FormID
		return postAs(t, client, h.ts.URL, "/api/form-answer", mustString(body))
	}
	status, out := answer(h.client, map[string]any{"action": "accept", "content": map[string]any{"age": -2}})
	assert.Equal(t, http.StatusBadRequest, status, "%v", out)
	assert.Contains(t, out["error"], "does not fit the requested schema")
	status, out = answer(h.newBrowser(t), map[string]any{"action": "decline"})
	assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "another browser: %v", out)
	status, out = answer(h.client, map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "age": 36}})
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "%v", out)

	done, chunks := ev.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Equal(t, "accept name=Ada age=36 state=state-1", result)
}

// elicitCard is the last card of the MCP tool name, and elicitForm its
// request for input.
func elicitForm(name string) string {
	return `[...document.querySelectorAll('#messages .card[data-tool="` + name + `"]')].at(-1)?.querySelector('form.elicitation')`
}

// TestBrowserElicitation: the page draws an MCP server's requests for
// input in their calls' cards: a form's fields from the schema, with the
// server's refusal of content that does not fit shown and the form left
// open; a link's host, with Open enabled only once the user consents, and
// the link opened only then. The answers reach the server.
func TestBrowserElicitation(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask", `{}`}, toolCall{"ask_url", `{}`})
	h := newElicitHarness(t, model)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.JS(`window.__opened = []; window.open = (u) => { window.__opened.push(String(u)); return null; };`)
	p.TypeText("#input", "Who am I?")
	p.Click("#send")
	form, link := elicitForm("ask"), elicitForm("ask_url")
	p.WaitFor("the form", form+`?.dataset.state === 'open'`)

	var shown struct {
		Title, Message string
		Legends        []string
		Inputs         []string
		Host, URL      string
		OpenDisabled   bool
	}
	require.NoError(t, p.Eval(`(() => { const f = `+form+`; return {Title: f.querySelector('.form-title').textContent,
		Message: f.querySelector('.elicit-message').textContent, Legends: [...f.querySelectorAll('legend')].map(e => e.textContent),
		Inputs: [...f.querySelectorAll('input.answer')].map(e => e.type)}; })()`, &shown))
	assert.Equal(t, "The server asker asks", shown.Title)
	assert.Equal(t, "Who are you?", shown.Message)
	assert.Equal(t, []string{"Age", "Name *"}, shown.Legends)
	assert.Equal(t, []string{"number", "text"}, shown.Inputs)

	// Content the schema refuses: the reason shows, the form stays open.
	p.JS(`{ const f = ` + form + `; const [age, name] = f.querySelectorAll('input.answer'); age.value = '-1'; name.value = 'Ada'; }`)
	p.ClickJS(form + `.querySelector('button[type=submit]')`)
	p.WaitFor("the server's reason", `!`+form+`.querySelector('.form-error').hidden && `+form+`.dataset.state === 'open'`)
	assert.Contains(t, p.Str(form+`.querySelector('.form-error').textContent`), "/age")
	p.JS(`{ const f = ` + form + `; f.querySelector('input.answer').value = '36'; }`)
	p.ClickJS(form + `.querySelector('button[type=submit]')`)
	p.WaitFor("the form answered", form+`.dataset.state === 'answered'`)

	// The calls run one after the other: the link comes next.
	p.WaitFor("the link", link+`?.dataset.state === 'open'`)
	require.NoError(t, p.Eval(`(() => { const l = `+link+`; return {Host: l.querySelector('.elicit-host').textContent,
		URL: l.querySelector('.elicit-url').textContent, OpenDisabled: l.querySelector('button[type=submit]').disabled}; })()`, &shown))
	assert.Equal(t, "Link to auth.example.com", shown.Host)
	assert.Equal(t, "https://auth.example.com/link?code=7", shown.URL)
	assert.True(t, shown.OpenDisabled, "no Open before consent")
	assert.Equal(t, "0", p.Str(`String(window.__opened.length)`), "nothing opened before consent")
	p.ClickJS(link + `.querySelector('input.elicit-consent')`)
	p.WaitFor("Open enabled by consent", `!`+link+`.querySelector('button[type=submit]').disabled`)
	p.ClickJS(link + `.querySelector('button[type=submit]')`)
	p.WaitFor("the link answered", link+`.dataset.state === 'answered'`)
	assert.Equal(t, "https://auth.example.com/link?code=7", p.Str(`window.__opened.join(' ')`))

	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	reqs := model.Requests()
	var results []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	assert.ElementsMatch(t, []string{"accept name=Ada age=36 state=state-1", "accept"}, results, "the server got the answers")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "elicitation.png"))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
