package main

import (
	"encoding/json"
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

// TestBrowserCardAnsweredAfterRestart: on a SQLite store, the server
// behind the page shuts down while a card waits; the page says the run is
// suspended and keeps the card answerable. A new server on the same file
// takes over the address: the page reconnects, the card is still there,
// and answering it resumes the run on the page, in the same turn, to its
// end. The tool runs once. (TestBrowserStoredCardAfterReload covers a page
// that loads the conversation from the store.)
func TestBrowserCardAnsweredAfterRestart(t *testing.T) {
	leaktest.Check(t)
	st := openSQLite(t, filepath.Join(t.TempDir(), "chat.db"))
	message, ran := markerCommand(t)
	h := newHarness(t, Options{Store: st})
	sw := &switcher{}
	sw.set(h.srv)
	front := newSwitchServer(t, sw)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(front.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", message)
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)

	h.srv.Close() // SIGTERM: the waiting run is suspended
	p.WaitFor("the suspension", `[...document.querySelectorAll('.sys')].at(-1)?.textContent.startsWith('Suspended: the server is shutting down')`)
	assert.Equal(t, "approval", p.Str(lastCard+`.dataset.state`), "the card stays answerable")
	assert.Equal(t, "false", p.Str(`document.body.dataset.running`))

	next := newHarness(t, Options{Store: st})
	sw.set(next.srv)
	front.CloseClientConnections()
	// The events are numbered in the store's log: the page's numbers
	// stay good, and it goes on where it was.
	p.WaitFor("the page to reconnect", `document.querySelector('#conn').textContent === 'connected' && `+
		`[...document.querySelectorAll('.sys')].at(-1)?.textContent.startsWith('Reconnected to a restarted server')`)
	require.Equal(t, 1, p.Int(cards+`.length`), "one card")
	assert.Equal(t, "approval", p.Str(lastCard+`.dataset.state`))
	p.Screenshot(filepath.Join(t.ArtifactDir(), "waiting-after-restart.png"))

	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the resumed run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false' && `+
		`[...document.querySelectorAll('.turn')].at(-1).innerText.includes('Here is what I found')`)
	assert.Equal(t, 1, p.Int(cards+`.length`), "the resumed run went on in the card's turn")
	assert.Equal(t, 1, p.Int(`[...document.querySelectorAll('.turn')].at(-1).querySelectorAll('.card').length`))
	assert.Equal(t, 1, ran(), "the tool ran once")
	assert.Empty(t, b.PageErrors())
}

// TestBrowserReloadMidRun: a page reloaded while its run waits for a
// decision shows the user's message, the text streamed so far and the
// card, each once; the card is answerable and the run goes on.
func TestBrowserReloadMidRun(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Oslo?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	before := p.Str(`document.querySelector('#messages').innerText`)
	require.Contains(t, before, "Let me call get_weather.")

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the card again", `document.querySelector('#conn').textContent === 'connected' && `+lastCard+`?.dataset.state === 'approval'`)
	p.WaitFor("the streamed text", `document.querySelector('#messages').innerText.includes('Let me call get_weather.')`)
	after := p.Str(`document.querySelector('#messages').innerText`)
	assert.Equal(t, 1, strings.Count(after, "Weather in Oslo?"), "the user's message once:\n%s", after)
	assert.Equal(t, 1, strings.Count(after, "Let me call get_weather."), "the streamed text once:\n%s", after)
	assert.Equal(t, 1, p.Int(cards+`.length`))
	assert.Equal(t, "true", p.Str(`document.body.dataset.running`))

	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false'`)
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.turn')].at(-1).innerText`), "Here is what I found")
	assert.Empty(t, b.PageErrors())
}

