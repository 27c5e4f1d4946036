package main

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
)

// A run that fails shows the provider's message in the browser (the
// run_done event's error), not only the HTTP status.
func TestProviderMessageReachesTheBrowser(t *testing.T) {
	leaktest.Check(t)
	model := agenttest.NewServer()
	const msg = "The model `gpt-x` does not exist or you do not have access to it."
	model.Enqueue(agenttest.HTTPError(404, msg))
	srv, err := NewServer(Options{BaseURL: model.URL(), Model: "gpt-x", Tools: demo.Tools()})
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv), model: model}
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)

	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "hi")
	done, _ := ev.runDone(t)
	assert.Equal(t, "error", done.Status)
	assert.Contains(t, done.Error, "404 Not Found: "+msg)
}
