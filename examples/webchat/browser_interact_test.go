package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
)

// formCard is a JS expression: the newest ask_user_question card.
const formCard = `[...document.querySelectorAll('#messages .card[data-tool="ask_user_question"]')].at(-1)`

// lastForm is a JS expression: the form in it.
const lastForm = formCard + `?.querySelector('form.ask-form')`

// TestBrowserForms: an ask_user_question form in its card, a question of
// each kind; sent with a question unanswered, it shows the server's reason
// and stays open; answered, it is sent once and disabled, and the model
// receives the answers. A form whose run is interrupted is closed.
func TestBrowserForms(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask_user_question", tripForm})
	h := newModelHarness(t, onModel(model, Options{}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	p.TypeText("#input", "Plan my trip")
	p.Click("#send")
	p.WaitFor("the form", lastForm+`?.dataset.state === 'open'`)
	var shown struct {
		Title, State string
		Kinds        []string
		Legends      []string
		Radios       int
		Checks       int
		Texts        int
	}
	require.NoError(t, p.Eval(`(() => { const f = `+lastForm+`; return {Title: f.querySelector('.form-title').textContent, State: `+formCard+`.dataset.state,
		Kinds: [...f.querySelectorAll('fieldset')].map(e => e.dataset.kind), Legends: [...f.querySelectorAll('legend')].map(e => e.textContent),
		Radios: f.querySelectorAll('input[type=radio]').length, Checks: f.querySelectorAll('input[type=checkbox]').length,
		Texts: f.querySelectorAll('textarea').length}; })()`, &shown))
	assert.Equal(t, "Your trip", shown.Title)
	assert.Equal(t, "executing", shown.State, "the form is in its call's card")
	assert.Equal(t, []string{"text", "single", "multiple"}, shown.Kinds)
	assert.Equal(t, []string{"When do you leave?", "Window or aisle?", "Which meals?"}, shown.Legends)
	assert.Equal(t, 2, shown.Radios)
	assert.Equal(t, 3, shown.Checks)
	assert.Equal(t, 1, shown.Texts)

	// Answered in part: the server says what is missing; the form stays
	// open with what was typed.
	p.TypeText(`form.ask-form textarea`, "Friday <b>night</b>")
	p.ClickJS(lastForm + `.querySelector('input[value="veg"]')`)
	p.ClickJS(lastForm + `.querySelector('input[value="cake"]')`)
	p.ClickJS(lastForm + `.querySelector('button[type=submit]')`)
	p.WaitFor("the server's reason", `!`+lastForm+`.querySelector('.form-error').hidden && `+lastForm+`.dataset.state === 'open'`)
	formErr := p.Str(lastForm + `.querySelector('.form-error').textContent`)
	assert.Contains(t, formErr, "seat")
	assert.NotContains(t, formErr, "invalid answers", "the error says what is wrong, without the package's prefix")
	assert.Equal(t, "false", p.Str(`String(`+lastForm+`.querySelector('button[type=submit]').disabled)`))
	assert.Equal(t, "Friday <b>night</b>", p.Str(lastForm+`.querySelector('textarea').value`))
	assert.Equal(t, 1, waiting(t, h.srv, true), "the form still waits")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "form.png"))

	// Answered: sent once, disabled, and the model has the answers.
	p.JS(`window.__posts = 0; { const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes('form-answer')) window.__posts++; return f(u, o); }; }`)
	p.ClickJS(lastForm + `.querySelector('input[value="aisle"]')`)
	p.JS(lastForm + `.querySelector('button[type=submit]').click(); ` + lastForm + `.requestSubmit()`) // a double submit
	p.WaitFor("the form answered", lastForm+`.dataset.state === 'answered'`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && `+formCard+`.dataset.state === 'done'`)
	var after struct {
		Posts    int
		Disabled []bool
		Note     string
		Hidden   bool
	}
	require.NoError(t, p.Eval(`({Posts: window.__posts, Disabled: [...`+lastForm+`.querySelectorAll('fieldset')].map(e => e.disabled),
		Note: `+lastForm+`.querySelector('.form-note').textContent, Hidden: `+lastForm+`.querySelector('button[type=submit]').hidden})`, &after))
	assert.Equal(t, 1, after.Posts, "sent once")
	assert.Equal(t, []bool{true, true, true}, after.Disabled)
	assert.Equal(t, "Answered.", after.Note)
	assert.True(t, after.Hidden)
	reqs := model.Requests()
	tool, ok := reqs[len(reqs)-1].LastMessageWithRole("tool")
	require.True(t, ok)
	assert.JSONEq(t, `{"answers":[{"id":"when","question":"When do you leave?","answer":"Friday <b>night</b>"},
		{"id":"seat","question":"Window or aisle?","answer":"aisle"},
		{"id":"meals","question":"Which meals?","answer":["veg","cake"]}]}`, tool.Content, "the model receives the answers")
	assert.Equal(t, "0", p.Str(`String(document.querySelectorAll('#messages b').length)`))

	// Interrupted while the form waits: closed.
	p.TypeText("#input", "Plan another trip")
	p.Click("#send")
	p.WaitFor("a second form", `document.querySelectorAll('form.ask-form').length === 2 && `+lastForm+`.dataset.state === 'open'`)
	p.Click("#interrupt")
	p.WaitFor("the form closed", lastForm+`.dataset.state === 'closed' && document.body.dataset.running === 'false'`)
	assert.Equal(t, "invalidated", p.Str(formCard+`.dataset.state`))
	assert.Equal(t, "true", p.Str(`String(`+lastForm+`.querySelector('fieldset').disabled)`))
	assert.Contains(t, p.Str(lastForm+`.querySelector('.form-note').textContent`), "Closed")
	assert.Equal(t, 0, waiting(t, h.srv, true))

	// A reload draws the answered form's answers from the history.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the history", `document.querySelectorAll('#messages .card[data-tool="ask_user_question"]').length === 2`)
	var answers []string
	require.NoError(t, p.Eval(`[...document.querySelector('#messages .card[data-tool="ask_user_question"] table.answers').querySelectorAll('tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`, &answers))
	assert.Equal(t, []string{"When do you leave? Friday <b>night</b>", "Window or aisle? aisle", "Which meals? veg, cake"}, answers)
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserFormTimesOut: a form nobody answers in time is closed with the
// reason, and the answer sent too late changes nothing.
func TestBrowserFormTimesOut(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask_user_question", `{"questions":[{"question":"Ready?","kind":"single","options":["yes","no"]}]}`})
	h := newModelHarness(t, onModel(model, Options{FormTimeout: 400 * time.Millisecond}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Ask me")
	p.Click("#send")
	p.WaitFor("the form", lastForm+`?.dataset.state === 'open'`)
	p.ClickJS(lastForm + `.querySelector('input[value="yes"]')`)
	p.WaitFor("the form closed", lastForm+`.dataset.state === 'closed' && document.body.dataset.running === 'false'`)
	assert.Contains(t, p.Str(lastForm+`.querySelector('.form-note').textContent`), "did not answer the form within 400ms")
	assert.Equal(t, "true", p.Str(`String(`+lastForm+`.querySelector('button[type=submit]').disabled)`))
	assert.Equal(t, "true", p.Str(`String(`+lastForm+`.querySelector('input[value="yes"]').checked)`), "what was chosen stays in view")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// pixelPNG is a data: URL of a 2×2 PNG.
func pixelPNG(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for i := range 4 {
		img.Set(i%2, i/2, color.RGBA{R: 200, G: 80, B: 40, A: 255})
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestBrowserCards: show_card's card, from its side message, in its call's
// card: title and body as text, an image from a data: URL, one from an
// https URL only behind a button, fields as a table; a card the tool
// refused (a javascript: image) is not drawn; a reload draws them again.
func TestBrowserCards(t *testing.T) {
	leaktest.Check(t)
	data := pixelPNG(t)
	model := toolModel(t,
		toolCall{"show_card", mustString(map[string]any{"title": "<b>Paris</b>", "body": "Sunny\nall <i>week</i>", "image_url": data,
			"fields": []map[string]string{{"name": "High", "value": "24 °C"}, {"name": "<u>Low</u>", "value": "15 °C"}}})},
		toolCall{"show_card", `{"title":"Remote","body":"","image_url":"https://images.example/paris.png?q=1"}`},
		toolCall{"show_card", `{"title":"Bad","body":"","image_url":"javascript:alert(1)"}`},
	)
	h := newModelHarness(t, onModel(model, Options{}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 900)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Cards please")
	p.Click("#send")
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && document.querySelectorAll('#messages .card[data-tool="show_card"][data-state="done"]').length === 3`)

	type drawn struct {
		Titles, Bodies []string
		Fields         [][]string
		Images         []string
		Loaded         []bool
		Buttons        []string
		Tags           int
	}
	read := func() drawn {
		var d drawn
		require.NoError(t, p.Eval(`(() => { const cs = [...document.querySelectorAll('#messages .card[data-tool="show_card"] .display-card')];
			return {Titles: cs.map(c => c.querySelector('.title').textContent), Bodies: cs.map(c => c.querySelector('.body')?.textContent ?? ''),
				Fields: cs.map(c => [...c.querySelectorAll('table.fields tr')].map(r => r.querySelector('th').textContent + '=' + r.querySelector('td').textContent)),
				Images: [...document.querySelectorAll('#messages img')].map(i => i.src.slice(0, 22)),
				Loaded: [...document.querySelectorAll('#messages img')].map(i => i.complete && i.naturalWidth === 2),
				Buttons: [...document.querySelectorAll('#messages .display-card button.load-image')].map(b => b.textContent),
				Tags: document.querySelectorAll('#messages b, #messages i, #messages u').length}; })()`, &d))
		return d
	}
	want := drawn{
		Titles:  []string{"<b>Paris</b>", "Remote"},
		Bodies:  []string{"Sunny\nall <i>week</i>", ""},
		Fields:  [][]string{{"High=24 °C", "<u>Low</u>=15 °C"}, {}},
		Images:  []string{"data:image/png;base64,"},
		Loaded:  []bool{true},
		Buttons: []string{"Show image from images.example"},
	}
	p.WaitFor("the image to load", `document.querySelector('#messages img')?.complete`)
	assert.Equal(t, want, read())
	bad := `[...document.querySelectorAll('#messages .card[data-tool="show_card"]')].at(-1)`
	assert.Equal(t, "0", p.Str(`String(`+bad+`.querySelectorAll('.display-card').length)`), "a refused card is not drawn")
	assert.Contains(t, p.Str(bad+`.textContent`), "error")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "cards.png"))

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the history", `document.querySelectorAll('#messages .card[data-tool="show_card"]').length === 3`)
	p.WaitFor("the image to load", `document.querySelector('#messages img')?.complete`)
	assert.Equal(t, want, read(), "drawn again from the history")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserSkills: the sidebar's picker lists the server's skills, ticked
// until unticked; the ticks are kept across a reload and decide the skills
// block of the requests the model gets.
func TestBrowserSkills(t *testing.T) {
	leaktest.Check(t)
	model := &recordingDemo{}
	h := newModelHarness(t, model.options(Options{Skills: testSkills(t)}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("the picker", `!document.querySelector('#skills-box').hidden && document.querySelectorAll('#skills .skill').length === 2`)
	type pick struct {
		Names   []string
		Checked []bool
		Desc    string
	}
	picker := func() pick {
		var k pick
		require.NoError(t, p.Eval(`({Names: [...document.querySelectorAll('#skills .skill')].map(e => e.dataset.skill),
			Checked: [...document.querySelectorAll('#skills .skill input')].map(e => e.checked),
			Desc: document.querySelector('#skills .skill .description').textContent})`, &k))
		return k
	}
	assert.Equal(t, pick{Names: []string{"forecaster", "poet"}, Checked: []bool{true, true}, Desc: "Reads weather forecasts like a radio host."}, picker())
	skillBox := func(name string) string {
		return `document.querySelector('#skills .skill[data-skill="` + name + `"] input')`
	}

	// lastBlock sends text and returns the skills block of the turn's
	// requests (the same in each).
	lastBlock := func(text string) string {
		t.Helper()
		n := model.count()
		sendAndWait(p, text)
		reqs := model.since(n)
		require.NotEmpty(t, reqs)
		block := skillsBlock(reqs[0])
		for _, r := range reqs[1:] {
			assert.Equal(t, block, skillsBlock(r))
		}
		return block
	}
	block := lastBlock("Hello!")
	assert.Contains(t, block, "- forecaster:")
	assert.Contains(t, block, "- poet:")

	p.ClickJS(skillBox("forecaster"))
	block = lastBlock("Hello again!")
	assert.Contains(t, block, "- poet: Answers in short rhyming verse.")
	assert.NotContains(t, block, "forecaster", "unticked")

	p.ClickJS(skillBox("poet"))
	assert.Empty(t, lastBlock("And again!"), "no skill: no block")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "skills.png"))

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the picker", `document.querySelectorAll('#skills .skill').length === 2`)
	assert.Equal(t, []bool{false, false}, picker().Checked, "kept across a reload")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.ClickJS(skillBox("poet"))
	block = lastBlock("Once more!")
	assert.Contains(t, block, "- poet:")
	assert.NotContains(t, block, "forecaster")
	assert.JSONEq(t, `{"forecaster":false,"poet":true}`, p.Str(`localStorage.getItem('planround.webchat.skills')`))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserSubAgent: the researcher's run is drawn under its call's
// card, in a block that folds; its get_weather call's approval card, nested
// there, is answered; the researcher's words stay in its block.
func TestBrowserSubAgent(t *testing.T) {
	leaktest.Check(t)
	model := researchModel(t)
	h := newModelHarness(t, onModel(model, Options{Researcher: true}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Weather in Oslo, via the researcher")
	p.Click("#send")

	outer := `document.querySelector('#messages .card[data-key="call_r"]')`
	inner := `document.querySelector('#messages .card[data-key="call_r/call_w"]')`
	p.WaitFor("the nested approval", inner+`?.dataset.state === 'approval' && `+inner+`.querySelector('button.approve')`)
	var where struct {
		Outer, Parent, Agent, Summary, Words string
		Open                                 bool
	}
	require.NoError(t, p.Eval(`(() => { const i = `+inner+`, d = i.closest('details.subagent');
		return {Outer: `+outer+`.dataset.state, Parent: i.parentElement.closest('.card').dataset.key, Agent: d.dataset.agent,
			Summary: d.querySelector('summary').textContent, Words: d.querySelector('.text').textContent, Open: d.open}; })()`, &where))
	assert.Equal(t, "executing", where.Outer)
	assert.Equal(t, "call_r", where.Parent, "nested under the researcher's card")
	assert.Equal(t, demo.ResearcherName, where.Agent)
	assert.Equal(t, "researcher · its run", where.Summary)
	assert.Equal(t, "Looking it up.", where.Words)
	assert.True(t, where.Open)
	assert.Contains(t, p.Str(inner+`.innerText`), `"city": "Oslo"`)
	p.Screenshot(filepath.Join(t.ArtifactDir(), "subagent.png"))

	p.ClickJS(inner + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && `+outer+`.dataset.state === 'done'`)
	assert.Equal(t, "done", p.Str(inner+`.dataset.state`))
	var got struct {
		Nested   []string
		Top      string
		Result   string
		InTurn   int
		Inside   int
		NestedRM int
	}
	require.NoError(t, p.Eval(`(() => { const d = `+outer+`.querySelector('details.subagent'), turn = `+outer+`.closest('.turn');
		return {Nested: [...d.querySelectorAll(':scope > .subagent-body > .text')].map(e => e.textContent),
			Top: [...turn.querySelectorAll(':scope > .text')].map(e => e.textContent).join(' | '),
			Result: `+outer+`.querySelector(':scope > .card-body pre:last-child')?.textContent ?? '',
			InTurn: turn.querySelectorAll(':scope > .card').length, Inside: d.querySelectorAll('.card').length,
			NestedRM: d.querySelectorAll('.round-meta').length}; })()`, &got))
	require.Len(t, got.Nested, 2, "%q", got.Nested)
	assert.Equal(t, "Looking it up.", got.Nested[0])
	assert.True(t, strings.HasPrefix(got.Nested[1], "Found it: Oslo:"), got.Nested[1])
	assert.NotContains(t, got.Top, "Looking it up", "the researcher's words stay in its block")
	assert.Contains(t, got.Top, "The researcher says: Found it: Oslo")
	assert.Equal(t, 1, got.InTurn, "one card in the turn: the researcher's")
	assert.Equal(t, 1, got.Inside)
	assert.Equal(t, 2, got.NestedRM, "the researcher's rounds")
	assert.Equal(t, 0, waiting(t, h.srv, false))

	// The block folds.
	p.ClickJS(outer + `.querySelector('details.subagent > summary')`)
	p.WaitFor("the block folded", `!`+outer+`.querySelector('details.subagent').open`)
	assert.Equal(t, "false", p.Str(fmt.Sprintf(`String(%s.querySelector('details.subagent .card').checkVisibility())`, outer)), "its cards are hidden")

	// A reload while the researcher's call waits for approval: the card is
	// drawn again under a card of the researcher's call, and answered.
	outer = `[...document.querySelectorAll('#messages .card[data-key="call_r"]')].at(-1)`
	inner = `[...document.querySelectorAll('#messages .card[data-key="call_r/call_w"]')].at(-1)`
	sendAndWaitFor(p, "Again, via the researcher", `document.querySelectorAll('#messages .card[data-key="call_r/call_w"]').length === 2 && `+inner+`.dataset.state === 'approval'`)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the nested approval again", inner+`?.dataset.state === 'approval' && `+inner+`.querySelector('button.approve')`)
	require.NoError(t, p.Eval(`(() => { const i = `+inner+`;
		return {Outer: `+outer+`.dataset.state, Parent: i.parentElement.closest('.card').dataset.key, Agent: i.closest('details.subagent').dataset.agent,
			Summary: `+outer+`.querySelector('.name').textContent}; })()`, &where))
	assert.Equal(t, "executing", where.Outer)
	assert.Equal(t, "call_r", where.Parent)
	assert.Equal(t, demo.ResearcherName, where.Agent)
	assert.Equal(t, demo.ResearcherName, where.Summary, "the researcher's card, drawn for it")
	p.ClickJS(inner + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && `+outer+`.dataset.state === 'done' && `+inner+`.dataset.state === 'done'`)
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.turn')].at(-1).innerText`), "The researcher says: Found it: Oslo")
	assert.Equal(t, 0, waiting(t, h.srv, false))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserDemoAsksAndDelegates: the built-in demo model drives the
// form and the researcher by itself: "ask me" shows its form, whose answers
// its reply quotes; "research" runs the researcher, whose approval cards,
// nested, are answered.
func TestBrowserDemoAsksAndDelegates(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{Researcher: true})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	sendAndWaitFor(p, "Ask me a few questions", lastForm+`?.dataset.state === 'open'`)
	assert.Equal(t, "A few questions", p.Str(lastForm+`.querySelector('.form-title').textContent`))
	p.ClickJS(lastForm + `.querySelector('input[type=radio][value="green"]')`)
	p.ClickJS(lastForm + `.querySelector('input[type=checkbox][value="Friday"]')`)
	p.TypeText(`form.ask-form textarea`, "bring <snacks>")
	p.ClickJS(lastForm + `.querySelector('button[type=submit]')`)
	p.WaitFor("the reply", lastForm+`.dataset.state === 'answered' && document.body.dataset.running === 'false'`)
	reply := p.Str(`[...document.querySelectorAll('.turn')].at(-1).innerText`)
	assert.Contains(t, reply, "green")
	assert.Contains(t, reply, "snacks")

	inner := `document.querySelector('#messages details.subagent .card[data-state="approval"] button.approve')`
	sendAndWaitFor(p, "Research the weather in Oslo", inner)
	for i := 0; i < 5 && p.Str(`document.body.dataset.running`) == "true"; i++ {
		p.WaitFor("a nested approval or the end", inner+` || document.body.dataset.running === 'false'`)
		if p.Str(`String(!!`+inner+`)`) == "true" {
			p.ClickJS(inner)
			p.WaitFor("the decision taken", `!`+inner+` || document.body.dataset.running === 'false'`)
		}
	}
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	researcher := `document.querySelector('#messages .card[data-tool="researcher"]')`
	assert.Equal(t, "done", p.Str(researcher+`.dataset.state`))
	assert.Contains(t, p.Str(researcher+`.querySelector('details.subagent').innerText`), "Oslo")
	assert.Equal(t, "get_weather", p.Str(researcher+`.querySelector('details.subagent .card').dataset.tool`))
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.turn')].at(-1).innerText`), "Oslo")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "demo-researcher.png"))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserFormErrorInPersonsWords: a refusal that comes with the Go
// package's prefix ("interact: invalid answers: …", as a handler that does
// not strip it sends it, or a call's error) is shown in the person's
// words, without the prefix; the form stays open.
func TestBrowserFormErrorInPersonsWords(t *testing.T) {
	leaktest.Check(t)
	h := newModelHarness(t, onModel(toolModel(t, toolCall{"ask_user_question", readyForm}), Options{}))
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Ask me")
	p.Click("#send")
	p.WaitFor("the form", lastForm+`?.dataset.state === 'open'`)

	raw := `interact: invalid answers: question "ready": no answer`
	p.JS(`{ const f = window.fetch; window.fetch = (u, o) => String(u).includes('form-answer') ? ` +
		`Promise.resolve(new Response(JSON.stringify({error: ` + cdp.JSString(raw) + `}), {status: 400, headers: {'Content-Type': 'application/json'}})) : f(u, o); }`)
	p.ClickJS(lastForm + `.querySelector('button[type=submit]')`)
	p.WaitFor("the refusal", `!`+lastForm+`.querySelector('.form-error').hidden && `+lastForm+`.dataset.state === 'open'`)
	assert.Equal(t, `question "ready": no answer`, p.Str(lastForm+`.querySelector('.form-error').textContent`))
	assert.Empty(t, b.PageErrors())
}
