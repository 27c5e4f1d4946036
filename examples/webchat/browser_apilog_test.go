package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// refusing is a model transport that answers 400, with an error message
// that holds HTML, while refuse is set, and passes the requests on to next
// otherwise.
type refusing struct {
	next   http.RoundTripper
	refuse *atomic.Bool
}

// refusal is the error message of a refused request.
const refusal = `the model refuses <img src=x onerror="window.__xss=1"> today`

func (rt refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if !rt.refuse.Load() {
		return rt.next.RoundTrip(req)
	}
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := mustJSON(map[string]any{"error": map[string]any{"message": refusal, "type": "invalid_request_error"}})
	return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

// logRow is a row of the Log panel.
type logRow struct {
	ID                                                     int64
	Purpose, Status, Time, Session, Model, Tokens, Latency string
	Error                                                  string
	IsError                                                bool
}

// logRows is a JS expression: the Log panel's rows.
const logRows = `[...document.querySelectorAll('#log-panel tr.log-entry')].map(r => { const c = (n) => r.querySelector('td.' + n).textContent;
	return {ID: Number(r.dataset.id), Purpose: c('purpose'), Status: r.dataset.status, Time: c('time'), Session: c('conv'), Model: c('model'),
		Tokens: c('tokens'), Latency: c('latency'), Error: r.querySelector('.log-error')?.textContent || '', IsError: r.classList.contains('error')}; })`

// TestBrowserAPILog: after a turn with a tool, an approval and a summary,
// the Log panel lists every model call of the turn with its purpose, as
// the store holds them, newest first; a click shows a call's request and
// reply pretty-printed; a failed call stands out with its error (shown as
// text); the list follows the turns while it is open, filters by
// conversation, and deletes.
func TestBrowserAPILog(t *testing.T) {
	leaktest.Check(t)
	var refuse atomic.Bool
	client := &http.Client{Transport: refusing{next: demo.Model{}.Client().Transport, refuse: &refuse}}
	srv, err := NewServer(Options{BaseURL: demo.BaseURL, HTTPClient: client, Model: demo.ModelName, ModelLabel: "built-in demo model",
		Tools: demo.Tools(), Researcher: true, SummarizeAt: 4})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv)} // 127.0.0.1
	t.Cleanup(h.close)
	b := cdp.Start(t) // cleaned up before the server: LIFO
	p := b.NewPage(1280, 900)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	p.WaitFor("the Log button", `!document.querySelector('#apilog').hidden`)
	s1 := p.Str(`localStorage.getItem('planround.webchat.session')`)

	// A first turn, then one with a tool, its approval, and a summary at
	// its end (of the first turn: the session holds four messages or more,
	// and a summary never takes the current turn).
	p.TypeText("#input", "Hello there, planround!")
	p.Click("#send")
	p.WaitFor("the first run to end", `document.querySelectorAll('.turn').length === 1 && document.body.dataset.running === 'false' && document.querySelector('.turn').innerText.length > 0`)
	earlier := len(storedCalls(t, h.srv, s1))
	require.Equal(t, 2, earlier, "planning and continuation")
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", "What's the weather in Paris?")
	p.Click("#send")
	p.WaitFor("the approval card", lastCard+`?.dataset.state === 'approval'`)
	p.ClickJS(lastCard + `.querySelector('button.approve')`)
	p.WaitFor("the run to end", lastCard+`.dataset.state === 'done' && document.body.dataset.running === 'false'`)

	stored := storedCalls(t, h.srv, s1)
	stored = stored[:len(stored)-earlier] // the second turn's
	var purposes []memory.APICallPurpose
	for _, c := range stored {
		purposes = append(purposes, c.Purpose)
	}
	require.Equal(t, []memory.APICallPurpose{memory.PurposeSummary, memory.PurposeToolRound, memory.PurposeToolRound, memory.PurposePlanning}, purposes,
		"the store holds every call of the turn, newest first")

	p.Click("#apilog")
	assert.Equal(t, "true", p.Str(`document.querySelector('#apilog').getAttribute('aria-expanded')`))
	p.WaitFor("the calls of both turns", fmt.Sprintf(`document.querySelectorAll('#log-panel tr.log-entry').length === %d`, len(stored)+earlier))
	var rows []logRow
	require.NoError(t, p.Eval(logRows, &rows))
	require.Len(t, rows, len(stored)+earlier)
	for i, c := range stored {
		r := rows[i]
		assert.Equal(t, c.ID, r.ID, "row %d", i)
		assert.Equal(t, string(c.Purpose), r.Purpose, "row %d", i)
		assert.Equal(t, "ok", r.Status)
		assert.False(t, r.IsError)
		assert.Equal(t, "Hello there, planround!", r.Session, "the conversation by its title")
		assert.Equal(t, demo.ModelName, r.Model)
		assert.Equal(t, fmt.Sprintf("%d / %d", c.Usage.InputTokens, c.Usage.OutputTokens), r.Tokens)
		assert.Regexp(t, `^\d\d:\d\d:\d\d$`, r.Time)
		assert.Regexp(t, `^\d+ ms$|^\d+\.\d\d s$`, r.Latency)
	}

	// The tool round that called get_weather, opened: its request and
	// reply, pretty-printed.
	call := stored[2]
	require.Equal(t, "tool_calls", call.FinishReason)
	p.ClickJS(fmt.Sprintf(`document.querySelector('#log-panel tr.log-entry[data-id="%d"]')`, call.ID))
	p.WaitFor("the call's detail", `document.querySelector('#log-panel .log-detail pre.log-reply')`)
	request := p.Str(`document.querySelector('#log-panel pre.log-request').textContent`)
	assert.Contains(t, request, "\n  \"messages\": [", "indented")
	assert.JSONEq(t, string(call.Request), request, "the request as the store holds it")
	reply := p.Str(`document.querySelector('#log-panel pre.log-reply').textContent`)
	var shown struct {
		Text      string `json:"text"`
		ToolCalls []struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"tool_calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(reply), &shown), reply)
	require.Len(t, shown.ToolCalls, 1)
	assert.Equal(t, "get_weather", shown.ToolCalls[0].Name)
	assert.Equal(t, map[string]any{"city": "Paris"}, shown.ToolCalls[0].Arguments, "the arguments parsed")
	assert.Equal(t, call.Reply.Text, shown.Text)
	assert.Contains(t, p.Str(`document.querySelector('#log-panel .log-detail-head').textContent`), "tool_round")
	p.Screenshot(filepath.Join(t.ArtifactDir(), "apilog.png"))

	// A turn whose model call fails, while the panel is open: the list
	// follows, and the failed call stands out with its error, as text.
	refuse.Store(true)
	p.TypeText("#input", "Say hello!")
	p.Click("#send")
	p.WaitFor("the run to fail", `document.body.dataset.running === 'false' && [...document.querySelectorAll('.sys')].some(m => m.dataset.kind === 'error')`)
	refuse.Store(false)
	p.WaitFor("the failed call", `document.querySelector('#log-panel tr.log-entry.error')`)
	require.NoError(t, p.Eval(logRows, &rows))
	assert.Equal(t, "error", rows[0].Status)
	assert.True(t, rows[0].IsError)
	assert.Equal(t, "planning", rows[0].Purpose)
	assert.Contains(t, rows[0].Error, refusal)
	assert.Equal(t, 0, p.Int(`document.querySelectorAll('#log-panel img').length`), "record data is text")
	var styled struct{ Row, Plain string }
	require.NoError(t, p.Eval(`({Row: getComputedStyle(document.querySelector('#log-panel tr.log-entry.error')).backgroundColor,
		Plain: getComputedStyle(document.querySelector('#log-panel tr.log-entry:not(.error)')).backgroundColor})`, &styled))
	assert.NotEqual(t, styled.Plain, styled.Row, "an error row has a colour of its own")
	p.ClickJS(`document.querySelector('#log-panel tr.log-entry.error')`)
	p.WaitFor("the failed call's detail", `document.querySelector('#log-panel .log-detail .log-error')`)
	assert.Contains(t, p.Str(`document.querySelector('#log-panel .log-detail .log-error').textContent`), refusal)
	assert.Equal(t, 0, p.Int(`document.querySelectorAll('#log-panel img').length`))
	p.Screenshot(filepath.Join(t.ArtifactDir(), "apilog-error.png"))

	// A second conversation: the list holds both, the filter one.
	p.Click("#new-chat")
	p.WaitFor("a new session", `localStorage.getItem('planround.webchat.session') !== `+cdp.JSString(s1))
	s2 := p.Str(`localStorage.getItem('planround.webchat.session')`)
	p.WaitFor("Send to be enabled", `!document.querySelector('#send').disabled`)
	p.TypeText("#input", "Say hello!")
	p.Click("#send")
	p.WaitFor("the run to end", `document.body.dataset.running === 'false' && document.querySelectorAll('.turn').length === 1 && document.querySelector('.turn').innerText.length > 0`)
	all := storedCalls(t, h.srv, s1, s2)
	p.WaitFor("both conversations' calls", fmt.Sprintf(`document.querySelectorAll('#log-panel tr.log-entry').length === %d`, len(all)))
	first := len(storedCalls(t, h.srv, s1))
	p.JS(`{ const s = document.querySelector('#log-session'); s.value = ` + cdp.JSString(s1) + `; s.dispatchEvent(new Event('change')); }`)
	p.WaitFor("the first conversation's calls", fmt.Sprintf(`document.querySelectorAll('#log-panel tr.log-entry').length === %d`, first))
	require.NoError(t, p.Eval(logRows, &rows))
	for _, r := range rows {
		assert.Equal(t, "Hello there, planround!", r.Session)
	}

	// Delete (two clicks): the filtered conversation's calls only.
	p.Click("#log-panel button.log-delete")
	assert.Equal(t, "Delete?", p.Str(`document.querySelector('#log-panel button.log-delete').textContent`))
	p.Click("#log-panel button.log-delete")
	p.WaitFor("the list emptied", `document.querySelectorAll('#log-panel tr.log-entry').length === 0 && document.querySelector('#log-panel .log-empty').textContent !== ''`)
	assert.Empty(t, storedCalls(t, h.srv, s1))
	assert.Len(t, storedCalls(t, h.srv, s2), len(all)-first, "the other conversation's calls stay")

	// A phone: the panel fits, the page does not scroll sideways.
	n := b.NewPage(400, 800)
	n.Navigate(h.ts.URL + "/")
	n.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	n.WaitFor("the Log button", `!document.querySelector('#apilog').hidden`)
	n.Click("#apilog")
	n.WaitFor("the rows", `document.querySelectorAll('#log-panel tr.log-entry').length > 0`)
	var phone struct{ Width, Inner, PanelRight int }
	require.NoError(t, n.Eval(`({Width: document.documentElement.scrollWidth, Inner: window.innerWidth,
		PanelRight: Math.ceil(document.querySelector('#log-panel').getBoundingClientRect().right)})`, &phone))
	assert.LessOrEqual(t, phone.Width, phone.Inner, "no sideways scrolling")
	assert.LessOrEqual(t, phone.PanelRight, phone.Inner, "the panel fits")
	n.Screenshot(filepath.Join(t.ArtifactDir(), "apilog-narrow.png"))

	p.Click("#apilog")
	assert.Equal(t, "true", p.Str(`String(document.querySelector('#log-panel').hidden)`))
	assert.False(t, strings.Contains(p.Str(`String(window.__xss)`), "1"), "injected script ran")
	assert.Empty(t, b.PageErrors(), "JavaScript errors on the page")
}
