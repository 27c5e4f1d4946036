package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
)

// auditRow is a row of the audit panel.
type auditRow struct{ Time, Tool, Decision, By, Via, Reason, Edit string }

// auditRows is a JS expression: the audit panel's rows.
const auditRows = `[...document.querySelectorAll('#audit-panel tr.audit-entry')].map(r => { const c = (n) => r.querySelector('td.' + n).textContent;
	return {Time: c('time'), Tool: c('tool'), Decision: c('decision'), By: c('by'), Via: c('via'), Reason: c('reason'), Edit: c('edit')}; })`

// TestBrowserDecidedCardsAndAudit: an approved card says "Approved by you
// at HH:MM", also after a reload (drawn from the history); a rejected one
// "Rejected by you at …"; the audit panel (the header's Audit button)
// lists both decisions oldest first, by "you", through http.
func TestBrowserDecidedCardsAndAudit(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	p.TypeText("#input", "What's the weather in Paris?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	assert.Equal(t, 0, p.Int(lastCard+`.querySelectorAll('.decided').length`), "a waiting card says nothing of a decision")
	before := time.Now()
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false'`)
	p.WaitFor("the decision on the card", lastCard+`.querySelector('.decided')`)
	label := p.Str(lastCard + `.querySelector('.decided').textContent`)
	assert.Regexp(t, `^Approved by you at \d\d:\d\d$`, label)
	at := label[len(label)-5:]
	assert.Contains(t, []string{before.Format("15:04"), time.Now().Format("15:04")}, at, "the time of the decision, local")

	p.TypeText("#input", "What's the weather in Oslo?")
	p.Click("#send")
	p.WaitFor("the second card", cards+`.length === 2 && `+lastCard+`.dataset.state === 'approval'`)
	p.ClickJS(lastCard + `.querySelector('button.reject')`)
	p.WaitFor("the rejection", lastCard+`.dataset.state === 'rejected' && document.body.dataset.running === 'false' && `+lastCard+`.querySelector('.decided')`)
	assert.Regexp(t, `^Rejected by you at \d\d:\d\d$`, p.Str(lastCard+`.querySelector('.decided').textContent`))

	// The audit panel.
	assert.Equal(t, "true", p.Str(`String(document.querySelector('#audit-panel').hidden)`))
	p.Click("#audit")
	p.WaitFor("the audit entries", `document.querySelectorAll('#audit-panel tr.audit-entry').length === 2`)
	var rows []auditRow
	require.NoError(t, p.Eval(auditRows, &rows))
	require.Len(t, rows, 2)
	assert.Equal(t, auditRow{Time: at, Tool: "get_weather", Decision: "approved", By: "you", Via: "http"}, rows[0])
	assert.Equal(t, "rejected", rows[1].Decision)
	assert.Equal(t, "you", rows[1].By)
	assert.Equal(t, "true", p.Str(`document.querySelector('#audit').getAttribute('aria-expanded')`))
	p.Screenshot(filepath.Join(t.ArtifactDir(), "audit.png"))

	// After a reload the cards, drawn from the history, keep their labels.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the labels from the history", cards+`.length === 2 && `+cards+`.every(c => c.querySelector('.decided'))`)
	var labels []string
	require.NoError(t, p.Eval(cards+`.map(c => c.querySelector('.decided').textContent)`, &labels))
	assert.Equal(t, "Approved by you at "+at, labels[0])
	assert.Regexp(t, `^Rejected by you at \d\d:\d\d$`, labels[1])
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserOutOfDateCard: a decision whose call binding is not the
// approval's (here the page's digest is changed on its way) is refused
// with 409: the card says it is out of date and can no longer be
// answered; the approval still waits on the server.
func TestBrowserOutOfDateCard(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "What's the weather in Paris?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	p.JS(`{ const f = window.fetch; window.fetch = (u, o) => {
		if (String(u).includes('tool-approve')) { const b = JSON.parse(o.body); b.arguments_digest = 'sha256:0000'; o = {...o, body: JSON.stringify(b)}; }
		return f(u, o); }; }`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card out of date", lastCard+`.dataset.stale === 'true'`)
	assert.Equal(t, "invalidated", p.Str(lastCard+`.dataset.state`))
	assert.Contains(t, p.Str(lastCard+`.innerText`), "This card is out of date")
	assert.Equal(t, 0, p.Int(lastCard+`.querySelectorAll('button.approve, button.reject').length`), "it can no longer be answered")
	assert.Len(t, pendingOf(t, h.srv, p.Str(`localStorage.getItem('planround.webchat.session')`)), 1, "the approval still waits")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
