package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
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
	b := startBrowser(t) // cleaned up before the servers: LIFO
	p := b.newPage(1280, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "planround-demo · built-in demo model", p.str(`document.querySelector('#model').textContent`))

	send := func(text string) {
		t.Helper()
		p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.typeText("#input", text)
		p.click("#send")
	}
	// newSys waits for a system message after the first n, with text.
	sysCount := func() int {
		var n int
		require.NoError(t, p.eval(`document.querySelectorAll('.sys').length`, &n))
		return n
	}
	newSys := func(n int, text string) {
		t.Helper()
		p.waitFor("the message "+text, fmt.Sprintf(`document.querySelectorAll('.sys').length > %d && [...document.querySelectorAll('.sys')].at(-1).textContent === %s`, n, jsString(text)))
	}
	cardState := func(state string) string {
		return lastCard + `?.dataset.state === '` + state + `'`
	}

	// 1. A weather turn, approved by a click, with "auto-approve this tool"
	// ticked.
	send("What's the weather in Paris?")
	p.waitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, "get_weather", p.str(lastCard+`.dataset.tool`))
	assert.Contains(t, p.str(lastCard+`.innerText`), `"city": "Paris"`)
	assert.Equal(t, "true", p.str(`document.body.dataset.running`))
	// Screenshots go to the test's artifact directory: kept with
	// go test -artifacts, removed otherwise.
	dir := t.ArtifactDir()
	p.screenshot(filepath.Join(dir, "approval.png"))
	p.clickJS(lastCard + `.querySelector('input.auto-approve')`)
	p.clickJS(lastCard + `.querySelector('button.approve')`)
	p.waitFor("the card to be done", cardState("done"))
	p.waitFor("the final text", `[...document.querySelectorAll('.turn')].at(-1).innerText.includes('Here is what I found')`)
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)
	result := p.str(lastCard + `.querySelectorAll('pre')[1].textContent`)
	assert.Contains(t, result, "Paris:")
	assert.Equal(t, `["get_weather"]`, p.str(`localStorage.getItem('planround.webchat.autoApprove')`))

	// 2. Model text that holds HTML: the demo quotes the question.
	const attack = `Tell me about <img src=x onerror="window.__xss=1"> and <b>bold</b>`
	send(attack)
	p.waitFor("the quoted answer", `[...document.querySelectorAll('.turn')].at(-1).innerText.includes('You asked')`)
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)
	assert.Contains(t, p.str(`[...document.querySelectorAll('.turn')].at(-1).textContent`), `<img src=x onerror="window.__xss=1">`)
	assert.Contains(t, p.str(`[...document.querySelectorAll('.msg.user')].at(-1).textContent`), `<b>bold</b>`)

	// 3. A tool result that holds HTML.
	send("Please run `echo '<img src=y onerror=window.__xss=2><i>italic</i>'`")
	p.waitFor("the run_command approval", cardState("approval"))
	assert.Equal(t, "run_command", p.str(lastCard+`.dataset.tool`))
	p.clickJS(lastCard + `.querySelector('button.approve')`)
	p.waitFor("the command to be done", cardState("done"))
	assert.Contains(t, p.str(lastCard+`.querySelectorAll('pre')[1].textContent`), "<img src=y onerror=window.__xss=2><i>italic</i>")
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)

	var injected struct {
		Img, B, I int
		XSS       bool
	}
	require.NoError(t, p.eval(`({Img: document.querySelectorAll('#messages img').length,
		B: document.querySelectorAll('#messages b').length, I: document.querySelectorAll('#messages i').length,
		XSS: window.__xss !== undefined})`, &injected))
	assert.Zero(t, injected.Img, "an <img> from model or tool text reached the DOM")
	assert.Zero(t, injected.B)
	assert.Zero(t, injected.I)
	assert.False(t, injected.XSS, "injected script ran")

	// 4. The same tool again: a new card, approved at once by the list.
	send("And the weather in Tokyo?")
	p.waitFor("the auto-approved card to be done", cardState("done")+` && `+lastCard+`.textContent.includes('Tokyo')`)
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)
	var weatherCards int
	require.NoError(t, p.eval(cards+`.filter(c => c.dataset.tool === 'get_weather').length`, &weatherCards))
	assert.Equal(t, 2, weatherCards, "a new card per call, even for the same tool")

	// 5. A rejection ends the session.
	send("Run `ls`")
	p.waitFor("the approval card", cardState("approval"))
	n := sysCount()
	p.clickJS(lastCard + `.querySelector('button.reject')`)
	p.waitFor("the card to be rejected", cardState("rejected"))
	newSys(n, "Session ended by a rejection.")
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)

	// 6. An interrupt while a card waits for approval.
	send("What time is it in Tokyo?")
	p.waitFor("the approval card", cardState("approval"))
	assert.Equal(t, "get_time", p.str(lastCard+`.dataset.tool`))
	p.js(`window.__interruptLabels = [];
		new MutationObserver(() => window.__interruptLabels.push(document.querySelector('#interrupt').textContent))
			.observe(document.querySelector('#interrupt'), {childList: true, characterData: true, subtree: true})`)
	n = sysCount()
	p.click("#interrupt")
	newSys(n, "Interrupted by the user.")
	assert.Equal(t, "invalidated", p.str(lastCard+`.dataset.state`))
	assert.Equal(t, "false", p.str(`document.body.dataset.interrupting`))
	var labels []string
	require.NoError(t, p.eval(`window.__interruptLabels.filter((l, i, a) => i === 0 || a[i-1] !== l)`, &labels))
	assert.Equal(t, []string{"Interrupting…", "Interrupt"}, labels, "the button waits for the server's confirmation")
	waitApprovals(t, h.srv.approvals, 0)

	// 7. Live output of a running command, kept when it is interrupted.
	send("Please run `echo first line; sleep 30`")
	p.waitFor("the run_command approval", cardState("approval"))
	p.clickJS(lastCard + `.querySelector('button.approve')`)
	// The output block, not the arguments (which say "first line" too).
	p.waitFor("the live output", cardState("executing")+` && [...`+lastCard+`.querySelectorAll('.label')].some(l => l.textContent === 'output' && l.nextElementSibling.textContent.includes('first line'))`)
	n = sysCount()
	p.click("#interrupt")
	newSys(n, "Interrupted by the user.")
	assert.Equal(t, "invalidated", p.str(lastCard+`.dataset.state`))
	assert.Equal(t, 1, strings.Count(p.str(`document.querySelector('#messages').textContent`), "Session ended by a rejection."), "one message per event")
	assert.Contains(t, p.str(lastCard+`.querySelector('details').textContent`), "partial output")
	assert.Equal(t, "true", p.str(`String(`+lastCard+`.querySelector('details').open)`), "the output watched live stays in view")
	assert.Contains(t, p.str(lastCard+`.querySelector('details').textContent`), "first line")

	// 8. A silent display tool: no approval, and the card is drawn.
	send("Show me a card about <planround>")
	p.waitFor("the show_card card", cardState("done")+` && `+lastCard+`.dataset.tool === 'show_card'`)
	assert.Equal(t, "<planround>", p.str(lastCard+`.querySelector('.display-card .title').textContent`))
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)

	// What the lead looks at.
	p.js(`document.querySelector('#scroll').scrollTop = 1e9`)
	p.screenshot(filepath.Join(dir, "webchat.png"))

	// 9. A reload draws the conversation again from the history.
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.waitFor("the history", cards+`.length === 7`)
	var reloaded struct {
		Users int
		Text  string
	}
	require.NoError(t, p.eval(`({Users: document.querySelectorAll('.msg.user').length, Text: document.querySelector('#messages').textContent})`, &reloaded))
	assert.Equal(t, 8, reloaded.Users)
	assert.Contains(t, reloaded.Text, "Here is what I found")
	assert.NotContains(t, reloaded.Text, "<need_tool>", "control tags are not shown")
	assert.Contains(t, reloaded.Text, `"city": "Paris"`, "a reloaded card shows its arguments")
	assert.NotContains(t, reloaded.Text, "[object Object]")
	assert.Equal(t, "0", p.str(`String(document.querySelectorAll('#messages img').length)`))

	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
	assert.False(t, strings.Contains(p.str(`document.title`), "pwned"))
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
	b := startBrowser(t)
	p := b.newPage(1280, 800)

	p.navigate(front.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.typeText("#input", "Weather in Paris and the time in Tokyo?")
	p.click("#send")
	p.waitFor("the approval card", cards+`.some(c => c.dataset.state === 'approval')`)

	// A crash: the next server takes over and the old stream is cut.
	sw.set(next.srv)
	front.CloseClientConnections()
	p.waitFor("the page to reconnect", `document.querySelector('#conn').textContent === 'connected' && document.body.dataset.running === 'false'`)
	assert.Contains(t, p.str(`document.querySelector('#messages').innerText`), "Reconnected to a restarted server")

	p.click(`#messages .card[data-state=approval] button.approve`)
	p.waitFor("every pending card invalidated", cards+`.every(c => c.dataset.state === 'invalidated')`)
	p.waitFor("the stale message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent.includes('no longer pending')`)
	var n int
	require.NoError(t, p.eval(cards+`.length`, &n))
	assert.Equal(t, 2, n, "both calls of the round had cards")

	// The restarted server's approvals time out quickly: the page says so.
	// The round's second call never began: invalidated, not rejected.
	p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.typeText("#input", "Weather in Rome and the time in Tokyo?")
	p.click("#send")
	p.waitFor("the timeout message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent.startsWith('Approval timed out')`)
	first := cards + `.at(-2)`
	assert.Equal(t, "rejected", p.str(first+`.dataset.state`))
	assert.Contains(t, p.str(first+`.querySelector('.reason').textContent`), "approval timed out after 300ms")
	assert.Equal(t, "get_time", p.str(lastCard+`.dataset.tool`))
	assert.Equal(t, "invalidated", p.str(lastCard+`.dataset.state`), "a call that never began was not rejected")
	assert.Empty(t, b.pageErrors())
}

// TestBrowserShutdownInvalidatesCards: a server shutting down interrupts the
// run; its cards are invalidated, none says "rejected by user".
func TestBrowserShutdownInvalidatesCards(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := startBrowser(t)
	p := b.newPage(1280, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.typeText("#input", "Weather in Paris and the time in Tokyo?")
	p.click("#send")
	p.waitFor("the approval card", cards+`.some(c => c.dataset.state === 'approval')`)

	h.srv.Close() // what SIGTERM does: the runs end, their pages are told
	p.waitFor("the shutdown message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent === 'Interrupted: the server is shutting down.'`)
	var got struct {
		States []string
		Text   string
	}
	require.NoError(t, p.eval(`({States: `+cards+`.map(c => c.dataset.state), Text: document.querySelector('#messages').innerText})`, &got))
	assert.Equal(t, []string{"invalidated", "invalidated"}, got.States, "nobody rejected these calls")
	assert.NotContains(t, got.Text, "rejected by user")
	assert.Contains(t, got.Text, "interrupted while waiting for approval")
	assert.Empty(t, b.pageErrors())
}

// TestBrowserNarrow: on a 400 px wide screen the header stays one line, the
// page does not scroll sideways, and the composer's placeholder fits.
func TestBrowserNarrow(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := startBrowser(t)
	p := b.newPage(400, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	var got struct {
		Header, Input, InputScroll, Width, Inner int
		Buttons                                  []int
	}
	require.NoError(t, p.eval(`(() => {
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
	p.screenshot(filepath.Join(t.ArtifactDir(), "narrow.png"))
	assert.Empty(t, b.pageErrors())
}

// TestBrowserOwnsItsSessions: the owner cookie is out of the page's
// scripts' reach, and a page whose saved session belongs to another browser
// opens a session of its own instead of failing.
func TestBrowserOwnsItsSessions(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	foreign := postSession(t, h.client, h.ts.URL) // the harness's client is another browser
	b := startBrowser(t)
	p := b.newPage(1280, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.NotContains(t, p.str(`document.cookie`), ownerCookie, "the owner secret is HttpOnly")
	mine := strings.TrimPrefix(p.str(`document.querySelector('#session').textContent`), "session ")
	assert.NotEqual(t, sessionOwner(foreign), sessionOwner(mine))

	p.js(`localStorage.setItem('planround.webchat.session', ` + jsString(foreign) + `)`)
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	now := strings.TrimPrefix(p.str(`document.querySelector('#session').textContent`), "session ")
	assert.NotEqual(t, foreign, now, "the other browser's session is not opened")
	assert.Equal(t, sessionOwner(mine), sessionOwner(now), "a new session of this browser")

	p.typeText("#input", "Hello!")
	p.click("#send")
	p.waitFor("the answer", `[...document.querySelectorAll('.turn')].at(-1)?.innerText.includes('demo model')`)
	assert.Empty(t, b.pageErrors())
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
		var asked string // the user's message, before the agent's "[continue]"
		for _, m := range slices.Backward(req.Messages) {
			if m.Role == "user" && m.Content != "[continue]" {
				asked = m.Content
				break
			}
		}
		name, args, _ := strings.Cut(asked, " ")
		return agenttest.Reply().Call(0, fmt.Sprintf("call_%d", ids.Add(1)), name, args).Finish("tool_calls")
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
	b := startBrowser(t) // cleaned up before the servers: LIFO
	p := b.newPage(1280, 800)
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	// 1. The panel.
	p.waitFor("the MCP button", `!document.querySelector('#mcp').hidden`)
	assert.True(t, p.str(`String(document.querySelector('#mcp-panel').hidden)`) == "true", "the panel starts closed")
	p.click("#mcp")
	p.waitFor("the panel", `!document.querySelector('#mcp-panel').hidden && document.querySelectorAll('.mcp-server').length === 2`)
	var servers []struct {
		Name, State, Text string
		Tools             []string
	}
	require.NoError(t, p.eval(`[...document.querySelectorAll('.mcp-server')].map(s => ({Name: s.dataset.server, State: s.dataset.state,
		Text: s.innerText, Tools: [...s.querySelectorAll('.tool')].map(e => e.textContent)}))`, &servers))
	require.Len(t, servers, 2)
	assert.Equal(t, "tools", servers[0].Name)
	assert.Equal(t, "connected", servers[0].State)
	assert.Equal(t, []string{"echo", "progress"}, servers[0].Tools)
	assert.Contains(t, servers[0].Text, "stdio · shared")
	assert.Equal(t, "sandbox", servers[1].Name)
	assert.Equal(t, []string{"counter"}, servers[1].Tools)
	assert.Contains(t, servers[1].Text, "starts per conversation")
	assert.Equal(t, "true", p.str(`document.querySelector('#mcp').getAttribute('aria-expanded')`))
	dir := t.ArtifactDir()
	p.screenshot(filepath.Join(dir, "mcp-panel.png"))
	p.click("#mcp")
	p.waitFor("the panel to close", `document.querySelector('#mcp-panel').hidden`)

	send := func(text string) {
		t.Helper()
		p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.typeText("#input", text)
		p.click("#send")
	}
	cardState := func(state string) string { return lastCard + `?.dataset.state === '` + state + `'` }

	// 2. Progress as live output, then the result.
	send(`progress {"steps":3,"delay_ms":700}`)
	p.waitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, "progress", p.str(lastCard+`.dataset.tool`))
	p.clickJS(lastCard + `.querySelector('button.approve')`)
	p.waitFor("the first step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 1 of 3')`)
	p.waitFor("the second step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 2 of 3')`)
	p.screenshot(filepath.Join(dir, "mcp-progress.png"))
	p.waitFor("the card to be done", cardState("done"))
	assert.Contains(t, p.str(lastCard+`.querySelectorAll('pre')[1].textContent`), "progress: done 3 steps")
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)

	// 3. Interrupted while it reports progress: what it had done stays.
	send(`progress {"steps":100,"delay_ms":500}`)
	p.waitFor("the approval card", cardState("approval"))
	p.clickJS(lastCard + `.querySelector('button.approve')`)
	p.waitFor("the first step, live", cardState("executing")+` && `+lastCard+`.textContent.includes('step 1 of 100')`)
	p.click("#interrupt")
	p.waitFor("the card to be invalidated", cardState("invalidated"))
	p.waitFor("the run to end", `document.body.dataset.running === 'false'`)
	assert.Contains(t, p.str(lastCard+`.querySelector('details').textContent`), "partial output")
	assert.Contains(t, p.str(lastCard+`.querySelector('details').textContent`), "step 1 of 100")
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")

	// 4. A phone.
	n := b.newPage(400, 800)
	n.navigate(h.ts.URL + "/")
	n.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	n.waitFor("the MCP button", `!document.querySelector('#mcp').hidden`)
	n.click("#mcp")
	n.waitFor("the panel", `document.querySelectorAll('.mcp-server').length === 2`)
	var got struct {
		Header, Width, Inner, PanelRight int
		Buttons                          []int
	}
	require.NoError(t, n.eval(`(() => ({Header: document.querySelector('#top').offsetHeight,
		Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
		PanelRight: Math.ceil(Math.max(...[...document.querySelectorAll('#mcp-panel *')].map(e => e.getBoundingClientRect().right))),
		Buttons: [...document.querySelectorAll('#top button, #top .badge, .brand')].map(e => e.offsetHeight)}))()`, &got))
	assert.Less(t, got.Header, 60, "one header line")
	for _, hgt := range got.Buttons {
		assert.Less(t, hgt, 40, "no header item wraps")
	}
	assert.LessOrEqual(t, got.Width, got.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, got.PanelRight, got.Inner, "the panel fits")
	n.screenshot(filepath.Join(dir, "mcp-narrow.png"))
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}
