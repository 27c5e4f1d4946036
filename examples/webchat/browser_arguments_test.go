package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// hostileArgs are arguments a model writes that JSON.parse would show as
// something else: a right-to-left override in the command (it reads
// "rm -rf ~/exe.pdf"), isolates written as escapes, numbers that a
// float64 rounds, overflows or rewrites, and a name given twice.
const hostileArgs = "{\"command\":\"rm -rf ~/\u202Efdp.exe\",\"note\":\"a\\u2066b\\u2069c\"," +
	"\"id\":12345678901234567890,\"huge\":1e400,\"price\":2.50,\"neg\":-0,\"exp\":1E3,\"list\":[1.0,-1e-7],\"dup\":1,\"dup\":2}"

// hostileView is hostileArgs as a card must show them: every member as
// written, the hidden characters as escapes.
const hostileView = `{
  "command": "rm -rf ~/\u202Efdp.exe",
  "note": "a\u2066b\u2069c",
  "id": 12345678901234567890,
  "huge": 1e400,
  "price": 2.50,
  "neg": -0,
  "exp": 1E3,
  "list": [
    1.0,
    -1e-7
  ],
  "dup": 1,
  "dup": 2
}`

// argumentsHarness is a server whose scripted model calls deploy with
// hostileArgs: at once in a turn whose message does not say "nested", and
// through the sub-agent helper (which needs approval, as does deploy)
// otherwise. deploy waits for release, then answers with its arguments.
func argumentsHarness(t *testing.T, release <-chan struct{}) *harness {
	t.Helper()
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Respond(func(req *agenttest.Request) agenttest.Response {
		var asked string
		for _, m := range req.Messages {
			if m.Role == "user" && m.Content != "[continue]" {
				asked = m.Content
			}
		}
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("I will. <need_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("Done.").Finish("stop")
		case req.HasTool("helper") && strings.Contains(asked, "nested"):
			return agenttest.Reply().Call(0, "call_h", "helper", `{"task":"deploy it"}`).Finish("tool_calls")
		}
		return agenttest.Reply().Call(0, "call_d", "deploy", hostileArgs).Finish("tool_calls")
	})
	deploy := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "deploy", Description: "Deploys.", Parameters: map[string]any{"type": "object"}},
		Fn: func(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return "deployed " + string(args), nil
		},
	}
	inner, err := agent.NewToolRegistry(deploy)
	require.NoError(t, err)
	helper, err := agent.NewSubAgent("helper", "Deploys for you.", agent.Config{
		BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: inner, DisablePlanning: true,
	})
	require.NoError(t, err)
	return newModelHarness(t, onModel(model, Options{Tools: append(demo.Tools(), deploy, helper)}))
}

