package agent_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// closedAddr returns the address of a port on 127.0.0.1 that nothing
// listens on: a connection to it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// refusedAgent returns an agent whose model is at a closed port, with its
// own transport, and that transport's dial count.
func refusedAgent(t *testing.T, maxRetries int, mut func(*agent.Config)) (*agent.Agent, *atomic.Int64) {
	t.Helper()
	addr := closedAddr(t)
	dials := new(atomic.Int64)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := agent.Config{
		BaseURL: "http://" + addr + "/v1", HTTPClient: &http.Client{Transport: tr},
		MaxRetries: maxRetries, Model: "test-model",
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)
	return a, dials
}

// A request whose connection is refused never reached the provider: it is
// sent again after a backoff, and the run's error says so.
func TestRetryRefusedConnection(t *testing.T) {
	agent.SetRetryBase(t, time.Millisecond)
	for _, tt := range []struct{ maxRetries, attempts int }{{2, 3}, {0, 3}, {1, 2}, {-1, 1}} {
		t.Run(fmt.Sprint(tt.maxRetries), func(t *testing.T) {
			leaktest.Check(t)
			a, dials := refusedAgent(t, tt.maxRetries, nil)
			_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
			var ce *agent.ConnectionError
			require.ErrorAs(t, err, &ce)
			assert.False(t, ce.Sent, "Sent")
			assert.Equal(t, tt.attempts, ce.Attempts, "Attempts")
			assert.EqualValues(t, tt.attempts, dials.Load(), "dials")
			var op *net.OpError
			assert.ErrorAs(t, err, &op, "the dial's error is wrapped")
			assert.Contains(t, err.Error(), "never reached the provider")
			assert.Contains(t, err.Error(), "connection refused")
		})
	}
}

// The default client's pool proves a request unsent the same way: an
// HTTPS request to a port that refuses connections is retried, and the
// run's error says it never reached the provider.
func TestRetryRefusedThroughTheDefaultClient(t *testing.T) {
	agent.SetRetryBase(t, time.Millisecond)
	a, err := agent.New(agent.Config{BaseURL: "https://" + closedAddr(t) + "/v1", MaxRetries: 1, Model: "test-model"})
	require.NoError(t, err)
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	var ce *agent.ConnectionError
	require.ErrorAs(t, err, &ce)
	assert.False(t, ce.Sent, "Sent")
	assert.Equal(t, 2, ce.Attempts, "Attempts")
	assert.Contains(t, err.Error(), "connection refused")
}

// dropFirst is a listener that closes the first n connections it accepts
// at once.
type dropFirst struct {
	net.Listener
	n       int
	dropped atomic.Int64
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.dropped.Load() >= int64(l.n) {
			return c, err
		}
		l.dropped.Add(1)
		c.Close()
	}
}

