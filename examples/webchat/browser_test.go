package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// cards is a JS expression: the tool cards of the page.
const cards = `[...document.querySelectorAll('#messages .card')]`

// lastCard is a JS expression: the newest tool card.
const lastCard = cards + `.at(-1)`

// TestBrowser drives the real page in headless Chromium against the server
// on 127.0.0.1: approve, auto-approve, reject and interrupt through the tool
// cards, and model and tool text that holds HTML shown as text.
func TestBrowser(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "planround-demo · built-in demo model", p.Str(`document.querySelector('#model').textContent`))

	send := func(text string) {
		t.Helper()
		p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.TypeText("#input", text)
		p.Click("#send")
	}
	// newSys waits for a system message after the first n, with text.
	sysCount := func() int {
		var n int
		require.NoError(t, p.Eval(`document.querySelectorAll('.sys').length`, &n))
		return n
	}
	newSys := func(n int, text string) {
		t.Helper()
		p.WaitFor("the message "+text, fmt.Sprintf(`document.querySelectorAll('.sys').length > %d && [...document.querySelectorAll('.sys')].at(-1).textContent === %s`, n, cdp.JSString(text)))
	}
	cardState := func(state string) string {
		return lastCard + `?.dataset.state === '` + state + `'`
	}

	// 1. A weather turn, approved by a click, with "auto-approve this tool"
	// ticked.
	send("What's the weather in Paris?")
	p.WaitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, "get_weather", p.Str(lastCard+`.dataset.tool`))
	assert.Contains(t, p.Str(lastCard+`.innerText`), `"city": "Paris"`)
	assert.Equal(t, "true", p.Str(`document.body.dataset.running`))
	// Screenshots go to the test's artifact directory: kept with
	// go test -artifacts, removed otherwise.
	dir := t.ArtifactDir()
	p.Screenshot(filepath.Join(dir, "approval.png"))
	p.ClickJS(lastCard + `.querySelector('input.auto-approve')`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card to be done", cardState("done"))
	p.WaitFor("the final text", `[...document.querySelectorAll('.turn')].at(-1).innerText.includes('Here is what I found')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	result := p.Str(lastCard + `.querySelectorAll('pre')[1].textContent`)
	assert.Contains(t, result, "Paris:")
	assert.Equal(t, `["get_weather"]`, p.Str(`localStorage.getItem('planround.webchat.autoApprove')`))

	// 2. Model text that holds HTML: the demo quotes the question.
	const attack = `Tell me about <img src=x onerror="window.__xss=1"> and <b>bold</b>`
	send(attack)
	p.WaitFor("the quoted answer", `[...document.querySelectorAll('.turn')].at(-1).innerText.includes('You asked')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.turn')].at(-1).textContent`), `<img src=x onerror="window.__xss=1">`)
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.msg.user')].at(-1).textContent`), `<b>bold</b>`)

	// 3. A tool result that holds HTML.
	send("Please run `echo '<img src=y onerror=window.__xss=2><i>italic</i>'`")
	p.WaitFor("the run_command approval", cardState("approval"))
	assert.Equal(t, "run_command", p.Str(lastCard+`.dataset.tool`))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the command to be done", cardState("done"))
	assert.Contains(t, p.Str(lastCard+`.querySelectorAll('pre')[1].textContent`), "<img src=y onerror=window.__xss=2><i>italic</i>")
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)

	var injected struct {
		Img, B, I int
		XSS       bool
	}
	require.NoError(t, p.Eval(`({Img: document.querySelectorAll('#messages img').length,
		B: document.querySelectorAll('#messages b').length, I: document.querySelectorAll('#messages i').length,
		XSS: window.__xss !== undefined})`, &injected))
	assert.Zero(t, injected.Img, "an <img> from model or tool text reached the DOM")
	assert.Zero(t, injected.B)
	assert.Zero(t, injected.I)
	assert.False(t, injected.XSS, "injected script ran")

	// 4. The same tool again: a new card, approved at once by the list.
	send("And the weather in Tokyo?")
	p.WaitFor("the auto-approved card to be done", cardState("done")+` && `+lastCard+`.textContent.includes('Tokyo')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	var weatherCards int
	require.NoError(t, p.Eval(cards+`.filter(c => c.dataset.tool === 'get_weather').length`, &weatherCards))
	assert.Equal(t, 2, weatherCards, "a new card per call, even for the same tool")

	// 5. A rejection ends the session.
	send("Run `ls`")
	p.WaitFor("the approval card", cardState("approval"))
	n := sysCount()
	p.ClickJS(lastCard + `.querySelector('button.reject')`)
	p.WaitFor("the card to be rejected", cardState("rejected"))
	newSys(n, "The run ended: a tool call was rejected.")
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)

	// 6. An interrupt while a card waits for approval.
	send("What time is it in Tokyo?")
	p.WaitFor("the approval card", cardState("approval"))
	assert.Equal(t, "get_time", p.Str(lastCard+`.dataset.tool`))
	p.JS(`window.__interruptLabels = [];
		new MutationObserver(() => window.__interruptLabels.push(document.querySelector('#interrupt').textContent))
			.observe(document.querySelector('#interrupt'), {childList: true, characterData: true, subtree: true})`)
	n = sysCount()
	p.Click("#interrupt")
	newSys(n, "Interrupted by the user.")
	assert.Equal(t, "invalidated", p.Str(lastCard+`.dataset.state`))
	assert.Equal(t, "false", p.Str(`document.body.dataset.interrupting`))
	var labels []string
	require.NoError(t, p.Eval(`window.__interruptLabels.filter((l, i, a) => i === 0 || a[i-1] !== l)`, &labels))
	assert.Equal(t, []string{"Interrupting…", "Interrupt"}, labels, "the button waits for the server's confirmation")
	waitApprovals(t, h.srv, 0)

	// 7. Live output of a running command, kept when it is interrupted.
	send("Please run `echo first line; sleep 30`")
	p.WaitFor("the run_command approval", cardState("approval"))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	// The output block, not the arguments (which say "first line" too).
	p.WaitFor("the live output", cardState("executing")+` && [...`+lastCard+`.querySelectorAll('.label')].some(l => l.textContent === 'output' && l.nextElementSibling.textContent.includes('first line'))`)
	n = sysCount()
	p.Click("#interrupt")
	newSys(n, "Interrupted by the user.")
	assert.Equal(t, "invalidated", p.Str(lastCard+`.dataset.state`))
	assert.Equal(t, 1, strings.Count(p.Str(`document.querySelector('#messages').textContent`), "The run ended: a tool call was rejected."), "one message per event")
	assert.Contains(t, p.Str(lastCard+`.querySelector('details').textContent`), "partial output")
	assert.Equal(t, "true", p.Str(`String(`+lastCard+`.querySelector('details').open)`), "the output watched live stays in view")
	assert.Contains(t, p.Str(lastCard+`.querySelector('details').textContent`), "first line")

	// 8. A silent display tool: no approval, and the card is drawn.
	send("Show me a card about <planround>")
	p.WaitFor("the show_card card", cardState("done")+` && `+lastCard+`.dataset.tool === 'show_card'`)
	assert.Equal(t, "<planround>", p.Str(lastCard+`.querySelector('.display-card .title').textContent`))
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)

	// What the lead looks at.
	p.JS(`document.querySelector('#scroll').scrollTop = 1e9`)
	p.Screenshot(filepath.Join(dir, "webchat.png"))

	// 9. A reload draws the conversation again from the history.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("the history", cards+`.length === 7`)
	var reloaded struct {
		Users int
		Text  string
	}
	require.NoError(t, p.Eval(`({Users: document.querySelectorAll('.msg.user').length, Text: document.querySelector('#messages').textContent})`, &reloaded))
	assert.Equal(t, 8, reloaded.Users)
	assert.Contains(t, reloaded.Text, "Here is what I found")
	assert.NotContains(t, reloaded.Text, "<need_tool>", "control tags are not shown")
	assert.Contains(t, reloaded.Text, `"city": "Paris"`, "a reloaded card shows its arguments")
	assert.NotContains(t, reloaded.Text, "[object Object]")
	assert.Equal(t, "0", p.Str(`String(document.querySelectorAll('#messages img').length)`))

	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
	assert.False(t, strings.Contains(p.Str(`document.title`), "pwned"))
}

// TestBrowserStaleCardsAfterRestart: the server behind the page restarts
// while a card waits; approving it answers success:false and the page
// invalidates every pending card.
func TestBrowserStaleCardsAfterRestart(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	next := newHarness(t, Options{ApprovalTimeout: 300 * time.Millisecond})
	sw := &switcher{}
	sw.set(h.srv)
	front := newSwitchServer(t, sw)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(front.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Paris and the time in Tokyo?")
	p.Click("#send")
	p.WaitFor("the approval card", cards+`.some(c => c.dataset.state === 'approval')`)

	// A crash: the next server takes over and the old stream is cut.
	sw.set(next.srv)
	front.CloseClientConnections()
	p.WaitFor("the page to reconnect", `document.querySelector('#conn').textContent === 'connected' && document.body.dataset.running === 'false'`)
	assert.Contains(t, p.Str(`document.querySelector('#messages').innerText`), "Reconnected to a restarted server")

	p.Click(`#messages .card[data-state=approval] button.approve`)
	p.WaitFor("every pending card invalidated", cards+`.every(c => c.dataset.state === 'invalidated')`)
	p.WaitFor("the stale message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent.includes('no longer pending')`)
	var n int
	require.NoError(t, p.Eval(cards+`.length`, &n))
	assert.Equal(t, 2, n, "both calls of the round had cards")

	// The restarted server's approvals time out quickly: the page says so.
	// The round's second call never began: invalidated, not rejected.
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", "Weather in Rome and the time in Tokyo?")
	p.Click("#send")
	p.WaitFor("the timeout message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent.startsWith('Approval timed out')`)
	first := cards + `.at(-2)`
	assert.Equal(t, "rejected", p.Str(first+`.dataset.state`))
	assert.Contains(t, p.Str(first+`.querySelector('.reason').textContent`), "approval timed out after 300ms")
	assert.Equal(t, "get_time", p.Str(lastCard+`.dataset.tool`))
	assert.Equal(t, "invalidated", p.Str(lastCard+`.dataset.state`), "a call that never began was not rejected")
	assert.Empty(t, b.PageErrors())
}

// TestBrowserShutdownInvalidatesCards: a server shutting down interrupts the
// run; its cards are invalidated, none says "rejected by user".
func TestBrowserShutdownInvalidatesCards(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Paris and the time in Tokyo?")
	p.Click("#send")
	p.WaitFor("the approval card", cards+`.some(c => c.dataset.state === 'approval')`)

	h.srv.Close() // what SIGTERM does: the runs end, their pages are told
	p.WaitFor("the shutdown message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent === 'Interrupted: the server is shutting down.'`)
	var got struct {
		States []string
		Text   string
	}
	require.NoError(t, p.Eval(`({States: `+cards+`.map(c => c.dataset.state), Text: document.querySelector('#messages').innerText})`, &got))
	assert.Equal(t, []string{"invalidated", "invalidated"}, got.States, "nobody rejected these calls")
	assert.NotContains(t, got.Text, "rejected by user")
	assert.Contains(t, got.Text, "interrupted while waiting for approval")
	assert.Empty(t, b.PageErrors())
}

// TestBrowserNarrow: on a 400 px wide screen the header stays one line, the
// page does not scroll sideways, and the composer's placeholder fits.
func TestBrowserNarrow(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(400, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	var got struct {
		Header, Input, InputScroll, Width, Inner int
		Buttons                                  []int
	}
	require.NoError(t, p.Eval(`(() => {
		const inp = document.querySelector('#input');
		return {Header: document.querySelector('#top').offsetHeight, Input: inp.clientHeight, InputScroll: inp.scrollHeight,
			Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
			Buttons: [...document.querySelectorAll('#top button, #top .badge, .brand')].map(e => e.offsetHeight)};
	})()`, &got))
	assert.Less(t, got.Header, 60, "one header line")
	for _, hgt := range got.Buttons {
		assert.Less(t, hgt, 40, "no header item wraps")
	}
	assert.LessOrEqual(t, got.Width, got.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, got.InputScroll, got.Input+2, "the placeholder fits the composer")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "narrow.png"))
	assert.Empty(t, b.PageErrors())
}

// placeholderFits says whether the composer's placeholder fits its box.
const placeholderFits = `(() => { const i = document.querySelector('#input'); return i.value === '' && i.scrollHeight <= i.clientHeight + 2 && i.scrollWidth <= i.clientWidth; })()`

// TestBrowserPlaceholderAt420: the composer's placeholder fits a 420 px
// wide screen, whether the page was loaded there or made narrow later,
// and the long one comes back on a wide screen.
func TestBrowserPlaceholderAt420(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	resize := func(p *cdp.Page, w, hgt int) {
		p.Must("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": hgt, "deviceScaleFactor": 1, "mobile": false})
	}

	narrow := b.NewPage(420, 800)
	narrow.Navigate(h.ts.URL + "/")
	narrow.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "true", narrow.Str(`String(`+placeholderFits+`)`), "loaded at 420 px: %q", narrow.Str(`document.querySelector('#input').placeholder`))

	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	long := p.Str(`document.querySelector('#input').placeholder`)
	resize(p, 420, 800)
	p.WaitFor("the page at 420 px", `window.innerWidth === 420`)
	p.WaitFor("the placeholder to fit", placeholderFits)
	p.Screenshot(filepath.Join(t.ArtifactDir(), "placeholder-420.png"))
	for _, w := range []int{360, 600, 601, 700, 800} {
		resize(p, w, 800)
		p.WaitFor(fmt.Sprintf("the placeholder to fit %d px", w), fmt.Sprintf(`window.innerWidth === %d && `, w)+placeholderFits)
	}
	resize(p, 1280, 800)
	p.WaitFor("the long placeholder again", `document.querySelector('#input').placeholder === `+cdp.JSString(long))
	assert.Empty(t, b.PageErrors())
}

// TestBrowserOwnsItsSessions: the owner cookie is out of the page's
// scripts' reach, and a page whose saved session belongs to another browser
// opens a session of its own instead of failing.
func TestBrowserOwnsItsSessions(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	foreign := postSession(t, h.client, h.ts.URL) // the harness's client is another browser
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.NotContains(t, p.Str(`document.cookie`), ownerCookie, "the owner secret is HttpOnly")
	mine := strings.TrimPrefix(p.Str(`document.querySelector('#session').textContent`), "session ")
	assert.NotEqual(t, sessionOwner(foreign), sessionOwner(mine))

	p.JS(`localStorage.setItem('planround.webchat.session', ` + cdp.JSString(foreign) + `)`)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	now := strings.TrimPrefix(p.Str(`document.querySelector('#session').textContent`), "session ")
	assert.NotEqual(t, foreign, now, "the other browser's session is not opened")
	assert.Equal(t, sessionOwner(mine), sessionOwner(now), "a new session of this browser")

	p.TypeText("#input", "Hello!")
	p.Click("#send")
	p.WaitFor("the answer", `[...document.querySelectorAll('.turn')].at(-1)?.innerText.includes('demo model')`)
	assert.Empty(t, b.PageErrors())
}

// switcher is a handler whose target can be swapped: a "restarted" server
// on the same address.
type switcher struct {
	mu sync.Mutex // guards h
	h  http.Handler
}

func (s *switcher) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *switcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func newSwitchServer(t *testing.T, sw *switcher) *httptest.Server {
	ts := httptest.NewServer(sw) // 127.0.0.1
	t.Cleanup(ts.Close)
	return ts
}

// userCallModel is a scripted model that calls the tool the user's message
// names, with the arguments that follow the name ("progress {"steps":3}"),
// and then answers "Done.".
func userCallModel(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	var ids atomic.Int64
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("I will use a tool. <need_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("Done.").Finish("stop")
		}
		asked, _ := req.UserMessage()
		name, args, _ := strings.Cut(asked.Content, " ")
		// The name is the user's: an unknown tool is called too.
		return agenttest.Reply().Call(0, fmt.Sprintf("call_%d", ids.Add(1)), name, args).Finish("tool_calls").Unsolicited()
	})
	return srv
}

