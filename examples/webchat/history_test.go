package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
)

// TestHistoryHidesTheAgentsTags: with an intent dictionary of its own, the
// history a reloaded page draws hides that dictionary's tags, as the live
// stream did, and keeps them in the stored content.
func TestHistoryHidesTheAgentsTags(t *testing.T) {
	leaktest.Check(t)
	dict, err := intent.NewDictionary(
		intent.Tag{Name: "<chat>", SkipTools: true, Description: "you answered in words"},
		intent.Tag{Name: "<act>", Description: "you need a tool"},
	)
	require.NoError(t, err)
	model := agenttest.NewServer()
	model.Enqueue(
		agenttest.Reply().Text("<voice>Hi there. <ch", "at>").Finish("stop"),
		agenttest.Reply().Text("How can I help? <chat>").Finish("stop"),
	)
	srv, err := NewServer(Options{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Intents: dict})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv), model: model}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)

	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "hi")
	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status)
	live := map[int]string{}
	for _, c := range chunks {
		if c.Kind == agent.KindText {
			live[c.Round] += c.Text
		}
	}

	resp, err := h.client.Get(h.ts.URL + "/api/history?session_id=" + session)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var hist []historyEntry
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&hist))
	require.Len(t, hist, 3)
	assert.Equal(t, "<voice>Hi there. <chat>", hist[1].Content, "stored text keeps its tags")
	assert.Equal(t, live[0], hist[1].Text, "the planning reply as it was shown live")
	assert.Equal(t, live[1], hist[2].Text, "the answer as it was shown live")
	assert.NotContains(t, hist[2].Text, "<chat>")
}
