package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

var updateDocs = flag.Bool("update-docs", false, "write the README's screenshot, docs/webchat.png, from TestBrowserThemes")

// items is a JS expression: the conversations of the sidebar.
const items = `[...document.querySelectorAll('#sessions .session-item')]`

// currentItem is a JS expression: the highlighted conversation.
const currentItem = `document.querySelector('#sessions .session-item[aria-current="true"]')`

// sidebarList is what the sidebar shows: titles, and which is current.
type sidebarList struct {
	Titles  []string
	IDs     []string
	Current string
}

func (p *page) sidebar() sidebarList {
	p.b.t.Helper()
	var l sidebarList
	require.NoError(p.b.t, p.eval(`({Titles: `+items+`.map(e => e.querySelector('.title').textContent),
		IDs: `+items+`.map(e => e.dataset.sessionId), Current: `+currentItem+`?.dataset.sessionId ?? ''})`, &l))
	return l
}

// currentSession is the session the page shows.
func (p *page) currentSession() string {
	p.b.t.Helper()
	return strings.TrimPrefix(p.str(`document.querySelector('#session').textContent`), "session ")
}

// newChat opens a new conversation with the header's button and returns
// its id once the page is connected to it.
func (p *page) newChat() string {
	p.b.t.Helper()
	old := p.currentSession()
	p.click("#new-chat")
	p.waitFor("a new conversation", `document.querySelector('#session').textContent !== `+jsString("session "+old)+` &&
		document.querySelector('#conn').textContent === 'connected'`)
	return p.currentSession()
}

// sendAndWait sends text and waits for the run to end: the page is idle
// with an answer after the message.
func (p *page) sendAndWait(text string) {
	p.b.t.Helper()
	p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	var n int
	require.NoError(p.b.t, p.eval(`document.querySelectorAll('.msg.user').length`, &n))
	p.typeText("#input", text)
	p.click("#send")
	p.waitFor("the run to end", fmt.Sprintf(`document.querySelectorAll('.msg.user').length === %d && document.body.dataset.running === 'false' &&
		(() => { const all = [...document.querySelectorAll('#messages > *')];
			return all.slice(all.findLastIndex(e => e.matches('.msg.user')) + 1).some(e => e.matches('.turn:not(.live)')); })()`, n+1))
}

// sendAndWaitFor sends text and waits until expr is true.
func (p *page) sendAndWaitFor(text, expr string) {
	p.b.t.Helper()
	p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.typeText("#input", text)
	p.click("#send")
	p.waitFor(expr, expr)
}