// TestBrowserFormAfterRestart: on a SQLite store, a run asks a form,
// suspends while it waits (SuspendAfter), and the server shuts down; a new
// server on the same file takes over the address. The reloaded page draws the form again in its card,
// answerable; answered, the turn resumes and the model receives the
// answer.
func TestBrowserFormAfterRestart(t *testing.T) {
	leaktest.Check(t)
	st := openSQLite(t, filepath.Join(t.TempDir(), "chat.db"))
	model := toolModel(t, toolCall{"ask_user_question", readyForm})
	h := newModelHarness(t, onModel(model, Options{Store: st, SuspendAfter: 300 * time.Millisecond}))
	sw := &switcher{}
	sw.set(h.srv)
	front := newSwitchServer(t, sw)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(front.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Ask me")
	p.Click("#send")
	p.WaitFor("the form", lastForm+`?.dataset.state === 'open'`)
	formID := p.Str(lastForm + `.dataset.formId`)

	p.WaitFor("the suspension", `document.body.dataset.running === 'false' && `+lastForm+`.dataset.state === 'open'`)
	h.srv.Close()

	next := newModelHarness(t, onModel(model, Options{Store: st}))
	sw.set(next.srv)
	front.CloseClientConnections()
	p.Navigate(front.URL + "/")
	p.WaitFor("the form again", `document.querySelector('#conn').textContent === 'connected' && `+lastForm+`?.dataset.state === 'open'`)
	assert.Equal(t, formID, p.Str(lastForm+`.dataset.formId`))
	assert.Equal(t, 1, p.Int(`document.querySelectorAll('form.ask-form').length`), "drawn once")
	assert.Equal(t, "Are you ready?", p.Str(lastForm+`.querySelector('legend').textContent`))

	p.ClickJS(lastForm + `.querySelector('input[value="yes"]')`)
	p.ClickJS(lastForm + `.querySelector('button[type=submit]')`)
	p.WaitFor("the form answered", lastForm+`.dataset.state === 'answered'`)
	p.WaitFor("the resumed turn to end", formCard+`.dataset.state === 'done' && document.body.dataset.running === 'false' && `+
		`[...document.querySelectorAll('.turn')].at(-1).innerText.includes('Done.')`)
	reqs := model.Requests()
	tool, ok := reqs[len(reqs)-1].LastMessageWithRole("tool")
	require.True(t, ok)
	assert.JSONEq(t, `{"answers":[{"id":"ready","question":"Are you ready?","answer":"yes"}]}`, tool.Content, "the model receives the answer")
	assert.Empty(t, b.PageErrors())
}

// waitingNotes is the text of the page's notices that a turn waits for a
// decision.
const waitingNotes = `[...document.querySelectorAll('.sys')].map(e => e.textContent).filter(s => /wait for your decision|Waiting for your decision/.test(s))`

// TestBrowserWaitingNoticeGoesWhenResumed: a turn suspended while its card
// waits says so; decided on another tab, the turn resumes and finishes,
// and neither page still says it waits for a decision.
func TestBrowserWaitingNoticeGoesWhenResumed(t *testing.T) {
	leaktest.Check(t)
	st := openSQLite(t, filepath.Join(t.TempDir(), "chat.db"))
	h := newHarness(t, Options{Store: st, SuspendAfter: 300 * time.Millisecond})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Oslo?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	p.WaitFor("the suspension", `document.body.dataset.running === 'false' && `+waitingNotes+`.length === 1`)

	other := b.NewPage(1280, 800)
	other.Navigate(h.ts.URL + "/")
	other.WaitFor("the card on the other tab", `document.querySelector('#conn').textContent === 'connected' && `+lastCard+`?.dataset.state === 'approval'`)
	other.WaitFor("the other tab's notice", waitingNotes+`.length === 1`)
	other.ClickJS(lastCard + `.querySelector('button.approve')`)

	for _, pg := range []*cdp.Page{other, p} {
		pg.WaitFor("the resumed run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false' && `+
			`[...document.querySelectorAll('.turn')].at(-1).innerText.includes('Here is what I found')`)
		var notes []string
		require.NoError(t, pg.Eval(waitingNotes, &notes))
		assert.Empty(t, notes, "the turn no longer waits")
	}
	assert.Empty(t, b.PageErrors())
}

// TestBrowserFormClosedInPersonsWords: a suspended form whose stored
// answer does not fit its questions (decided in the store, past the answer
// handler's check) is taken by the resumed turn's call, which ends with
// interact's "invalid answers" error; the page closes the form saying what
// does not fit, without the package's prefix.
func TestBrowserFormClosedInPersonsWords(t *testing.T) {
	leaktest.Check(t)
	st := openSQLite(t, filepath.Join(t.TempDir(), "chat.db"))
	model := toolModel(t, toolCall{"ask_user_question", readyForm})
	h := newModelHarness(t, onModel(model, Options{Store: st, SuspendAfter: 300 * time.Millisecond, SweepInterval: 200 * time.Millisecond}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Ask me")
	p.Click("#send")
	p.WaitFor("the form", lastForm+`?.dataset.state === 'open'`)
	p.WaitFor("the suspension", `document.body.dataset.running === 'false' && `+lastForm+`.dataset.state === 'open'`)

	session := p.Str(`localStorage.getItem('planround.webchat.session')`)
	formID := p.Str(lastForm + `.dataset.formId`)
	_, err := st.DecideApproval(t.Context(), session, formID, memory.ApprovalDecision{Approved: true, Arguments: json.RawMessage(`{"ready":"maybe"}`), Principal: "test", Channel: "test"})
	require.NoError(t, err)

	p.WaitFor("the form closed", lastForm+`.dataset.state === 'closed' && document.body.dataset.running === 'false'`)
	note := p.Str(lastForm + `.querySelector('.form-note').textContent`)
	assert.Contains(t, note, `question "ready"`)
	assert.NotContains(t, note, "interact:", "no package prefix")
	assert.NotContains(t, note, "invalid answers", "no package prefix")
	assert.Empty(t, b.PageErrors())
}
