package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestBrowserNamesWithoutFormatCharacters: the page shows the names it
// gets from outside without Unicode format characters: a tool the model
// calls by a spoofed name, and a title stored before the server cleaned
// them. A message's text keeps them: it is not a name.
func TestBrowserNamesWithoutFormatCharacters(t *testing.T) {
	leaktest.Check(t)
	h := newMCPHarness(t, userCallModel(t))
	b := startBrowser(t) // cleaned up before the servers: LIFO
	p := b.newPage(1280, 800)
	p.navigate(h.ts.URL + "/")
	p.waitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	// A conversation of this browser whose title was stored as it came.
	old := sessionOwner(p.currentSession()) + "-00000000000000aa"
	_, err := h.srv.store.CreateSession(t.Context(), memory.Session{ID: old, Title: spoofed})
	require.NoError(t, err)
	_, err = h.srv.store.Append(t.Context(), old, memory.Message{Role: memory.RoleUser, Content: "hi"})
	require.NoError(t, err)

	// The model calls a tool by a name with an override: an unknown tool,
	// refused on its card.
	p.sendAndWait("ech\u202Eo\u200B {}")
	assert.Equal(t, "rejected", p.str(lastCard+`.dataset.state`))
	assert.Equal(t, "echo", p.str(lastCard+`.querySelector('.name').textContent`), "the card's name")
	assert.Contains(t, p.str(`[...document.querySelectorAll('.msg.user')].at(-1).textContent`), "ech\u202Eo", "the message as sent")

	// Two items show before the list comes back (the open conversation,
	// not stored yet, as "New conversation"): wait for the stored one.
	p.waitFor("both conversations, stored", items+`.length === 2 && `+items+`.every(e => !e.textContent.includes('New conversation'))`)
	assert.ElementsMatch(t, []string{"Report gnp.exe abc invoice", "echo {}"}, p.sidebar().Titles)
	assert.Equal(t, "false", p.str(`String(`+items+`.some(e => /\p{Cf}/u.test(e.textContent + e.querySelector('.open').title)))`), "no format character in the sidebar")
	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}
