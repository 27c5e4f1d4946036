package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// drawnCall is a tool card as the page draws it.
type drawnCall struct {
	Tool, State, Icon, Reason, Output string
}

// drawn is what the page shows of the calls of a conversation and of how
// its runs ended, in page order: each card, and each system message that
// says a run ended (interrupted, rejected, timeout) as "sys <kind>: text".
type drawn struct {
	Calls []drawnCall
	Order []string
}

// drawing reads what the page shows of its calls and run ends.
func drawing(p *cdp.Page) drawn {
	p.T().Helper()
	var d drawn
	require.NoError(p.T(), p.Eval(`(() => {
		const ends = ['interrupted', 'rejected', 'timeout'];
		const calls = [], order = [];
		for (const e of document.querySelectorAll('#messages .card, #messages .sys')) {
			if (e.matches('.sys')) {
				if (ends.includes(e.dataset.kind)) order.push('sys ' + e.dataset.kind + ': ' + e.textContent);
				continue;
			}
			const out = [...e.querySelectorAll('.label')].find((l) => l.textContent === 'partial output');
			calls.push({Tool: e.dataset.tool, State: e.dataset.state, Icon: e.querySelector('.icon').textContent,
				Reason: e.querySelector('.reason')?.textContent ?? '', Output: out ? out.nextElementSibling.textContent : ''});
			order.push('card ' + e.dataset.tool + ': ' + e.dataset.state);
		}
		return {Calls: calls, Order: order};
	})()`, &d))
	return d
}

// reload loads the page again and waits until it shows n cards.
func reload(p *cdp.Page, url string, n int) {
	p.T().Helper()
	p.Navigate(url)
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("the history's cards", fmt.Sprintf(cards+`.length === %d`, n))
}

// TestBrowserReloadShowsHowCallsEnded: after a reload, each card of a
// conversation is drawn from the stored history in the state its call
// ended in, as the live page drew it, with the system message that ended
// its run: a call approved and done, a rejected one ("Session ended by a
// rejection."), one interrupted while it waited for its approval and one
// interrupted while it ran, its output kept ("Interrupted by the user."),
// never a refused call as done.
func TestBrowserReloadShowsHowCallsEnded(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	cardState := func(state string) string { return lastCard + `?.dataset.state === '` + state + `'` }
	send := func(text string) {
		t.Helper()
		p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.TypeText("#input", text)
		p.Click("#send")
	}
	idle := func() { t.Helper(); p.WaitFor("the run to end", `document.body.dataset.running === 'false'`) }

	// Approved and done.
	send("What's the weather in Paris?")
	p.WaitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card to be done", cardState("done"))
	idle()
	// Rejected: the session ends.
	send("Run `ls -la`")
	p.WaitFor("the approval card", cardState("approval"))
	p.ClickJS(lastCard + `.querySelector('button.reject')`)
	p.WaitFor("the card to be rejected", cardState("rejected"))
	p.WaitFor("the rejection's message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent === 'The run ended: a tool call was rejected.'`)
	idle()
	// Interrupted while its approval waited.
	send("What time is it in Tokyo?")
	p.WaitFor("the approval card", cardState("approval"))
	p.Click("#interrupt")
	p.WaitFor("the interrupt's message", `[...document.querySelectorAll('.sys')].at(-1)?.textContent === 'Interrupted by the user.'`)
	idle()
	// Interrupted while it ran: its output is kept.
	send("Please run `echo first line; sleep 30`")
	p.WaitFor("the run_command approval", cardState("approval"))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the live output", cardState("executing")+` && [...`+lastCard+`.querySelectorAll('.label')].some(l => l.textContent === 'output' && l.nextElementSibling.textContent.includes('first line'))`)
	p.Click("#interrupt")
	p.WaitFor("the card to be invalidated", cardState("invalidated"))
	idle()

	live := drawing(p)
	require.Len(t, live.Calls, 4)
	assert.Equal(t, []string{"done", "rejected", "invalidated", "invalidated"},
		[]string{live.Calls[0].State, live.Calls[1].State, live.Calls[2].State, live.Calls[3].State}, "the live page: %+v", live)
	assert.Equal(t, "first line\n", live.Calls[3].Output)

	reload(p, h.ts.URL+"/", 4)
	reloaded := drawing(p)
	assert.Equal(t, live, reloaded, "a reloaded conversation draws every call as it ended")
	assert.Equal(t, []string{
		"card get_weather: done",
		"card run_command: rejected", "sys rejected: The run ended: a tool call was rejected.",
		"card get_time: invalidated", "sys interrupted: Interrupted by the user.",
		"card run_command: invalidated", "sys interrupted: Interrupted by the user.",
	}, reloaded.Order)
	assert.Equal(t, "✕", reloaded.Calls[1].Icon, "a refused call is never drawn done")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "reloaded.png"))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserReloadShowsATimedOutApproval: a call whose approval timed out
