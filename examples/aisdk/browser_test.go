package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/ui/aisdk"
)

// askArgs are the arguments of the script's ask_user_question call: a
// question of each kind.
const askArgs = `{"title":"Trip","questions":[` +
	`{"id":"city","question":"Which city?","kind":"single","options":["Lima","Quito"]},` +
	`{"id":"days","question":"Which days?","kind":"multiple","options":["Mon","Fri"]},` +
	`{"id":"note","question":"Anything else?","kind":"text"}]}`

// cardArgs are the arguments of the script's show_card call: text that
// holds HTML, which the page shows as text.
const cardArgs = `{"title":"<b>Paris</b>","body":"Sunny <img src=x onerror=\"window.__xss=1\">"}`

// script is the test's model: a planning round that asks for a tool, then
// get_weather {"city":"Lima"} for a message about the weather,
// ask_user_question for "ask", show_card for "card", and after a tool
// "Done: " and its result.
func script(req *agenttest.Request) agenttest.Response {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	var user string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && msgs[i].Content != "[continue]" {
			user = msgs[i].Content
			break
		}
	}
	switch {
	case last.Role == "tool":
		return agenttest.Reply().Text("Done: ", last.Content).Finish("stop")
	case !req.HasTools():
		return agenttest.Reply().Text("Let me check. <need_tool>").Finish("stop")
	case strings.Contains(user, "weather") && strings.Contains(user, "hidden"):
		// A right-to-left override in the city, as the model wrote it
		// (not escaped): the card must show it.
		return agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", "{\"city\":\"Li\u202ema\"}").Finish("tool_calls")
	case strings.Contains(user, "weather"):
		return agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	case strings.Contains(user, "ask"):
		return agenttest.Reply().Call(0, "call_a", "ask_user_question", askArgs).Finish("tool_calls")
	case strings.Contains(user, "card"):
		return agenttest.Reply().Call(0, "call_c", "show_card", cardArgs).Finish("tool_calls")
	}
	return agenttest.Reply().Text("I do not know that one.").Finish("stop")
}

// testServer is the example's server on 127.0.0.1 with the scripted model
// (in process, no port) and a get_weather that counts its runs.
type testServer struct {
	srv    *server
	ts     *httptest.Server
	runs   atomic.Int32
	closed bool
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerOn(t, filepath.Join(t.TempDir(), "aisdk.db"))
}

// newTestServerOn is newTestServer on the SQLite file db, which a test may
// open again with a second server (a restart).
func newTestServerOn(t *testing.T, db string) *testServer {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), db)
	require.NoError(t, err)
	h := &testServer{}
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "Weather for a city.", func(_ context.Context, in city, _ agent.Progress) (string, error) {
		h.runs.Add(1)
		return "sunny in " + in.City, nil
	})
	srv, err := newServer(config{
		Agent: agent.Config{
			BaseURL:    "http://model.invalid/v1",
			HTTPClient: &http.Client{Transport: agenttest.RespondFunc(script)},
			Model:      "test-model",
		},
		Weather: weather,
		Store:   st,
	})
	require.NoError(t, err)
	h.srv = srv
	h.ts = httptest.NewServer(srv) // 127.0.0.1:0
	t.Cleanup(h.close)
	return h
}

// close ends the server: the runs first (their streams end, what waits
// for a person is suspended in the store), then the listener and the
// store. Calls after the first do nothing.
func (h *testServer) close() {
	if h.closed {
		return
	}
	h.closed = true
	h.srv.Close()
	h.ts.Close()
	h.srv.store.(io.Closer).Close()
}

