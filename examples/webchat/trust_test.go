package main

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
)

// trustServer is the stdio test server with its trust tools (lookup, wipe,
// redefine), of which only those named in keep are offered.
func trustServer(bin, name string, trusted bool, keep ...string) mcpclient.ServerConfig {
	var disabled []string
	for _, n := range append(only(), "lookup", "wipe", "redefine") {
		if !strings.Contains(" "+strings.Join(keep, " ")+" ", " "+n+" ") {
			disabled = append(disabled, n)
		}
	}
	return mcpclient.ServerConfig{Name: name, Command: bin, Args: []string{"-trust"}, Trusted: trusted, DisabledTools: disabled}
}

// newTrustHarness is newMCPHarness with Options.TrustHints, its MCP
// client pinning in a MemStore per session owner, as main's does.
func newTrustHarness(t *testing.T, model *agenttest.Server, servers ...mcpclient.ServerConfig) (*harness, *mcpclient.Client) {
	t.Helper()
	st := new(memory.MemStore)
	mc, err := mcpclient.New(t.Context(), servers, mcpclient.Options{KV: st, UserOf: mcpUser})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mc.Close()) }) // after the Server's: LIFO
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: demo.Tools(), MCP: mc, Store: st, TrustHints: true})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)} // 127.0.0.1
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h, mc
}

// TestTrustHints: with -trust-hints a trusted server's read-only tool runs
// without a card, the same tool of an untrusted server shows one, with its
// hints.
func TestTrustHints(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	model := toolModel(t, toolCall{"trusted__lookup", `{"key":"a"}`}, toolCall{"untrusted__lookup", `{"key":"b"}`})
	h, _ := newTrustHarness(t, model, trustServer(bin, "trusted", true, "lookup"), trustServer(bin, "untrusted", false, "lookup"))
	s := h.newSession(t)
	ev, _ := h.openEvents(t, s)
	h.chat(t, s, "look them up")
	call, seen := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, "untrusted__lookup", call.Name, "only the untrusted lookup asks")
	assert.Equal(t, &agent.ToolHints{ReadOnly: true, Idempotent: true}, call.Hints)
	h.decide(t, s, call, true)
	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status, "%+v", done)
	for _, e := range seen {
		if e.name == "" {
			chunks = append(chunks, e.chunk(t))
		}
	}
	results := map[string]string{}
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			results[c.Tool.Name] = c.Tool.Result
		}
		if c.Kind == agent.KindToolCall && c.Tool.Name == "trusted__lookup" {
			assert.NotEqual(t, agent.StateApprovalRequired, c.Tool.State, "the trusted lookup shows no card")
		}
	}
	assert.Equal(t, map[string]string{"trusted__lookup": "lookup: a", "untrusted__lookup": "lookup: b"}, results)
}

// TestBrowserTrustCard: the approval card shows a tool's hints as badges,
// and for a changed definition what changed, without the auto-approve
// box, even for a tool the page auto-approves.
func TestBrowserTrustCard(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	h, mc := newTrustHarness(t, userCallModel(t), trustServer(bin, "files", false, "lookup", "redefine"))
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 800)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	send := func(text string) {
		t.Helper()
		p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
		p.TypeText("#input", text)
		p.Click("#send")
	}
	cardState := func(state string) string { return lastCard + `?.dataset.state === '` + state + `'` }
	hints := func() string {
		return p.Str(`[...` + lastCard + `.querySelectorAll('.hint')].map(e => e.textContent).join(', ')`)
	}

	// Hints on the card; approved with auto-approve ticked.
	send(`lookup {"key":"k"}`)
	p.WaitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, "read-only, idempotent, closed world, untrusted hints", hints())
	assert.Equal(t, "0", p.Str(`String(`+lastCard+`.querySelectorAll('.details').length)`))
	p.ClickJS(lastCard + `.querySelector('input.auto-approve')`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card to be done", cardState("done"))
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)

	// The server changes lookup.
	send(`redefine {}`)
	p.WaitFor("the approval card", cardState("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card to be done", cardState("done"))
	p.WaitFor("the run to end", `document.body.dataset.running === 'false'`)
	require.Eventually(t, func() bool {
		return slices.Contains(mc.Servers()[0].Unapproved, "lookup")
	}, 10*time.Second, 10*time.Millisecond, "the client reads the changed list")
	for _, tl := range mc.Tools() {
		if tl.Definition().Name == "lookup" {
			assert.NotContains(t, tl.Definition().Description, "elsewhere", "the model is offered the change before anyone approved it")
		}
	}

	// Auto-approved before, asked now, with what changed.
	send(`lookup {"key":"k"}`)
	p.WaitFor("the approval card of the changed tool", cardState("approval")+` && `+lastCard+`.querySelector('.details')`)
	details := p.Str(lastCard + `.querySelector('.details').textContent`)
	assert.Contains(t, details, `changed the definition of the tool "lookup"`)
	assert.Contains(t, details, `properties added: "exact"`)
	assert.Equal(t, "0", p.Str(`String(`+lastCard+`.querySelectorAll('input.auto-approve').length)`), "no auto-approve box")
	p.Screenshot(t.ArtifactDir() + "/trust-card.png")
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the card to be done", cardState("done"))
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