// TestBrowserMCP: the MCP servers in the header's panel, and an MCP tool's
// progress as its card's live output, kept when the call is interrupted; at
// 400 px wide the header stays one line and the panel fits.
func TestBrowserMCP(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	h := newMCPHarness(t, userCallModel(t),
		mcpclient.ServerConfig{Name: "tools", Command: bin, DisabledTools: only("echo", "progress")},
		mcpclient.ServerConfig{Name: "sandbox", Command: bin, Isolation: mcpclient.IsolationPerConversation, DisabledTools: only("counter")},
	)
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	// 1. The panel.
	p.WaitFor("the MCP button", `!document.querySelector('#mcp').hidden`)
	assert.True(t, p.Str(`String(document.querySelector('#mcp-panel').hidden)`) == "true", "the panel starts closed")
	p.Click("#mcp")
	p.WaitFor("the panel", `!document.querySelector('#mcp-panel').hidden && document.querySelectorAll('.mcp-server').length === 2`)
	var servers []struct {
		Name, State, Text string
		Tools             []string
	}
	require.NoError(t, p.Eval(`[...document.querySelectorAll('.mcp-server')].map(s => ({Name: s.dataset.server, State: s.dataset.state,
		Text: s.innerText, Tools: [...s.querySelectorAll('.tool')].map(e => e.textContent)}))`, &servers))
	require.Len(t, servers, 2)
	assert.Equal(t, "tools", servers[0].Name)
	assert.Equal(t, "connected", servers[0].State)
	assert.Equal(t, []string{"echo", "progress"}, servers[0].Tools)
	assert.Contains(t, servers[0].Text, "stdio · shared")
	assert.Equal(t, "sandbox", servers[1].Name)
	assert.Equal(t, []string{"counter"}, servers[1].Tools)
	assert.Contains(t, servers[1].Text, "starts per conversation")
	assert.Equal(t, "true", p.Str(`document.querySelector('#mcp').getAttribute('aria-expanded')`))
	dir := t.ArtifactDir()
	p.Screenshot(filepath.Join(dir, "mcp-panel.png"))
	p.Click("#mcp")
	p.WaitFor("the panel to close", `document.querySelector('#mcp-panel').hidden`)

	send := func(text string) {
		t.Helper()
		p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.TypeText("#input", text)
		p.Click("#send")
	}
	cardState := func(state string) string { return lastCard + `?.dataset.state === '` + state + `'` }

	// 2. Progress as live output, then the result.
	send(`progress {"steps":3,"delay_ms":700}`)
	p.WaitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, "progress", p.Str(lastCard+`.dataset.tool`))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the first step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 1 of 3')`)
	p.WaitFor("the second step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 2 of 3')`)
	p.Screenshot(filepath.Join(dir, "mcp-progress.png"))
	p.WaitFor("the card to be done", cardState("done"))
	assert.Contains(t, p.Str(lastCard+`.querySelectorAll('pre')[1].textContent`), "progress: done 3 steps")
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)

	// 3. Interrupted while it reports progress: what it had done stays.
	send(`progress {"steps":100,"delay_ms":500}`)
	p.WaitFor("the approval card", cardState("approval"))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the first step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 1 of 100')`)
	p.Click("#interrupt")
	p.WaitFor("the card to be invalidated", cardState("invalidated"))
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	assert.Contains(t, p.Str(lastCard+`.querySelector('details').textContent`), "partial output")
	assert.Contains(t, p.Str(lastCard+`.querySelector('details').textContent`), "step 1 of 100")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")

	// 4. A phone.
	n := b.NewPage(400, 800)
	n.Navigate(h.ts.URL + "/")
	n.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	n.WaitFor("the MCP button", `!document.querySelector('#mcp').hidden`)
	n.Click("#mcp")
	n.WaitFor("the panel", `document.querySelectorAll('.mcp-server').length === 2`)
	var got struct {
		Header, Width, Inner, PanelRight int
		Buttons                          []int
	}
	require.NoError(t, n.Eval(`(() => ({Header: document.querySelector('#top').offsetHeight,
		Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
		PanelRight: Math.ceil(Math.max(...[...document.querySelectorAll('#mcp-panel *')].map(e => e.getBoundingClientRect().right))),
		Buttons: [...document.querySelectorAll('#top button, #top .badge, .brand')].map(e => e.offsetHeight)}))()`, &got))
	assert.Less(t, got.Header, 60, "one header line")
	for _, hgt := range got.Buttons {
		assert.Less(t, hgt, 40, "no header item wraps")
	}
	assert.LessOrEqual(t, got.Width, got.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, got.PanelRight, got.Inner, "the panel fits")
	n.Screenshot(filepath.Join(dir, "mcp-narrow.png"))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