// is drawn rejected after a reload, with the timeout's message, as live.
func TestBrowserReloadShowsATimedOutApproval(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{ApprovalTimeout: 300 * time.Millisecond})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", "What time is it in Tokyo?")
	p.Click("#send")
	p.WaitFor("the timeout's message", `[...document.querySelectorAll('.sys')].at(-1)?.dataset.kind === 'timeout'`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	p.WaitFor("the card's decision", lastCard+`.querySelector('.decided')`)
	label := p.Str(lastCard + `.querySelector('.decided').textContent`)
	assert.Regexp(t, `^Timed out at \d\d:\d\d$`, label, "the audit's timeout on the card")
	live := drawing(p)
	require.Len(t, live.Calls, 1)
	assert.Equal(t, "rejected", live.Calls[0].State)

	reload(p, h.ts.URL+"/", 1)
	p.WaitFor("the card's decision from the history", lastCard+`.querySelector('.decided')`)
	assert.Equal(t, label, p.Str(lastCard+`.querySelector('.decided').textContent`))
	reloaded := drawing(p)
	assert.Equal(t, live, reloaded)
	assert.Equal(t, []string{"card get_time: rejected", "sys timeout: Approval timed out: the tool call was rejected and the run ended."}, reloaded.Order)
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserHistoryOfStoppedAndUnknownCalls: a call that a crash stopped
// while it ran (stored as the agent stores it: rejected, cause stopped,
// with the output it had saved) is drawn invalidated with its output; the
// calls of a version 2 export, which does not say how they ended, are
// drawn as unknown, never as done.
func TestBrowserHistoryOfStoppedAndUnknownCalls(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	h := newHarness(t, Options{Store: st})
	b := cdp.Start(t)
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)

	// The page's session, stored as a crash and the resumed turn leave it.
	id := currentSession(p)
	ctx := context.Background()
	_, err := st.CreateSession(ctx, memory.Session{ID: id, Title: "Backup"})
	require.NoError(t, err)
	_, err = st.Append(ctx, id,
		memory.Message{Role: memory.RoleUser, Content: "Run the backup"},
		memory.Message{Role: memory.RoleAssistant, Content: "Running it. <need_tool>", ToolCalls: []memory.ToolCall{
			{ID: "call_1", Name: "run_command", Arguments: json.RawMessage(`{"command":"backup.sh"}`)}}},
		memory.Message{Role: memory.RoleTool, ToolCallID: "call_1", Name: "run_command", Content: "copied 3 files\n[" + agent.CauseStopped.DefaultReason() + "]",
			Outcome: memory.OutcomeRejected, Cause: string(agent.CauseStopped)},
		memory.Message{Role: memory.RoleAssistant, Content: "The backup was cut short."},
	)
	require.NoError(t, err)
	reload(p, h.ts.URL+"/", 1)
	got := drawing(p)
	assert.Equal(t, drawn{
		Calls: []drawnCall{{Tool: "run_command", State: "invalidated", Icon: "⊘", Reason: agent.CauseStopped.DefaultReason(), Output: "copied 3 files"}},
		Order: []string{"card run_command: invalidated"},
	}, got, "a call stopped by a crash: invalidated, its output kept, the turn went on")

	// An export of version 2: its tool messages say nothing of how their
	// calls ended.
	doc := filepath.Join(t.TempDir(), "old.json")
	require.NoError(t, os.WriteFile(doc, []byte(`{
  "format": "planround.session/v2",
  "session": {"id": "old", "title": "Old", "created_at": "2025-01-02T03:04:05Z"},
  "messages": [
    {"id": 1, "role": "user", "content": "list the files", "created_at": "2025-01-02T03:04:05Z"},
    {"id": 2, "role": "assistant", "content": "<need_tool>", "tool_calls": [
      {"id": "c1", "name": "run_command", "arguments": {"command": "ls -la"}},
      {"id": "c2", "name": "get_time", "arguments": {"city": "Tokyo"}}
    ], "created_at": "2025-01-02T03:04:06Z"},
    {"id": 3, "role": "tool", "content": "rejected by user", "tool_call_id": "c1", "name": "run_command", "created_at": "2025-01-02T03:04:07Z"},
    {"id": 4, "role": "tool", "content": "10:00 in Tokyo", "tool_call_id": "c2", "name": "get_time", "created_at": "2025-01-02T03:04:07Z"}
  ],
  "summaries": []
}`), 0o600))
	p.SetFiles("#import-file", doc)
	p.WaitFor("the imported conversation", `document.querySelector('#session').textContent !== `+cdp.JSString("session "+id)+` && `+cards+`.length === 2`)
	got = drawing(p)
	assert.Equal(t, []drawnCall{
		{Tool: "run_command", State: "unknown", Icon: "–"},
		{Tool: "get_time", State: "unknown", Icon: "–"},
	}, got.Calls, "calls that do not say how they ended: unknown, never done")
	assert.Equal(t, []string{"card run_command: unknown", "card get_time: unknown"}, got.Order, "no end of run is made up")
	assert.Contains(t, p.Str(lastCard+`.textContent`), "10:00 in Tokyo", "what the tool message says is shown")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
