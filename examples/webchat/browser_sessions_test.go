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

	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

var updateDocs = flag.Bool("update-docs", false, "write the screenshot of docs/webchat.md, docs/webchat.png, from TestBrowserThemes")

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

func sidebar(p *cdp.Page) sidebarList {
	p.T().Helper()
	var l sidebarList
	require.NoError(p.T(), p.Eval(`({Titles: `+items+`.map(e => e.querySelector('.title').textContent),
		IDs: `+items+`.map(e => e.dataset.sessionId), Current: `+currentItem+`?.dataset.sessionId ?? ''})`, &l))
	return l
}

// currentSession is the session the page shows.
func currentSession(p *cdp.Page) string {
	p.T().Helper()
	return strings.TrimPrefix(p.Str(`document.querySelector('#session').textContent`), "session ")
}

// newChat opens a new conversation with the header's button and returns
// its id once the page is connected to it.
func newChat(p *cdp.Page) string {
	p.T().Helper()
	old := currentSession(p)
	p.Click("#new-chat")
	p.WaitFor("a new conversation", `document.querySelector('#session').textContent !== `+cdp.JSString("session "+old)+` &&
		document.querySelector('#conn').textContent === 'connected'`)
	return currentSession(p)
}

// sendAndWait sends text and waits for the run to end: the page is idle
// with an answer after the message.
func sendAndWait(p *cdp.Page, text string) {
	p.T().Helper()
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	var n int
	require.NoError(p.T(), p.Eval(`document.querySelectorAll('.msg.user').length`, &n))
	p.TypeText("#input", text)
	p.Click("#send")
	p.WaitFor("the run to end", fmt.Sprintf(`document.querySelectorAll('.msg.user').length === %d && document.body.dataset.running === 'false' &&
		(() => { const all = [...document.querySelectorAll('#messages > *')];
			return all.slice(all.findLastIndex(e => e.matches('.msg.user')) + 1).some(e => e.matches('.turn:not(.live)')); })()`, n+1))
}

