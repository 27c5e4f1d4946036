package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
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
	pending := pendingOf(t, h.srv, currentSession(p))
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

// pageCode returns the page's (web/app.js) functions and constants of the
// given names, as written there: a test runs them in a page of its own.
func pageCode(t *testing.T, names ...string) string {
	t.Helper()
	src, err := fs.ReadFile(webFiles, "web/app.js")
	require.NoError(t, err)
	var b strings.Builder
	for _, name := range names {
		start := strings.Index(string(src), "\n  function "+name+"(")
		end := "\n  }\n"
		if start < 0 {
			start = strings.Index(string(src), "\n  const "+name+" = ")
			end = ";\n"
		}
		require.GreaterOrEqual(t, start, 0, "app.js has no %s", name)
		n := strings.Index(string(src[start:]), end)
		require.Greater(t, n, 0, "the end of %s", name)
		b.Write(src[start : start+n+len(end)])
	}
	return b.String()
}

// jsonViewCheck holds JSON texts, made at random from a seed, up to the
// page's parseKeeping and jsonView, and returns what went wrong (at most a
// few). JSON.parse is the reference: parseKeeping must give its value, and
// keep, for every member named arguments, a source text that parses to
// that member's value and is the text's own; jsonView, indented or
// compact, must be JSON that parses to the same value, with the same
// number tokens as the text, and no character that does not show. Texts
// cut short (not JSON) must come back drawn, never throw.
const jsonViewCheck = `(() => {
  let seed = SEED;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const ws = () => rand() < 0.7 ? '' : pick([' ', '\n', '\t', '\r\n  ']);
  const CHARS = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\u202E', '\u2066', '\u2069', '\u200B', '\u200D', '\uFEFF',
    '\u00A0', '\u2028', '\u00AD', '\u{E0041}', '\u{1F600}', '\u05E9', '\u0639', '\u00E9', '\u0000', '\u001F', '<', '&', '{', ']', ':', ','];
  const NUMS = ['0', '-0', '7', '1.0', '2.50', '1e400', '-1E-7', '12345678901234567890', '0.1', '1e+2', '-9007199254740993', '123456789012345678901234567890.5'];
  const KEYS = ['arguments', 'tool', 'a', '', '0', '7', '__proto__', 'x\u202Ey', 'side', 'arguments ', 'argument\\u0073'];
  const hex = (u) => '\\u' + u.toString(16).padStart(4, '0');
  const str = () => {
    let out = '"';
    const n = Math.floor(rand() * 6);
    for (let i = 0; i < n; i++) {
      if (rand() < 0.04) { out += hex(0xD800 + Math.floor(rand() * 0x800)); continue; } // a lone surrogate
      const ch = pick(CHARS);
      if (ch === '"') out += '\\"';
      else if (ch === '\\') out += '\\\\';
      else if (ch.codePointAt(0) < 0x20 || rand() < 0.25) for (let k = 0; k < ch.length; k++) out += hex(ch.charCodeAt(k));
      else out += ch;
    }
    return out + '"';
  };
  const gen = (depth) => {
    const r = rand();
    if (depth > 3 || r < 0.35) return pick([str, () => pick(NUMS), () => pick(['true', 'false', 'null'])])();
    if (r < 0.7) {
      const keys = [...new Set(Array.from({ length: Math.floor(rand() * 5) }, () => pick(KEYS)))];
      return '{' + ws() + keys.map((k) => (k.includes('\\') ? '"' + k + '"' : JSON.stringify(k)) + ws() + ':' + ws() + gen(depth + 1) + ws()).join(',' + ws()) + '}';
    }
    return '[' + ws() + Array.from({ length: Math.floor(rand() * 5) }, () => gen(depth + 1) + ws()).join(',' + ws()) + ']';
  };
  const numbers = (x) => x.replace(/"(?:[^"\\]|\\.)*"/g, '""').match(/-?\d[\d.eE+-]*/g) ?? [];
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const hidden = /[\p{Cf}\u2028\u2029]/u;
  const bad = [];
  const fail = (what, text, got) => { if (bad.length < 5) bad.push(what + ': ' + JSON.stringify(text) + ' → ' + JSON.stringify(got)); };
  const objects = (v, out) => {
    if (v === null || typeof v !== 'object') return out;
    if (!Array.isArray(v)) out.push(v);
    for (const k of Object.getOwnPropertyNames(v)) objects(Object.getOwnPropertyDescriptor(v, k).value, out);
    return out;
  };
  const texts = [EXTRA];
  for (let i = 0; i < COUNT; i++) texts.push(ws() + gen(0) + ws());
  for (const text of texts) {
    const want = JSON.parse(text);
    let got;
    try { got = parseKeeping(text, ['arguments']); } catch (e) { fail('parseKeeping threw', text, String(e)); continue; }
    if (!same(got, want)) fail('parseKeeping', text, got);
    for (const o of objects(got, [])) {
      if (!Object.hasOwn(o, 'arguments')) continue;
      const src = sourceOf(o, 'arguments');
      if (typeof src !== 'string' || !text.includes(src) || !same(JSON.parse(src), o.arguments)) fail('the source of arguments', text, src);
    }
    for (const compact of [false, true]) {
      let view;
      try { view = jsonView(text, { compact }).textContent; } catch (e) { fail('jsonView threw', text, String(e)); continue; }
      let back;
      try { back = JSON.parse(view); } catch (e) { fail('jsonView is not JSON', text, view); continue; }
      if (!same(back, want)) fail('jsonView changed the value', text, view);
      if (numbers(view).join(' ') !== numbers(text).join(' ')) fail('jsonView changed a number', text, view);
      if (hidden.test(view)) fail('jsonView shows a hidden character', text, view);
      if (compact && /\n/.test(view.replace(/"(?:[^"\\]|\\.)*"/g, ''))) fail('compact on lines', text, view);
    }
    try {
      const cut = text.slice(0, Math.floor(rand() * text.length));
      const view = jsonView(cut, { expand: 'arguments' }).textContent;
      if (hidden.test(view)) fail('a cut text shows a hidden character', cut, view);
      jsonView(text, { expand: 'arguments' });
    } catch (e) { fail('jsonView threw on a cut text', text, String(e)); }
  }
  return bad;
})()`