// TestBrowserArgumentsAsSent: a card shows a call's arguments from the text
// the model wrote, whichever way it is drawn (waiting for approval,
// executing, done, rejected, after a reload, edited in the audit, in the
// Log panel's reply): numbers as written, every member, and a bidi
// override, which would make the command read as another, as its escape.
// A tool result shows the override as its code point.
func TestBrowserArgumentsAsSent(t *testing.T) {
	leaktest.Check(t)
	release := make(chan struct{})
	h := argumentsHarness(t, release)
	b := cdp.Start(t) // cleaned up before the servers: LIFO
	p := b.NewPage(1280, 900)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	args := func(card string) string {
		t.Helper()
		return p.Str(`[...` + card + `.querySelectorAll('.label')].find(l => l.textContent === 'arguments').nextElementSibling.textContent`)
	}
	noHidden := func(what, expr string) {
		t.Helper()
		assert.Equal(t, "false", p.Str(`String(/\p{Cf}/u.test(`+expr+`.textContent))`), "%s: a hidden character drawn as such", what)
	}
	state := func(s string) string { return lastCard + `?.dataset.state === '` + s + `'` }

	// 1. Approved: waiting, executing, done.
	p.TypeText("#input", "Deploy")
	p.Click("#send")
	p.WaitFor("the approval card", state("approval")+` && `+lastCard+`.querySelector('button.approve')`)
	assert.Equal(t, hostileView, args(lastCard), "waiting for approval")
	noHidden("the approval card", lastCard)
	assert.Equal(t, `\u202E`, p.Str(lastCard+`.querySelector('.cf').textContent`), "the override, marked")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "arguments.png"))
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the call to run", state("executing"))
	assert.Equal(t, hostileView, args(lastCard), "executing")
	close(release)
	p.WaitFor("the call to be done", state("done")+` && document.body.dataset.running === 'false'`)
	assert.Equal(t, hostileView, args(lastCard), "done")
	result := p.Str(`[...` + lastCard + `.querySelectorAll('.label')].find(l => l.textContent === 'result').nextElementSibling.textContent`)
	assert.Contains(t, result, "deployed ")
	assert.Contains(t, result, "~/⟨U+202E⟩fdp.exe", "the result's override, marked")
	noHidden("the done card", lastCard)

	// The Log panel: the tool round's reply, its arguments as written.
	p.Click("#apilog")
	p.WaitFor("the log", `document.querySelectorAll('#log-panel tr.log-entry').length >= 3`)
	stored, err := h.srv.apiLog.APICalls(t.Context(), memory.APICallQuery{SessionIDs: []string{currentSession(p)}})
	require.NoError(t, err)
	var round int64
	for _, c := range stored {
		if c.FinishReason == "tool_calls" {
			round = c.ID
		}
	}
	require.NotZero(t, round, "a tool round in the log")
	p.ClickJS(fmt.Sprintf(`document.querySelector('#log-panel tr.log-entry[data-id="%d"]')`, round))
	p.WaitFor("the call's detail", `document.querySelector('#log-panel .log-detail pre.log-reply')`)
	reply := p.Str(`document.querySelector('#log-panel pre.log-reply').textContent`)
	assert.Contains(t, reply, strings.ReplaceAll(hostileView, "\n", "\n      "), "the reply's arguments")
	noHidden("the log's reply", `document.querySelector('#log-panel pre.log-reply')`)
	p.Click("#apilog")

	// 2. Rejected.
	p.TypeText("#input", "Deploy again")
	p.Click("#send")
	p.WaitFor("the second approval card", `document.querySelectorAll('#messages .card').length === 2 && `+state("approval")+` && `+lastCard+`.querySelector('button.reject')`)
	p.ClickJS(lastCard + `.querySelector('button.reject')`)
	p.WaitFor("the call to be rejected", state("rejected")+` && document.body.dataset.running === 'false'`)
	assert.Equal(t, hostileView, args(lastCard), "rejected")
	noHidden("the rejected card", lastCard)

	// 3. Approved with an edit, as another client may send it: the audit
	// shows the edit as sent.
	const edit = "{\"command\":\"echo \u202Eok\",\"n\":98765432109876543210,\"f\":0.10}"
	p.TypeText("#input", "Deploy once more")
	p.Click("#send")
	p.WaitFor("the third approval card", `document.querySelectorAll('#messages .card').length === 3 && `+state("approval"))
	pending, err := h.srv.approvals.Pending(t.Context(), currentSession(p))
	require.NoError(t, err)
	require.Len(t, pending, 1)
	pa := pending[0]
	body := fmt.Sprintf(`{"session_id":%q,"approval_id":%q,"call_id":%q,"tool":%q,"arguments_digest":%q,"approved":true,"arguments":%s}`,
		pa.SessionID, pa.ApprovalID, pa.Call.ID, pa.Call.Name, pa.Call.ArgumentsDigest, edit)
	assert.Equal(t, "200", p.Str(`fetch('/api/tool-approve', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: `+cdp.JSString(body)+`}).then(r => String(r.status))`))
	p.WaitFor("the edited call to be done", state("done")+` && document.body.dataset.running === 'false'`)
	p.Click("#audit")
	p.WaitFor("the audit's edit", fmt.Sprintf(`document.querySelector('#audit-panel tr.audit-entry[data-approval-id="%s"] td.edit')?.textContent`, pa.ApprovalID))
	assert.Equal(t, `{"command":"echo \u202Eok","n":98765432109876543210,"f":0.10}`,
		p.Str(fmt.Sprintf(`document.querySelector('#audit-panel tr.audit-entry[data-approval-id="%s"] td.edit').textContent`, pa.ApprovalID)))
	p.Click("#audit")

	// 4. Drawn again from the history.
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the history", `document.querySelectorAll('#messages .card').length === 3 && document.querySelector('#conn').textContent === 'connected'`)
	for i, want := range []string{hostileView, hostileView, "{\n  \"command\": \"echo \\u202Eok\",\n  \"n\": 98765432109876543210,\n  \"f\": 0.10\n}"} {
		card := fmt.Sprintf(`document.querySelectorAll('#messages .card')[%d]`, i)
		assert.Equal(t, want, args(card), "card %d, from the history", i)
		noHidden(fmt.Sprintf("card %d, from the history", i), card)
	}
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}

// TestBrowserNestedArgumentsAsSent: the card of a call a sub-agent makes,
// nested under the sub-agent's, shows its arguments as the model wrote
// them, as does the sub-agent's own card.
func TestBrowserNestedArgumentsAsSent(t *testing.T) {
	leaktest.Check(t)
	release := make(chan struct{})
	close(release)
	h := argumentsHarness(t, release)
	b := cdp.Start(t)
	p := b.NewPage(1280, 900)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.TypeText("#input", "Deploy, nested")
	p.Click("#send")
	outer := `document.querySelector('#messages .card[data-key="call_h"]')`
	inner := `document.querySelector('#messages .card[data-key="call_h/call_d"]')`
	p.WaitFor("the helper's card", outer+`?.dataset.state === 'approval' && `+outer+`.querySelector('button.approve')`)
	assert.Equal(t, "{\n  \"task\": \"deploy it\"\n}", p.Str(outer+`.querySelector('pre').textContent`))
	p.ClickJS(outer + `.querySelector('button.approve')`)
	p.WaitFor("the nested approval", inner+`?.dataset.state === 'approval' && `+inner+`.querySelector('button.approve')`)
	assert.Equal(t, hostileView, p.Str(inner+`.querySelector('pre').textContent`))
	assert.Equal(t, "false", p.Str(`String(/\p{Cf}/u.test(`+inner+`.textContent))`))
	p.ClickJS(inner + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && `+inner+`.dataset.state === 'done'`)
	assert.Equal(t, hostileView, p.Str(inner+`.querySelector('pre').textContent`), "done")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