// sseReply writes a streamed chat completion of text.
func sseReply(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, delta := range []string{`{"role":"assistant","content":` + fmt.Sprintf("%q", text) + `}`, `{}`} {
		finish := "null"
		if delta == `{}` {
			finish = `"stop"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"test-model\","+
			"\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// A TLS server that drops the first connections before the handshake ends:
// the request never reached it, so it is sent again and the run succeeds,
// each model request arriving once.
func TestRetryDroppedTLSConnection(t *testing.T) {
	leaktest.Check(t)
	agent.SetRetryBase(t, time.Millisecond)
	var (
		mu      sync.Mutex
		retries []string // the X-Stainless-Retry-Count of each request that arrived
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		retries = append(retries, r.Header.Get("X-Stainless-Retry-Count"))
		n := len(retries)
		mu.Unlock()
		if n == 1 {
			sseReply(w, "Hello!<no_tool>")
		} else {
			sseReply(w, "ok")
		}
	}))
	ln := &dropFirst{Listener: srv.Listener, n: 2}
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	a, err := agent.New(agent.Config{BaseURL: srv.URL + "/v1", HTTPClient: client, MaxRetries: 2, Model: "test-model"})
	require.NoError(t, err)
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.EqualValues(t, 2, ln.dropped.Load(), "connections dropped")
	mu.Lock()
	defer mu.Unlock()
	// The plan and the answer, each once; the plan on its third attempt.
	assert.Equal(t, []string{"2", "0"}, retries, "X-Stainless-Retry-Count of the requests that arrived")
}

// A server that reads the whole request and closes the connection without
// an answer may have processed it: it is not sent again, and the run's
// error says so. openai-go alone sent it three times.
func TestNoRetryAfterTheRequestWasSent(t *testing.T) {
	leaktest.Check(t)
	agent.SetRetryBase(t, time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		requests atomic.Int64
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				if _, err := io.Copy(io.Discard, req.Body); err == nil {
					requests.Add(1)
				}
			}
			c.Close()
		}
	}()
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	a, err := agent.New(agent.Config{
		BaseURL: "http://" + ln.Addr().String() + "/v1", HTTPClient: &http.Client{Transport: tr},
		MaxRetries: 2, Model: "test-model",
	})
	require.NoError(t, err)
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	assert.EqualValues(t, 1, requests.Load(), "requests the server read")
	var ce *agent.ConnectionError
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.Sent, "Sent")
	assert.Equal(t, 1, ce.Attempts, "Attempts")
	assert.ErrorIs(t, err, io.EOF)
	assert.Contains(t, err.Error(), "may have reached the provider")
}

// A run interrupted while it waits to send a request again ends at once,
// with no further attempt.
func TestInterruptDuringRetryBackoff(t *testing.T) {
	leaktest.Check(t)
	agent.SetRetryBase(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := make(chan struct{}, 1)
	a, dials := refusedAgent(t, 2, func(c *agent.Config) {
		// A host middleware runs once per attempt, inside the retries:
		// it says when the first attempt has failed.
		c.RequestOptions = append(c.RequestOptions, option.WithMiddleware(
			func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				resp, err := next(req)
				if err != nil {
					select {
					case failed <- struct{}{}:
					default:
					}
				}
				return resp, err
			}))
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-failed:
			cancel()
		case <-time.After(10 * time.Second):
			t.Error("the first attempt did not fail")
			cancel()
		}
	}()
	start := time.Now()
	chunks, err := collect(a.Run(ctx, agent.Input{Message: "hi"}))
	elapsed := time.Since(start)
	<-done
	require.NoError(t, err)
	require.NotEmpty(t, chunks)
	assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
	assert.EqualValues(t, 1, dials.Load(), "dials")
	assert.Less(t, elapsed, 10*time.Second, "the run waited for its backoff")
}

// A certificate the client does not trust is not retried: it would be
// refused again.
func TestNoRetryUntrustedCertificate(t *testing.T) {
	leaktest.Check(t)
	agent.SetRetryBase(t, time.Millisecond)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request arrived")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	tr := &http.Transport{} // the system's roots: not the test server's
	defer tr.CloseIdleConnections()
	a, err := agent.New(agent.Config{
		BaseURL: srv.URL + "/v1", HTTPClient: &http.Client{Transport: tr},
		MaxRetries: 2, Model: "test-model",
	})
	require.NoError(t, err)
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	var ce *agent.ConnectionError
	require.ErrorAs(t, err, &ce)
	assert.False(t, ce.Sent, "Sent")
	assert.Equal(t, 1, ce.Attempts, "Attempts")
	assert.EqualValues(t, 1, conns.Load(), "connections")
	var verr *tls.CertificateVerificationError
	assert.ErrorAs(t, err, &verr, "the certificate's error is wrapped")
}

// A response is sent again as openai-go would: by its status, unless its
// x-should-retry header says otherwise, and not when it asks for a wait
// longer than a minute.
func TestRetryResponses(t *testing.T) {
	agent.SetRetryBase(t, time.Millisecond)
	tests := []struct {
		name     string
		first    agenttest.Response
		requests int // the first response's request and its retries, the plan, the answer
		status   int // the run's error's status; 0: the run succeeds
	}{
		{"500", agenttest.HTTPError(500, "down"), 3, 0},
		{"408", agenttest.HTTPError(408, "timeout"), 3, 0},
		{"409", agenttest.HTTPError(409, "conflict"), 3, 0},
		{"429 retry-after-ms", agenttest.HTTPError(429, "slow down").WithHeader("Retry-After-Ms", "1"), 3, 0},
		{"429 Retry-After 0", agenttest.HTTPError(429, "slow down").WithHeader("Retry-After", "0"), 3, 0},
		{"429 Retry-After past date", agenttest.HTTPError(429, "slow down").WithHeader("Retry-After", "Mon, 02 Jan 2006 15:04:05 GMT"), 3, 0},
		{"429 Retry-After 120", agenttest.HTTPError(429, "slow down").WithHeader("Retry-After", "120"), 1, 429},
		{"429 retry-after-ms 61000", agenttest.HTTPError(429, "slow down").WithHeader("Retry-After-Ms", "61000"), 1, 429},
		{"500 x-should-retry false", agenttest.HTTPError(500, "down").WithHeader("X-Should-Retry", "false"), 1, 500},
		{"400", agenttest.HTTPError(400, "bad"), 1, 400},
		{"400 x-should-retry true", agenttest.HTTPError(400, "bad").WithHeader("X-Should-Retry", "true"), 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.first, planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
			a := newAgent(t, srv, func(c *agent.Config) { c.MaxRetries = 2 })
			_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
			if tt.status == 0 {
				require.NoError(t, err)
			} else {
				var pe *agent.ProviderError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.status, pe.StatusCode)
			}
			assert.Len(t, srv.Requests(), tt.requests, "requests")
		})
	}
}
