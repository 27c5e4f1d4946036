package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestBrowserNamesWithoutFormatCharacters: the page shows the names it
// gets from outside without Unicode format characters: a tool the model
// calls by a spoofed name, and a title stored before the server cleaned
// them. A message's text keeps them, shown as their code points: it is
// not a name, and what it says must show whole.
func TestBrowserNamesWithoutFormatCharacters(t *testing.T) {
	leaktest.Check(t)
	h := newMCPHarness(t, userCallModel(t))
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	// A conversation of this browser whose title was stored as it came.
	old := sessionOwner(currentSession(p)) + "-00000000000000aa"
	_, err := h.srv.store.CreateSession(t.Context(), memory.Session{ID: old, Title: spoofed})
	require.NoError(t, err)
	_, err = h.srv.store.Append(t.Context(), old, memory.Message{Role: memory.RoleUser, Content: "hi"})
	require.NoError(t, err)

	// The model calls a tool by a name with an override: an unknown tool,
	// refused on its card.
	sendAndWait(p, "ech\u202Eo\u200B {}")
	assert.Equal(t, "rejected", p.Str(lastCard+`.dataset.state`))
	assert.Equal(t, "echo", p.Str(lastCard+`.querySelector('.name').textContent`), "the card's name")
	assert.Contains(t, p.Str(`[...document.querySelectorAll('.msg.user')].at(-1).textContent`), "ech⟨U+202E⟩o⟨U+200B⟩ {}", "the message as sent, its hidden characters shown")

	// Two items show before the list comes back (the open conversation,
	// not stored yet, as "New conversation"): wait for the stored one.
	p.WaitFor("both conversations, stored", items+`.length === 2 && `+items+`.every(e => !e.textContent.includes('New conversation'))`)
	assert.ElementsMatch(t, []string{"Report gnp.exe abc invoice", "echo {}"}, sidebar(p).Titles)
	assert.Equal(t, "false", p.Str(`String(`+items+`.some(e => /\p{Cf}/u.test(e.textContent + e.querySelector('.open').title)))`), "no format character in the sidebar")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
