package main

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// TestMainKeepsModelConnections: with a configured model, the program keeps
// as many idle connections to it as runs may overlap (-max-runs), so waves
// of concurrent turns reuse the connections of the wave before instead of
// dialing anew (Go's default transport keeps 2 per host: the later waves
// would dial again for all but two of their requests).
func TestMainKeepsModelConnections(t *testing.T) {
	leaktest.Check(t)
	const sessions, waves = 6, 4
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Respond(func(req *agenttest.Request) agenttest.Response {
		if req.LastMessage().Role == "user" {
			return agenttest.Reply().Text("Sure.").Text(" <no_tool>").Finish("stop").Delay(20 * time.Millisecond)
		}
		return agenttest.Reply().Text("Done").Text(".").Finish("stop").Delay(20 * time.Millisecond)
	})
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_MODEL", "m")

	p := startProgram(t, "-max-runs", "8")
	base := strings.TrimSuffix(p.URL, "/")
	// A browser each: a browser may run only a few turns at once.
	ids := make([]string, sessions)
	clients := make([]*http.Client, sessions)
	streams := make([]*events, sessions)
	for i := range ids {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		clients[i] = &http.Client{Transport: &http.Transport{}, Jar: jar}
		defer clients[i].CloseIdleConnections()
		resp, err := clients[i].Get(base + "/")
		require.NoError(t, err)
		resp.Body.Close()
		_, out := postAs(t, clients[i], base, "/api/sessions", `{}`)
		ids[i] = out["session_id"].(string)
		streams[i], _ = openEventsAt(t, clients[i], base, ids[i], "")
	}
	for w := range waves {
		for i, id := range ids {
			code, out := postAs(t, clients[i], base, "/api/chat", mustString(map[string]string{"session_id": id, "message": "hello"}))
			require.Equal(t, http.StatusAccepted, code, "wave %d: %v", w, out)
		}
		var wg sync.WaitGroup
		for _, ev := range streams {
			wg.Go(func() {
				done, _ := ev.runDone(t)
				assert.Equal(t, "finished", done.Status, "wave %d: %+v", w, done)
			})
		}
		wg.Wait()
	}
	requests := len(model.Requests())
	require.GreaterOrEqual(t, requests, 2*sessions*waves, "two rounds per turn")
	assert.LessOrEqual(t, model.Conns(), 8, "connections to the model for %d requests in %d waves of %d runs", requests, waves, sessions)

	assert.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())
}