// sendAndWaitFor sends text and waits until expr is true.
func sendAndWaitFor(p *cdp.Page, text, expr string) {
	p.T().Helper()
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", text)
	p.Click("#send")
	p.WaitFor(expr, expr)
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
	b := cdp.Start(t)
	downloads := t.TempDir()
	b.AllowDownloads(downloads)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	first := currentSession(p)
	p.WaitFor("the new conversation in the list", items+`.length === 1`)
	assert.Equal(t, sidebarList{Titles: []string{"New conversation"}, IDs: []string{first}, Current: first}, sidebar(p),
		"a conversation nothing was sent in: not stored, shown at the top")

	// 1. Two conversations, titled after their first messages.
	sendAndWait(p, "Hello!")
	p.WaitFor("the stored title", items+`[0]?.querySelector('.title').textContent === 'Hello!'`)
	second := newChat(p)
	sendAndWait(p, "Tell me about <b>Go</b>")
	p.WaitFor("two stored conversations", items+`.length === 2 && `+items+`[0].querySelector('.title').textContent === 'Tell me about <b>Go</b>'`)
	assert.Equal(t, sidebarList{Titles: []string{"Tell me about <b>Go</b>", "Hello!"}, IDs: []string{second, first}, Current: second}, sidebar(p))
	assert.Equal(t, "0", p.Str(`String(document.querySelectorAll('#sessions b').length)`), "a title is text, never HTML")
	assert.NotContains(t, sidebar(p).IDs, theirs)

	// 2. Switching: the list opens the other conversation.
	p.ClickJS(items + `[1].querySelector('button.open')`)
	p.WaitFor("the first conversation", `document.querySelector('#session').textContent === 'session `+first+`' && document.querySelector('#messages').textContent.includes('Nice to meet you')`)
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.NotContains(t, p.Str(`document.querySelector('#messages').textContent`), "Tell me about")
	assert.Equal(t, first, sidebar(p).Current)
	assert.Equal(t, first, p.Str(`localStorage.getItem('planround.webchat.session')`))

	// 3. A reload: the same conversation, the same list.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("the list", items+`.length === 2`)
	assert.Equal(t, first, currentSession(p))
	assert.Contains(t, p.Str(`document.querySelector('#messages').textContent`), "Nice to meet you")
	assert.Equal(t, sidebarList{Titles: []string{"Tell me about <b>Go</b>", "Hello!"}, IDs: []string{second, first}, Current: first}, sidebar(p))
	p.ClickJS(items + `[0].querySelector('button.open')`)
	p.WaitFor("the second conversation", `document.querySelector('#messages').textContent.includes('You asked')`)
	p.ClickJS(items + `[1].querySelector('button.open')`)
	p.WaitFor("the first conversation", `document.querySelector('#session').textContent === 'session `+first+`' && document.querySelector('#messages').textContent.includes('Nice to meet you')`)

	// 4. Rename on the page.
	p.ClickJS(currentItem + `.querySelector('button.rename')`)
	p.WaitFor("the title editor", `document.activeElement?.classList.contains('rename-input')`)
	p.JS(`document.activeElement.select()`)
	p.Must("Input.insertText", map[string]any{"text": "Greetings"})
	p.Must("Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
	p.Must("Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
	p.WaitFor("the new title", currentItem+`?.querySelector('.title')?.textContent === 'Greetings'`)
	stored, err := h.srv.store.Session(t.Context(), first)
	require.NoError(t, err)
	assert.Equal(t, "Greetings", stored.Title, "renamed in the Store")

	// 5. Export: a download of the session's export.
	p.ClickJS(currentItem + `.querySelector('button.export')`)
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
	p.WaitFor("the status", `document.querySelector('#sessions-status').textContent === 'Exported planround-greetings.json'`)

	// 6. Import: the file chosen, a new conversation opened.
	p.SetFiles("#import-file", file)
	p.WaitFor("the imported conversation", items+`.length === 3 && `+currentItem+`?.dataset.sessionId !== `+cdp.JSString(first)+` && `+
		currentItem+`.querySelector('.title').textContent === 'Greetings (imported)'`)
	imported := currentSession(p)
	assert.Equal(t, sessionOwner(first), sessionOwner(imported), "this browser's")
	assert.Equal(t, sidebarList{Titles: []string{"Greetings (imported)", "Greetings", "Tell me about <b>Go</b>"}, IDs: []string{imported, first, second}, Current: imported}, sidebar(p),
		"most recently changed first: the import, the rename")
	p.WaitFor("its history", `document.querySelector('#messages').textContent.includes('Nice to meet you')`)
	assert.Equal(t, "Imported planround-greetings.json", p.Str(`document.querySelector('#sessions-status').textContent`))

	// A file that is no export: refused, with the server's reason.
	bad := filepath.Join(t.TempDir(), "notes.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"notes": ["not a conversation"]}`), 0o644))
	p.SetFiles("#import-file", bad)
	p.WaitFor("the error", `document.querySelector('#sessions-status').classList.contains('error')`)
	assert.Contains(t, p.Str(`document.querySelector('#sessions-status').textContent`), "Could not import notes.json: not a session export")
	assert.Equal(t, imported, currentSession(p), "the open conversation stays")
	assert.Len(t, sidebar(p).IDs, 3)

	// 7. Delete on the page: the first click arms, the second deletes; the
	// page opens a new conversation.
	p.ClickJS(currentItem + `.querySelector('button.delete')`)
	p.WaitFor("the armed button", currentItem+`.querySelector('button.delete.armed')?.textContent === 'Delete?'`)
	assert.Len(t, sidebar(p).IDs, 3, "one click deletes nothing")
	p.ClickJS(currentItem + `.querySelector('button.delete')`)
	p.WaitFor("a new conversation", `document.querySelector('#session').textContent !== 'session `+imported+`' && `+items+`.length === 3 && `+items+`[0].querySelector('.title').textContent === 'New conversation'`)
	assert.Equal(t, []string{currentSession(p), first, second}, sidebar(p).IDs)
	_, err = h.srv.store.Session(t.Context(), imported)
	assert.ErrorIs(t, err, memory.ErrNotFound)

	// 8. Deleted in another tab: this tab moves to a new conversation.
	p.ClickJS(items + `[2].querySelector('button.open')`)
	p.WaitFor("the second conversation", `document.querySelector('#session').textContent === 'session `+second+`'`)
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	other := b.NewPage(1280, 800)
	other.Navigate(h.ts.URL + "/")
	other.WaitFor("the same conversation", `document.querySelector('#session').textContent === 'session `+second+`' && document.querySelector('#conn').textContent === 'connected'`)
	other.WaitFor("the list", items+`.length === 2`)
	p.ClickJS(currentItem + `.querySelector('button.delete')`)
	p.ClickJS(currentItem + `.querySelector('button.delete')`)
	other.WaitFor("the other tab to move on", `document.querySelector('#session').textContent !== 'session `+second+`' && document.querySelector('#sessions-status').textContent === 'This conversation was deleted in another tab.'`)
	p.WaitFor("this tab to move on", `document.querySelector('#session').textContent !== 'session `+second+`'`)
	p.WaitFor("the list without it", items+`.length === 2`)
	assert.Equal(t, []string{"New conversation", "Greetings"}, sidebar(p).Titles)

	// On a wide screen the header's button hides the list and shows it.
	visible := `getComputedStyle(document.querySelector('#sidebar')).display !== 'none'`
	assert.Equal(t, "true", p.Str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	p.Click("#sidebar-toggle")
	p.WaitFor("the list hidden", `!(`+visible+`) && document.querySelector('#sidebar-toggle').getAttribute('aria-expanded') === 'false'`)
	p.Click("#sidebar-toggle")
	p.WaitFor("the list shown", visible+` && document.querySelector('#sidebar-toggle').getAttribute('aria-expanded') === 'true'`)

	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserSidebarNarrow: on a phone the conversations are a drawer,
// closed until the header's button opens it; choosing one, or touching the
// chat behind it, closes it.
func TestBrowserSidebarNarrow(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(400, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	sendAndWait(p, "Hello!")
	visible := `getComputedStyle(document.querySelector('#sidebar')).display !== 'none'`
	assert.Equal(t, "false", p.Str(`String(`+visible+`)`), "closed on a phone")
	assert.Equal(t, "false", p.Str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	p.Click("#sidebar-toggle")
	p.WaitFor("the drawer", visible+` && `+items+`.length === 1`)
	var got struct{ Width, Inner, Right int }
	require.NoError(t, p.Eval(`({Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
		Right: Math.ceil(document.querySelector('#sidebar').getBoundingClientRect().right)})`, &got))
	assert.LessOrEqual(t, got.Width, got.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, got.Right, got.Inner, "the drawer fits")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "sidebar-narrow.png"))
	p.ClickJS(items + `[0].querySelector('button.open')`)
	p.WaitFor("the drawer to close", `!(`+visible+`)`)
	p.Click("#sidebar-toggle")
	p.WaitFor("the drawer", visible)
	p.Must("Input.dispatchMouseEvent", map[string]any{"type": "mousePressed", "x": 380, "y": 400, "button": "left", "clickCount": 1})
	p.Must("Input.dispatchMouseEvent", map[string]any{"type": "mouseReleased", "x": 380, "y": 400, "button": "left", "clickCount": 1})
	p.WaitFor("the drawer to close when the chat is touched", `!(`+visible+`)`)
	assert.Equal(t, "false", p.Str(`document.querySelector('#sidebar-toggle').getAttribute('aria-expanded')`))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserThemes: the page follows the system's colour scheme: light and
// dark (prefers-color-scheme, emulated) both render, with other colours and
// readable text. With -update-docs it writes the screenshot of docs/webchat.md.
func TestBrowserThemes(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{Skills: testSkills(t)}) // the picker shows in the screenshot
	b := cdp.Start(t)
	p := b.NewPage(1000, 680)
	p.EmulateColorScheme("light")

	// A conversation with something of everything.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	sendAndWait(p, "Hello!")
	newChat(p)
	sendAndWait(p, "Show me a card about planround")
	newChat(p)
	// One call done, its result open; the next one waits for approval.
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", "What's the weather in Paris and the time in Tokyo?")
	p.Click("#send")
	first := `document.querySelector('#messages .card')`
	p.WaitFor("the first approval", first+`?.dataset.state === 'approval' && `+first+`.querySelector('button.approve')`)
	p.ClickJS(first + `.querySelector('button.approve')`)
	p.WaitFor("the second approval", first+`.dataset.state === 'done' && `+lastCard+`.dataset.state === 'approval' && `+lastCard+`.querySelector('button.approve')`)
	p.JS(first + `.querySelector('details').open = true`)
	p.WaitFor("three conversations", items+`.length === 3`)
	p.JS(`document.activeElement.blur(); document.querySelector('#scroll').scrollTop = 1e9`)

	type colours struct {
		Dark                        bool
		Body, Text, Panel, Card, In string
	}
	read := func() colours {
		var c colours
		require.NoError(t, p.Eval(`(() => { const s = (q, k) => getComputedStyle(document.querySelector(q))[k];
			return {Dark: matchMedia('(prefers-color-scheme: dark)').matches, Body: s('body', 'backgroundColor'), Text: s('body', 'color'),
				Panel: s('#top', 'backgroundColor'), Card: s('#messages .card', 'backgroundColor'), In: s('#input', 'backgroundColor')}; })()`, &c))
		return c
	}
	dir := t.ArtifactDir()
	light := read()
	p.Screenshot(filepath.Join(dir, "light.png"))
	p.EmulateColorScheme("dark")
	p.WaitFor("the dark scheme", `matchMedia('(prefers-color-scheme: dark)').matches`)
	dark := read()
	p.Screenshot(filepath.Join(dir, "dark.png"))

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
		p.EmulateColorScheme("light")
		p.WaitFor("the light scheme", `!matchMedia('(prefers-color-scheme: dark)').matches`)
		shot := filepath.Join(dir, "docs.png")
		p.Screenshot(shot)
		writeSmallPNG(t, shot, filepath.Join("..", "..", "docs", "webchat.png"))
	}
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserSpeech: the speech toggle is off until turned on, and then
// kept in localStorage; with it on, the replies the model flagged for voice
// are read aloud a sentence at a time, others are not; turning it off stops
// the speech. speechSynthesis is replaced by a recorder.
func TestBrowserSpeech(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.AddInitScript(`window.__spoken = []; window.__cancels = 0;
		speechSynthesis.speak = (u) => window.__spoken.push(u.text);
		speechSynthesis.cancel = () => { window.__cancels++; };`)
	spoken := func() []string {
		var s []string
		require.NoError(t, p.Eval(`window.__spoken`, &s))
		return s
	}

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "false", p.Str(`String(document.querySelector('#speech').hidden)`), "the browser can speak: the toggle shows")
	assert.Equal(t, "false", p.Str(`document.querySelector('#speech').getAttribute('aria-pressed')`), "off by default")
	assert.Equal(t, "null", p.Str(`String(localStorage.getItem('planround.webchat.speech'))`))

	// Off: a voice reply is marked, not spoken.
	sendAndWait(p, "Say good morning")
	p.WaitFor("the voice reply", `document.querySelectorAll('.text.voice').length > 0`)
	assert.Empty(t, spoken(), "nothing is read aloud with the toggle off")

	// On: kept, and voice replies are read aloud.
	p.Click("#speech")
	p.WaitFor("the toggle on", `document.querySelector('#speech').getAttribute('aria-pressed') === 'true'`)
	assert.Equal(t, "on", p.Str(`localStorage.getItem('planround.webchat.speech')`))
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "true", p.Str(`document.querySelector('#speech').getAttribute('aria-pressed')`), "kept across a reload")
	assert.Empty(t, spoken(), "stored replies are not read aloud")

	sendAndWait(p, "Hello!")
	assert.Empty(t, spoken(), "a reply not flagged for voice is not read aloud")
	sendAndWait(p, "Please say good night")
	var voiced string
	require.NoError(t, p.Eval(`[...[...document.querySelectorAll('.turn')].at(-1).querySelectorAll('.text.voice')].map(e => e.textContent).join(' ')`, &voiced))
	got := spoken()
	assert.Equal(t, []string{"Good question, I can answer that in words.", "Good night!", "I said it out loud, so this reply is flagged for speech."}, got,
		"a sentence at a time")
	assert.Equal(t, strings.Join(strings.Fields(voiced), " "), strings.Join(got, " "), "what is shown is what is said")

	// Off again: speech stops, and is kept off.
	var cancels int
	require.NoError(t, p.Eval(`window.__cancels`, &cancels))
	p.Click("#speech")
	p.WaitFor("the toggle off", `document.querySelector('#speech').getAttribute('aria-pressed') === 'false'`)
	var after int
	require.NoError(t, p.Eval(`window.__cancels`, &after))
	assert.Greater(t, after, cancels, "turning it off stops what is being said")
	assert.Equal(t, "off", p.Str(`localStorage.getItem('planround.webchat.speech')`))
	sendAndWait(p, "Say it again")
	assert.Len(t, spoken(), 3, "nothing more is read aloud")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
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
