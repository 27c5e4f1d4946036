package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/ui/aisdk"
)

// script is the test's model: a planning round that asks for a tool,
// get_weather {"city":"Lima"} for a message about the weather, and then
// "Done: " and the tool's result.
func script(req *agenttest.Request) agenttest.Response {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	var user string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && msgs[i].Content != "[continue]" {
			user = msgs[i].Content
			break
		}
	}
	switch {
	case last.Role == "tool":
		return agenttest.Reply().Text("Done: ", last.Content).Finish("stop")
	case !req.HasTools():
		return agenttest.Reply().Text("Let me check. <need_tool>").Finish("stop")
	case strings.Contains(user, "weather"):
		return agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	}
	return agenttest.Reply().Text("I do not know that one.").Finish("stop")
}

// testServer is the example's server on 127.0.0.1 with the scripted model
// (in process, no port) and a get_weather that counts its runs.
type testServer struct {
	srv  *server
	ts   *httptest.Server
	runs atomic.Int32
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	h := &testServer{}
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "Weather for a city.", func(_ context.Context, in city, _ agent.Progress) (string, error) {
		h.runs.Add(1)
		return "sunny in " + in.City, nil
	})
	srv, err := newServer(config{
		Agent: agent.Config{
			BaseURL:    "http://model.invalid/v1",
			HTTPClient: &http.Client{Transport: agenttest.RespondFunc(script)},
			Model:      "test-model",
		},
		Weather: weather,
	})
	require.NoError(t, err)
	h.srv = srv
	h.ts = httptest.NewServer(srv) // 127.0.0.1:0
	t.Cleanup(func() {
		h.srv.Close() // the runs first: their streams end
		h.ts.Close()
	})
	return h
}

// TestBrowserApproval drives the page in headless Chromium: a message
// whose turn asks to approve get_weather, the approval card drawn by the
// page, a click on Approve, and the tool's result and the model's answer
// drawn in turn, all through the vendored ai client and the handler.
func TestBrowserApproval(t *testing.T) {
	leaktest.Check(t)
	h := newTestServer(t)
	b := startBrowser(t) // cleaned up before the server: LIFO
	p := b.newPage(1000, 800)

	p.navigate(h.ts.URL + "/")
	p.waitFor("the page's script", `document.body.dataset.chat && document.querySelector('#status').textContent === 'ready'`)
	chatID := p.str(`document.body.dataset.chat`)

	p.typeText("#input", "what is the weather in Lima")
	p.click("#send")

	tool := `document.querySelector('.msg.assistant .tool[data-tool="get_weather"]')`
	p.waitFor("the approval card", tool+`?.dataset.state === 'approval-requested' && `+tool+`.querySelector('button.approve')`)
	assert.Contains(t, p.str(tool+`.querySelector('pre.input').textContent`), `"city": "Lima"`)
	assert.Equal(t, "ready", p.str(`document.body.dataset.status`), "the response ended at the approval")
	assert.Zero(t, h.runs.Load(), "the tool ran before its approval")
	pending, err := h.srv.approvals.Pending(t.Context(), chatID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	dir := t.ArtifactDir()
	p.screenshot(filepath.Join(dir, "approval.png"))

	p.clickJS(tool + `.querySelector('button.approve')`)
	p.waitFor("the tool's result", tool+`?.dataset.state === 'output-available'`)
	assert.Equal(t, "sunny in Lima", p.str(tool+`.querySelector('pre.output').textContent`))
	p.waitFor("the answer", `[...document.querySelectorAll('.msg.assistant .text')].some(e => e.textContent.includes('Done: sunny in Lima'))`)
	p.waitFor("the turn's end", `document.body.dataset.status === 'ready'`)
	p.screenshot(filepath.Join(dir, "answer.png"))

	assert.Equal(t, int32(1), h.runs.Load(), "get_weather ran once")
	assert.Equal(t, 1, p.num(`document.querySelectorAll('.msg.assistant').length`), "the answer continues the message of the approval")
	assert.Zero(t, p.num(`document.querySelectorAll('button.approve, button.deny').length`), "no approval buttons left")
	assert.Equal(t, "true", p.str(`String(document.querySelector('#stop').disabled)`))

	// The decision went through the handler, by this browser.
	var decisions []approval.DecisionRecord
	for d, err := range h.srv.approvals.Decisions(t.Context(), approval.DecisionQuery{SessionID: chatID}) {
		require.NoError(t, err)
		decisions = append(decisions, d)
	}
	require.Len(t, decisions, 1)
	d := decisions[0]
	assert.Equal(t, "get_weather", d.Tool)
	assert.True(t, d.Decision.Approved)
	assert.Equal(t, aisdk.Via, d.Decision.Via)
	assert.True(t, strings.HasPrefix(d.Decision.By, "browser:"), "decided by %q", d.Decision.By)
	h.srv.mu.Lock()
	assert.Equal(t, d.Decision.By, h.srv.owners[chatID], "the chat's owner decided")
	h.srv.mu.Unlock()

	assert.Empty(t, b.pageErrors(), "JavaScript errors on the page")
}

// num evaluates expr to a number.
func (p *page) num(expr string) int {
	p.b.t.Helper()
	var n int
	if err := p.eval(expr, &n); err != nil {
		p.b.t.Fatal(err)
	}
	return n
}