// TestBrowserJSONView: the page's reading of JSON text as it was sent
// (parseKeeping, jsonView), which the event stream, the history, the
// audit and the log feed, checked against JSON.parse in Chromium on
// thousands of texts made at random (objects, arrays, names that repeat
// across levels, strings with escapes, hidden characters, lone
// surrogates, numbers that a float64 changes, white space anywhere).
func TestBrowserJSONView(t *testing.T) {
	code := pageCode(t, "el", "SOURCE", "HIDDEN_JSON", "HIDDEN_TEXT", "codePoint", "mark", "escapeUnit", "appendMarked",
		"parseKeeping", "sourceOf", "memberSources", "stringEnd", "jsonView", "writeJSON")
	b := cdp.Start(t)
	p := b.NewPage(800, 600)
	extra := []string{hostileArgs, `{"kind":"tool_call","tool":{"id":"c","arguments":` + hostileArgs + `}}`,
		`[{"arguments":{}},{"tool_calls":[{"arguments":{"arguments":{"arguments":[]}}}]}]`, `"arguments"`, `{"a":"\"arguments\":1"}`}
	var quoted []string
	for _, e := range extra {
		quoted = append(quoted, cdp.JSString(e))
	}
	for seed := range 4 {
		script := strings.NewReplacer("SEED", fmt.Sprint(seed*7919+1), "COUNT", "1500", "EXTRA", strings.Join(quoted, ", ")).Replace(jsonViewCheck)
		var bad []string
		require.NoError(t, p.Eval(`'use strict'; (() => {`+code+`; return `+script+`; })()`, &bad))
		assert.Empty(t, bad, "seed %d", seed)
	}
}
