package agent_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// The default client copies http.DefaultTransport and changes only what
// many conversations at once call for; every Agent without a client
// shares it.
func TestDefaultClientSettings(t *testing.T) {
	c := agent.DefaultClient()
	require.Same(t, c, agent.DefaultClient(), "one client for every Agent")
	tr := agent.DefaultTransport()
	def := http.DefaultTransport.(*http.Transport)
	assert.NotSame(t, def, tr, "a copy: the host's http.DefaultTransport is not changed")
	assert.Equal(t, 64, tr.MaxIdleConnsPerHost)
	assert.GreaterOrEqual(t, tr.MaxIdleConns, 64)
	assert.Equal(t, 1024, tr.ReadBufferSize)
	assert.Equal(t, 1024, tr.WriteBufferSize)
	assert.NotNil(t, tr.Proxy, "the proxy from the environment, as http.DefaultTransport")
	assert.True(t, tr.ForceAttemptHTTP2, "HTTP/2 when the server offers it")
	assert.Equal(t, def.TLSHandshakeTimeout, tr.TLSHandshakeTimeout)
	assert.Zero(t, c.Timeout, "no overall timeout: a stream may take long")
}

// Runs of Agents without a client take the connections other runs left
// idle: 8 runs whose requests are all in flight at once open 8
// connections, and 8 more after them, also all at once, reuse those 8.
// (http.DefaultTransport keeps 2 idle per host: 6 of the second runs would
// dial again.)
func TestDefaultClientReusesConnections(t *testing.T) {
	leaktest.Check(t, agent.DefaultClient().CloseIdleConnections)
	const runs = 8
	srv := agenttest.NewServer()
	defer srv.Close()
	defer agent.DefaultClient().CloseIdleConnections()
	a, err := agent.New(agent.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1, DisablePlanning: true})
	require.NoError(t, err)
	for wave := 1; wave <= 2; wave++ {
		// Each reply holds its first frame until every run's request
		// is being answered: the runs need 8 connections at once.
		var inFlight sync.WaitGroup
		inFlight.Add(runs)
		for range runs {
			srv.Enqueue(agenttest.Reply().Text("Done.").Finish("stop").OnFlush(func(frame int) {
				if frame == 1 {
					inFlight.Done()
					inFlight.Wait()
				}
			}))
		}
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		for range runs {
			wg.Go(func() {
				for _, err := range a.Run(context.Background(), agent.Input{Message: "hi"}) {
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		require.Zero(t, srv.Pending())
		assert.Equal(t, runs, srv.Conns(), "connections after wave %d", wave)
		// net/http puts a connection back among the idle ones from its
		// read loop, just after the run has read the end of its body.
		time.Sleep(100 * time.Millisecond)
	}
}