// TestBrowserSessions: the sidebar lists this browser's conversations,
// titled after their first message, and switches between them; the list
// and the open conversation survive a reload; a conversation is renamed,
// exported (a real download), imported back (a real file chosen) and
// deleted from the page; a bad file is refused with the server's reason;
// a tab showing a conversation deleted in another tab moves on.
func TestBrowserSessions(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	// Another browser's conversation, which this one never lists.
	theirs := h.newSession(t)
	h.converse(t, theirs, "Hello from someone else")
	b := startBrowser(t)
	downloads := t.TempDir()
	b.allowDownloads(downloads)
	p := b.newPage(1280, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	first := p.currentSession()
	p.waitFor("the new conversation in the list", items+`.length === 1`)
	assert.Equal(t, sidebarList{Titles: []string{"New conversation"}, IDs: []string{first}, Current: first}, p.sidebar(),
		"a conversation nothing was sent in: not stored, shown at the top")

	// 1. Two conversations, titled after their first messages.
	p.sendAndWait("Hello!")
	p.waitFor("the stored title", items+`[0]?.querySelector('.title').textContent === 'Hello!'`)
	second := p.newChat()
	p.sendAndWait("Tell me about <b>Go</b>")
	p.waitFor("two stored conversations", items+`.length === 2 && `+items+`[0].querySelector('.title').textContent === 'Tell me about <b>Go</b>'`)
	assert.Equal(t, sidebarList{Titles: []string{"Tell me about <b>Go</b>", "Hello!"}, IDs: []string{second, first}, Current: second}, p.sidebar())
	assert.Equal(t, "0", p.str(`String(document.querySelectorAll('#sessions b').length)`), "a title is text, never HTML")
	assert.NotContains(t, p.sidebar().IDs, theirs)

	// 2. Switching: the list opens the other conversation.
	p.clickJS(items + `[1].querySelector('button.open')`)
	p.waitFor("the first conversation", `document.querySelector('#session').textContent === 'session `+first+`' && document.querySelector('#messages').textContent.includes('Nice to meet you')`)
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.NotContains(t, p.str(`document.querySelector('#messages').textContent`), "Tell me about")
	assert.Equal(t, first, p.sidebar().Current)
	assert.Equal(t, first, p.str(`localStorage.getItem('planround.webchat.session')`))

	// 3. A reload: the same conversation, the same list.
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.waitFor("the list", items+`.length === 2`)
	assert.Equal(t, first, p.currentSession())
	assert.Contains(t, p.str(`document.querySelector('#messages').textContent`), "Nice to meet you")
	assert.Equal(t, sidebarList{Titles: []string{"Tell me about <b>Go</b>", "Hello!"}, IDs: []string{second, first}, Current: first}, p.sidebar())
	p.clickJS(items + `[0].querySelector('button.open')`)
	p.waitFor("the second conversation", `document.querySelector('#messages').textContent.includes('You asked')`)
	p.clickJS(items + `[1].querySelector('button.open')`)
	p.waitFor("the first conversation", `document.querySelector('#session').textContent === 'session `+first+`' && document.querySelector('#messages').textContent.includes('Nice to meet you')`)

	// 4. Rename on the page.
	p.clickJS(currentItem + `.querySelector('button.rename')`)
	p.waitFor("the title editor", `document.activeElement?.classList.contains('rename-input')`)
	p.js(`document.activeElement.select()`)
	p.must("Input.insertText", map[string]any{"text": "Greetings"})
	p.must("Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
	p.must("Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
	p.waitFor("the new title", currentItem+`?.querySelector('.title')?.textContent === 'Greetings'`)
	stored, err := h.srv.store.Session(t.Context(), first)
	require.NoError(t, err)
	assert.Equal(t, "Greetings", stored.Title, "renamed in the Store")

	// 5. Export: a download of the session's export.
	p.clickJS(currentItem + `.querySelector('button.export')`)
	file := filepath.Join(downloads, "planround-greetings.json")
	require.Eventually(t, func() bool { _, err := os.Stat(file); return err == nil }, waitLimit, 20*time.Millisecond, "the download")
	var doc []byte
	require.Eventually(t, func() bool {
		doc, err = os.ReadFile(file)
		return err == nil && json.Valid(doc)
	}, waitLimit, 20*time.Millisecond, "the whole download")
	want, err := memory.Export(t.Context(), h.srv.store, first)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(doc))
	p.waitFor("the status", `document.querySelector('#sessions-status').textContent === 'Exported planround-greetings.json'`)

	// 6. Import: the file chosen, a new conversation opened.
	p.setFiles("#import-file", file)
	p.waitFor("the imported conversation", items+`.length === 3 && `+currentItem+`?.dataset.sessionId !== `+jsString(first)+` && `+
		currentItem+`.querySelector('.title').textContent === 'Greetings'`)
	imported := p.currentSession()
	assert.Equal(t, sessionOwner(first), sessionOwner(imported), "this browser's")
	assert.Equal(t, sidebarList{Titles: []string{"Greetings", "Greetings", "Tell me about <b>Go</b>"}, IDs: []string{imported, first, second}, Current: imported}, p.sidebar(),
		"most recently changed first: the import, the rename")
	p.waitFor("its history", `document.querySelector('#messages').textContent.includes('Nice to meet you')`)
	assert.Equal(t, "Imported planround-greetings.json", p.str(`document.querySelector('#sessions-status').textContent`))

	// A file that is no export: refused, with the server's reason.
	bad := filepath.Join(t.TempDir(), "notes.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"notes": ["not a conversation"]}`), 0o644))
	p.setFiles("#import-file", bad)
	p.waitFor("the error", `document.querySelector('#sessions-status').classList.contains('error')`)
	assert.Contains(t, p.str(`document.querySelector('#sessions-status').textContent`), "Could not import notes.json: not a session export")
	assert.Equal(t, imported, p.currentSession(), "the open conversation stays")
	assert.Len(t, p.sidebar().IDs, 3)

	// 7. Delete on the page: the first click arms, the second deletes; the
	// page opens a new conversation.
	p.clickJS(currentItem + `.querySelector('button.delete')`)
	p.waitFor("the armed button", currentItem+`.querySelector('button.delete.armed')?.textContent === 'Delete?'`)
	assert.Len(t, p.sidebar().IDs, 3, "one click deletes nothing")
	p.clickJS(currentItem + `.querySelector('button.delete')`)
	p.waitFor("a new conversation", `document.querySelector('#session').textContent !== 'session `+imported+`' && `+items+`.length === 3 && `+items+`[0].querySelector('.title').textContent === 'New conversation'`)
	assert.Equal(t, []string{p.currentSession(), first, second}, p.sidebar().IDs)
	_, err = h.srv.store.Session(t.Context(), imported)
	assert.ErrorIs(t, err, memory.ErrNotFound)

	// 8. Deleted in another tab: this tab moves to a new conversation.
	p.clickJS(items + `[2].querySelector('button.open')`)
	p.waitFor("the second conversation", `document.querySelector('#session').textContent === 'session `+second+`'`)
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	other := b.newPage(1280, 800)
	other.navigate(h.ts.URL + "/")
	other.waitFor("the same conversation", `document.querySelector('#session').textContent === 'session `+second+`' && document.querySelector('#conn').textContent === 'connected'`)
	other.waitFor("the list", items+`.length === 2`)
	p.clickJS(currentItem + `.querySelector('button.delete')`)
	p.clickJS(currentItem + `.querySelector('button.delete')`)
	other.waitFor("the other tab to move on", `document.querySelector('#session').textContent !== 'session `+second+`' && document.querySelector('#sessions-status').textContent === 'This conversation was deleted in another tab.'`)
	p.waitFor("this tab to move on", `document.querySelector('#session').textContent !== 'session `+second+`'`)
	p.waitFor("the list without it", items+`.length === 2`)
	assert.Equal(t, []string{"New conversation", "Greetings"}, p.sidebar().Titles)

	// On a wide screen the header's button hides the list and shows it.
	visible := `getComputedStyle(document.querySelector('#sidebar')).display !== 'none'`
	assert.Equal(t, "true", p.str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	p.click("#sidebar-toggle")
	p.waitFor("the list hidden", `!(`+visible+`) && document.querySelector('#sidebar-toggle').getAttribute('aria-expanded') === 'false'`)
	p.click("#sidebar-toggle")
	p.waitFor("the list shown", visible+` && document.querySelector('#sidebar-toggle').getAttribute('aria-expanded') === 'true'`)

	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}

// TestBrowserSidebarNarrow: on a phone the conversations are a drawer,
// closed until the header's button opens it; choosing one, or touching the
// chat behind it, closes it.
func TestBrowserSidebarNarrow(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := startBrowser(t)
	p := b.newPage(400, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.sendAndWait("Hello!")
	visible := `getComputedStyle(document.querySelector('#sidebar')).display !== 'none'`
	assert.Equal(t, "false", p.str(`String(`+visible+`)`), "closed on a phone")
	assert.Equal(t, "false", p.str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	p.click("#sidebar-toggle")
	p.waitFor("the drawer", visible+` && `+items+`.length === 1`)
	var got struct{ Width, Inner, Right int }
	require.NoError(t, p.eval(`({Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
		Right: Math.ceil(document.querySelector('#sidebar').getBoundingClientRect().right)})`, &got))
	assert.LessOrEqual(t, got.Width, got.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, got.Right, got.Inner, "the drawer fits")
	p.screenshot(filepath.Join(t.ArtifactDir(), "sidebar-narrow.png"))
	p.clickJS(items + `[0].querySelector('button.open')`)
	p.waitFor("the drawer to close", `!(`+visible+`)`)
	p.click("#sidebar-toggle")
	p.waitFor("the drawer", visible)
	p.must("Input.dispatchMouseEvent", map[string]any{"type": "mousePressed", "x": 380, "y": 400, "button": "left", "clickCount": 1})
	p.must("Input.dispatchMouseEvent", map[string]any{"type": "mouseReleased", "x": 380, "y": 400, "button": "left", "clickCount": 1})
	p.waitFor("the drawer to close when the chat is touched", `!(`+visible+`)`)
	assert.Equal(t, "false", p.str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}

// TestBrowserThemes: the page follows the system's colour scheme: light and
// dark (prefers-color-scheme, emulated) both render, with other colours and
// readable text. With -update-docs it writes the README's screenshot.
func TestBrowserThemes(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{Skills: testSkills(t)}) // the picker shows in the screenshot
	b := startBrowser(t)
	p := b.newPage(1000, 680)
	p.emulateColorScheme("light")

	// A conversation with something of everything.
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.sendAndWait("Hello!")
	p.newChat()
	p.sendAndWait("Show me a card about planround")
	p.newChat()
	// One call done, its result open; the next one waits for approval.
	p.waitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.typeText("#input", "What's the weather in Paris and the time in Tokyo?")
	p.click("#send")
	first := `document.querySelector('#messages .card')`
	p.waitFor("the first approval", first+`?.dataset.state === 'approval' && `+first+`.querySelector('button.approve')`)
	p.clickJS(first + `.querySelector('button.approve')`)
	p.waitFor("the second approval", first+`.dataset.state === 'done' && `+lastCard+`.dataset.state === 'approval' && `+lastCard+`.querySelector('button.approve')`)
	p.js(first + `.querySelector('details').open = true`)
	p.waitFor("three conversations", items+`.length === 3`)
	p.js(`document.activeElement.blur(); document.querySelector('#scroll').scrollTop = 1e9`)

	type colours struct {
		Dark                        bool
		Body, Text, Panel, Card, In string
	}
	read := func() colours {
		var c colours
		require.NoError(t, p.eval(`(() => { const s = (q, k) => getComputedStyle(document.querySelector(q))[k];
			return {Dark: matchMedia('(prefers-color-scheme: dark)').matches, Body: s('body', 'backgroundColor'), Text: s('body', 'color'),
				Panel: s('#top', 'backgroundColor'), Card: s('#messages .card', 'backgroundColor'), In: s('#input', 'backgroundColor')}; })()`, &c))
		return c
	}
	dir := t.ArtifactDir()
	light := read()
	p.screenshot(filepath.Join(dir, "light.png"))
	p.emulateColorScheme("dark")
	p.waitFor("the dark scheme", `matchMedia('(prefers-color-scheme: dark)').matches`)
	dark := read()
	p.screenshot(filepath.Join(dir, "dark.png"))

	assert.False(t, light.Dark)
	assert.True(t, dark.Dark)
	assert.NotEqual(t, light.Body, dark.Body, "the page background follows the scheme")
	assert.NotEqual(t, light.Panel, dark.Panel)
	assert.NotEqual(t, light.Card, dark.Card)
	assert.NotEqual(t, light.In, dark.In, "the composer too")
	for _, c := range []struct {
		name   string
		c      colours
		darkBg bool
	}{{"light", light, false}, {"dark", dark, true}} {
		bg, text := luminance(t, c.c.Body), luminance(t, c.c.Text)
		assert.Equal(t, c.darkBg, bg < 0.2, "%s: background %s", c.name, c.c.Body)
		assert.Greater(t, contrast(bg, text), 7.0, "%s: text %s on %s", c.name, c.c.Text, c.c.Body)
		assert.Equal(t, c.darkBg, luminance(t, c.c.Panel) < 0.2, "%s: header %s", c.name, c.c.Panel)
		assert.Equal(t, c.darkBg, luminance(t, c.c.In) < 0.2, "%s: composer %s", c.name, c.c.In)
	}

	if *updateDocs {
		p.emulateColorScheme("light")
		p.waitFor("the light scheme", `!matchMedia('(prefers-color-scheme: dark)').matches`)
		shot := filepath.Join(dir, "docs.png")
		p.screenshot(shot)
		writeSmallPNG(t, shot, filepath.Join("..", "..", "docs", "webchat.png"))
	}
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}

// TestBrowserSpeech: the speech toggle is off until turned on, and then
// kept in localStorage; with it on, the replies the model flagged for voice
// are read aloud a sentence at a time, others are not; turning it off stops
// the speech. speechSynthesis is replaced by a recorder.
func TestBrowserSpeech(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := startBrowser(t)
	p := b.newPage(1280, 800)
	p.addInitScript(`window.__spoken = []; window.__cancels = 0;
		speechSynthesis.speak = (u) => window.__spoken.push(u.text);
		speechSynthesis.cancel = () => { window.__cancels++; };`)
	spoken := func() []string {
		var s []string
		require.NoError(t, p.eval(`window.__spoken`, &s))
		return s
	}

	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "false", p.str(`String(document.querySelector('#speech').hidden)`), "the browser can speak: the toggle shows")
	assert.Equal(t, "false", p.str(`document.querySelector('#speech').getAttribute('aria-pressed')`), "off by default")
	assert.Equal(t, "null", p.str(`String(localStorage.getItem('planround.webchat.speech'))`))

	// Off: a voice reply is marked, not spoken.
	p.sendAndWait("Say good morning")
	p.waitFor("the voice reply", `document.querySelectorAll('.text.voice').length > 0`)
	assert.Empty(t, spoken(), "nothing is read aloud with the toggle off")

	// On: kept, and voice replies are read aloud.
	p.click("#speech")
	p.waitFor("the toggle on", `document.querySelector('#speech').getAttribute('aria-pressed') === 'true'`)
	assert.Equal(t, "on", p.str(`localStorage.getItem('planround.webchat.speech')`))
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "true", p.str(`document.querySelector('#speech').getAttribute('aria-pressed')`), "kept across a reload")
	assert.Empty(t, spoken(), "stored replies are not read aloud")

	p.sendAndWait("Hello!")
	assert.Empty(t, spoken(), "a reply not flagged for voice is not read aloud")
	p.sendAndWait("Please say good night")
	var voiced string
	require.NoError(t, p.eval(`[...[...document.querySelectorAll('.turn')].at(-1).querySelectorAll('.text.voice')].map(e => e.textContent).join(' ')`, &voiced))
	got := spoken()
	assert.Equal(t, []string{"Good question, I can answer that in words.", "Good night!", "I said it out loud, so this reply is flagged for speech."}, got,
		"a sentence at a time")
	assert.Equal(t, strings.Join(strings.Fields(voiced), " "), strings.Join(got, " "), "what is shown is what is said")

	// Off again: speech stops, and is kept off.
	var cancels int
	require.NoError(t, p.eval(`window.__cancels`, &cancels))
	p.click("#speech")
	p.waitFor("the toggle off", `document.querySelector('#speech').getAttribute('aria-pressed') === 'false'`)
	var after int
	require.NoError(t, p.eval(`window.__cancels`, &after))
	assert.Greater(t, after, cancels, "turning it off stops what is being said")
	assert.Equal(t, "off", p.str(`localStorage.getItem('planround.webchat.speech')`))
	p.sendAndWait("Say it again")
	assert.Len(t, spoken(), 3, "nothing more is read aloud")
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}

// luminance is the relative luminance (WCAG) of a CSS rgb() or rgba()
// colour.
func luminance(t *testing.T, css string) float64 {
	t.Helper()
	var r, g, b float64
	s := strings.NewReplacer("rgba(", "", "rgb(", "", ")", "", ",", " ").Replace(css)
	_, err := fmt.Sscan(s, &r, &g, &b)
	require.NoError(t, err, "colour %q", css)
	lin := func(c float64) float64 {
		c /= 255
		if c <= 0.04045 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// contrast is the WCAG contrast ratio of two luminances.
func contrast(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	return (a + 0.05) / (b + 0.05)
}

// writeSmallPNG writes the PNG at src to dst, compressed as much as the
// standard encoder can.
func writeSmallPNG(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	img, _, err := image.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, img))
	if out.Len() > len(data) {
		out.Reset()
		out.Write(data)
	}
	require.NoError(t, os.WriteFile(dst, out.Bytes(), 0o644))
	t.Logf("wrote %s (%d bytes)", dst, out.Len())
}