// TestBrowserApproval drives the page in headless Chromium: a message
// whose turn asks to approve get_weather, the approval card drawn by the
// page, a reload of the page (the chat named in its address, its history
// loaded, the turn that waits followed again), the card again in words, a
// click on Approve, and the tool's result and the model's answer drawn in
// turn, all through the vendored ai client and the handler; a last
// reload shows the whole conversation. Any error the page or the browser
// logs fails it (a CSP violation, a missing favicon).
func TestBrowserApproval(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	b := cdp.Start(t) // cleaned up before the server: LIFO
	p := b.NewPage(1000, 800)

	openPage(p, h.ts.URL+"/")
	p.WaitFor("the page's script", `document.body.dataset.chat && document.querySelector('#status').textContent === 'ready'`)
	chatID := p.Str(`document.body.dataset.chat`)
	assert.Equal(t, "#"+chatID, p.Str(`location.hash`), "the address names the chat")

	p.TypeText("#input", "what is the weather in Lima")
	p.Click("#send")

	tool := `document.querySelector('.msg.assistant .tool[data-tool="get_weather"]')`
	p.WaitFor("the approval card", tool+`?.dataset.state === 'approval-requested' && `+tool+`.querySelector('button.approve')`)
	assert.Equal(t, "ready", p.Str(`document.body.dataset.status`), "the response ended at the approval")

	reload := func() {
		t.Helper()
		p.JS(`delete document.body.dataset.chat`)
		p.Must("Page.reload", map[string]any{})
		p.WaitFor("the page's script again", `document.body.dataset.chat && document.querySelector('#status').textContent === 'ready'`)
		assert.Equal(t, chatID, p.Str(`document.body.dataset.chat`), "the same chat")
	}
	reload()
	p.WaitFor("the approval card again", tool+`?.dataset.state === 'approval-requested' && `+tool+`.querySelector('button.approve')`)
	assert.Equal(t, "waiting for your approval", p.Str(tool+`.querySelector('.state').textContent`))
	assert.Equal(t, "what is the weather in Lima", p.Str(`document.querySelector('.msg.user .text').textContent`))
	assert.Equal(t, `{"city":"Lima"}`, p.Str(tool+`.querySelector('pre.input').textContent`), "the arguments as the model wrote them")
	assert.Zero(t, h.runs.Load(), "the tool ran before its approval")
	pending, err := h.srv.runner.Pending(t.Context(), chatID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	dir := t.ArtifactDir()
	p.Screenshot(filepath.Join(dir, "approval.png"))

	p.ClickJS(tool + `.querySelector('button.approve')`)
	p.WaitFor("the tool's result", tool+`?.dataset.state === 'output-available'`)
	assert.Equal(t, "sunny in Lima", p.Str(tool+`.querySelector('pre.output').textContent`))
	assert.Equal(t, "done", p.Str(tool+`.querySelector('.state').textContent`))
	p.WaitFor("the answer", `[...document.querySelectorAll('.msg.assistant .text')].some(e => e.textContent.includes('Done: sunny in Lima'))`)
	p.WaitFor("the turn's end", `document.body.dataset.status === 'ready'`)
	p.Screenshot(filepath.Join(dir, "answer.png"))

	assert.Equal(t, int32(1), h.runs.Load(), "get_weather ran once")
	assert.Equal(t, 1, p.Int(`document.querySelectorAll('.msg.assistant').length`), "the answer continues the message of the approval")
	assert.Zero(t, p.Int(`document.querySelectorAll('button.approve, button.deny').length`), "no approval buttons left")
	assert.Equal(t, "true", p.Str(`String(document.querySelector('#stop').disabled)`))

	// The decision went through the handler, by this browser.
	var decisions []approval.DecisionRecord
	for d, err := range h.srv.runner.Decisions(t.Context(), approval.DecisionQuery{SessionID: chatID}) {
		require.NoError(t, err)
		decisions = append(decisions, d)
	}
	require.Len(t, decisions, 1)
	d := decisions[0]
	assert.Equal(t, "get_weather", d.Tool)
	assert.True(t, d.Decision.Approved)
	assert.Equal(t, aisdk.Via, d.Decision.Via)
	assert.True(t, strings.HasPrefix(d.Decision.By, "browser:"), "decided by %q", d.Decision.By)

	// Loaded again: the conversation as it ended.
	reload()
	p.WaitFor("the answer again", `[...document.querySelectorAll('.msg.assistant .text')].some(e => e.textContent.includes('Done: sunny in Lima'))`)
	assert.Equal(t, "done", p.Str(tool+`.querySelector('.state').textContent`))
	assert.Equal(t, "sunny in Lima", p.Str(tool+`.querySelector('pre.output').textContent`))
	assert.Equal(t, 1, p.Int(`document.querySelectorAll('.msg.user').length`))
	assert.Equal(t, 1, p.Int(`document.querySelectorAll('.msg.assistant').length`))
	assert.Equal(t, int32(1), h.runs.Load(), "get_weather ran once")
	owner, err := h.srv.owner(t.Context(), chatID)
	require.NoError(t, err)
	assert.Equal(t, d.Decision.By, owner, "the chat's owner decided")

	assert.Empty(t, b.Errors(), "errors on the page")
}

// lastMsg is a JS expression: the newest assistant message of the page.
const lastMsg = `[...document.querySelectorAll('.msg.assistant')].at(-1)`

// TestBrowserCardFormDenyStop drives the rest of the page in one chat: a
// card whose HTML is shown as text, a form answered in the page, a denial,
// and Stop while an approval waits.
func TestBrowserCardFormDenyStop(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	b := cdp.Start(t)
	p := b.NewPage(1000, 900)
	openPage(p, h.ts.URL+"/")
	p.WaitFor("the page's script", `document.body.dataset.chat && document.querySelector('#status').textContent === 'ready'`)
	chatID := p.Str(`document.body.dataset.chat`)
	send := func(text string) {
		t.Helper()
		p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.TypeText("#input", text)
		p.Click("#send")
	}
	messages := func() int { return p.Int(`document.querySelectorAll('.msg.assistant').length`) }
	dir := t.ArtifactDir()

	// 1. A card: its title and body as text.
	send("show me a card")
	p.WaitFor("the card's turn to end", lastMsg+`?.querySelector('.card') && `+lastMsg+`.textContent.includes('Done:') && document.body.dataset.status === 'ready'`)
	assert.Equal(t, "<b>Paris</b>", p.Str(lastMsg+`.querySelector('.card .title').textContent`))
	assert.Equal(t, `Sunny <img src=x onerror="window.__xss=1">`, p.Str(lastMsg+`.querySelector('.card .body').textContent`))

	// 2. A form: one answer of each kind, sent with the chat's next
	// request.
	send("ask me about a trip")
	form := lastMsg + `.querySelector('form.form')`
	p.WaitFor("the form", form+` && !`+form+`.querySelector('button.answer').disabled`)
	assert.Equal(t, 2, messages())
	p.Screenshot(filepath.Join(dir, "form.png"))
	p.ClickJS(form + `.querySelector('input[name="city"][value="Quito"]')`)
	p.ClickJS(form + `.querySelector('input[name="days"][value="Fri"]')`)
	p.TypeText(`form.form input[name="note"]`, "window seat <please>")
	p.ClickJS(form + `.querySelector('button.answer')`)
	tool := lastMsg + `.querySelector('.tool[data-tool="ask_user_question"]')`
	p.WaitFor("the form's result", tool+`?.dataset.state === 'output-available'`)
	p.WaitFor("the answer", lastMsg+`.textContent.includes('Done:') && document.body.dataset.status === 'ready'`)
	var answers struct {
		Answers []struct {
			ID     string `json:"id"`
			Answer any    `json:"answer"`
		} `json:"answers"`
	}
	done := p.Str(`[...` + lastMsg + `.querySelectorAll('.text')].at(-1).textContent`)
	require.True(t, strings.HasPrefix(done, "Done: "), "the answer: %q", done)
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(done, "Done: ")), &answers))
	require.Len(t, answers.Answers, 3)
	assert.Equal(t, "Quito", answers.Answers[0].Answer)
	assert.Equal(t, []any{"Fri"}, answers.Answers[1].Answer)
	assert.Equal(t, "window seat <please>", answers.Answers[2].Answer)
	assert.Equal(t, 2, messages(), "the answer continues the form's message")
	assert.Nil(t, val(p, tool+`.querySelector('pre')`), "the form's call shows no arguments of its own")
	assert.Equal(t, "true", p.Str(`String(`+form+`.querySelector('button.answer').disabled)`), "an answered form is closed")

	// 3. A denial: the call is denied, the turn ends rejected, the tool
	// never runs.
	send("what is the weather in Lima, hidden")
	weather := lastMsg + `.querySelector('.tool[data-tool="get_weather"]')`
	p.WaitFor("the approval card", weather+`?.dataset.state === 'approval-requested' && document.body.dataset.status === 'ready'`)
	// The override the model put in the city is drawn as its escape,
	// marked, not left to reverse the text after it.
	assert.Equal(t, `{"city":"Li\u202Ema"}`, p.Str(weather+`.querySelector('pre.input').textContent`))
	assert.Equal(t, `\u202E`, p.Str(weather+`.querySelector('pre.input .cf')?.textContent ?? ''`))
	p.ClickJS(weather + `.querySelector('button.deny')`)
	p.WaitFor("the denial", weather+`?.dataset.state === 'output-denied' && `+lastMsg+`.textContent.includes('turn rejected') && document.body.dataset.status === 'ready'`)
	assert.Contains(t, p.Str(lastMsg+`.textContent`), "denied in the page")

	// 4. Stop while an approval waits: the server cancels it, the page
	// takes its buttons away.
	send("what is the weather in Lima again")
	p.WaitFor("the approval card", weather+`?.dataset.state === 'approval-requested' && document.body.dataset.status === 'ready'`)
	p.WaitFor("Stop to be enabled", `!document.querySelector('#stop').disabled`)
	p.Click("#stop")
	p.WaitFor("the buttons to go", `!`+weather+`.querySelector('button.approve') && document.querySelector('#stop').disabled`)
	assert.Equal(t, "stopped", p.Str(weather+`.querySelector('.state').textContent`))
	require.Eventually(t, func() bool {
		pending, err := h.srv.runner.Pending(t.Context(), chatID)
		return err == nil && len(pending) == 0
	}, 10*time.Second, 20*time.Millisecond, "the approval is cancelled")
	assert.Zero(t, h.runs.Load(), "get_weather never ran")

	// The audit: a denial by this browser through the handler, and the
	// cancellation of the stop.
	var decisions []approval.DecisionRecord
	for d, err := range h.srv.runner.Decisions(t.Context(), approval.DecisionQuery{SessionID: chatID}) {
		require.NoError(t, err)
		decisions = append(decisions, d)
	}
	require.Len(t, decisions, 2)
	assert.False(t, decisions[0].Decision.Approved)
	assert.Equal(t, aisdk.Via, decisions[0].Decision.Via)
	assert.False(t, decisions[1].Decision.Approved)
	assert.NotEqual(t, aisdk.Via, decisions[1].Decision.Via, "a cancellation is not a person's decision")

	var injected struct {
		Img, B int
		XSS    bool
	}
	require.NoError(t, p.Eval(`({Img: document.querySelectorAll('#messages img').length, B: document.querySelectorAll('#messages b').length, XSS: window.__xss !== undefined})`, &injected))
	assert.Zero(t, injected.Img, "an <img> of a tool's text reached the DOM")
	assert.Zero(t, injected.B)
	assert.False(t, injected.XSS)
	p.Screenshot(filepath.Join(dir, "page.png"))
	assert.Empty(t, b.Errors(), "errors on the page")
}

// openPage loads the page at url in p: the page names a new chat in its
// address (/#<id>), so it waits for the page's document rather than for
// url.
func openPage(p *cdp.Page, url string) {
	p.T().Helper()
	p.Must("Page.navigate", map[string]any{"url": url})
	p.WaitFor("the page to load", `document.readyState === 'complete' && location.href.startsWith(`+cdp.JSString(url)+`)`)
}

// val evaluates expr in p to a JSON value (nil for null).
func val(p *cdp.Page, expr string) any {
	p.T().Helper()
	var v any
	if err := p.Eval(expr, &v); err != nil {
		p.T().Fatal(err)
	}
	return v
}
