package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
)

// TestBrowserCardsWhileOffline: while the event stream is down (the server
// cannot be reached), a pending card's decision buttons are disabled and
// the card says why; with the stream back they are enabled, the note goes,
// and the decision goes through.
func TestBrowserCardsWhileOffline(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	sw := &switcher{}
	sw.set(h.srv)
	front := newSwitchServer(t, sw)
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)

	p.Navigate(front.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Oslo?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	const buttons = `[...` + lastCard + `.querySelectorAll('button.approve, button.reject')].map(b => b.disabled)`
	const note = `(` + lastCard + `.querySelector('.offline-note')?.textContent ?? '')`
	var disabled []bool
	assert.NoError(t, p.Eval(buttons, &disabled))
	assert.Equal(t, []bool{false, false}, disabled)

	sw.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unreachable", http.StatusBadGateway)
	}))
	front.CloseClientConnections()
	p.WaitFor("the page offline", `document.querySelector('#conn').textContent === 'offline'`)
	assert.NoError(t, p.Eval(buttons, &disabled))
	assert.Equal(t, []bool{true, true}, disabled, "no decision while the server cannot be reached")
	assert.Contains(t, p.Str(note), "cannot be reached")
	assert.Equal(t, "approval", p.Str(lastCard+`.dataset.state`), "the card still waits")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "offline-card.png"))

	sw.set(h.srv)
	p.WaitFor("the page to reconnect", `document.querySelector('#conn').textContent === 'connected'`)
	assert.NoError(t, p.Eval(buttons, &disabled))
	assert.Equal(t, []bool{false, false}, disabled, "enabled again")
	assert.Empty(t, p.Str(note))

	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false'`)
	assert.Empty(t, b.PageErrors())
}

// TestBrowserFormWhileOffline: an open form cannot be sent while the event
// stream is down, keeps what was chosen, and says why; with the stream back
// it is sent.
func TestBrowserFormWhileOffline(t *testing.T) {
	leaktest.Check(t)
	h := newModelHarness(t, onModel(toolModel(t, toolCall{"ask_user_question", readyForm}), Options{}))
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
	p.ClickJS(lastForm + `.querySelector('input[value="yes"]')`)

	sw.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unreachable", http.StatusBadGateway)
	}))
	front.CloseClientConnections()
	p.WaitFor("the page offline", `document.querySelector('#conn').textContent === 'offline'`)
	assert.Equal(t, "true", p.Str(`String(`+lastForm+`.querySelector('button[type=submit]').disabled)`))
	assert.Contains(t, p.Str(lastForm+`.querySelector('.form-note').textContent`), "cannot be reached")
	assert.Equal(t, "true", p.Str(`String(`+lastForm+`.querySelector('input[value="yes"]').checked)`), "what was chosen stays")

	sw.set(h.srv)
	p.WaitFor("the page to reconnect", `document.querySelector('#conn').textContent === 'connected'`)
	assert.Equal(t, "false", p.Str(`String(`+lastForm+`.querySelector('button[type=submit]').disabled)`))
	assert.Empty(t, p.Str(lastForm+`.querySelector('.form-note').textContent`))
	p.ClickJS(lastForm + `.querySelector('button[type=submit]')`)
	p.WaitFor("the form answered", lastForm+`.dataset.state === 'answered'`)
	p.WaitFor("the run to end", formCard+`.dataset.state === 'done' && document.body.dataset.running === 'false'`)
	assert.Empty(t, b.PageErrors())
}
