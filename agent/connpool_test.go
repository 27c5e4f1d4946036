package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// poolServer is an HTTPS server speaking HTTP/2 (or only HTTP/1.1) whose
// handler holds every request until release is closed, and which counts
// the connections it accepts and the requests it holds.
type poolServer struct {
	*httptest.Server
	accepted, held atomic.Int64
	release        chan struct{}
}

func newPoolServer(t *testing.T, h2 bool, streams int, ln net.Listener) *poolServer {
	s := &poolServer{release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.held.Add(1)
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		io.WriteString(w, r.Proto)
	}))
	if ln != nil {
		s.Listener.Close()
		s.Listener = ln
	}
	s.EnableHTTP2 = h2
	s.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: streams}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// transport is a transport that trusts s, as the default client's copy of
// http.DefaultTransport would a provider.
func (s *poolServer) transport() *http.Transport {
	tr := s.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	return tr
}

// burst sends n requests at once through rt and returns, once every one
// is held by the server (or failed), a function that releases them and
// returns their bodies or errors.
func burst(t *testing.T, s *poolServer, rt http.RoundTripper, n int) (wait func() ([]string, []error)) {
	t.Helper()
	bodies, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Go(func() {
			var sent bool
			bodies[i], errs[i] = send(context.Background(), rt, s.URL+"/v1/chat/completions", &sent)
			if !sent {
				failed.Add(1)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.held.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return func() ([]string, []error) {
		close(s.release)
		wg.Wait()
		return bodies, errs
	}
}

// send sends one request through rt with ctx and reads its body; sent,
// when not nil, is set when a response came.
func send(ctx context.Context, rt http.RoundTripper, url string, sent *bool) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	if sent != nil {
		*sent = true
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// gatedPool starts an HTTP/2 server whose listener accepts no connection
// until gate.open is closed, and a pool to it, with the pool's record of
// the server's host.
func gatedPool(t *testing.T) (*poolServer, *gatedListener, *connPool, *poolHost) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gate := &gatedListener{Listener: ln, open: make(chan struct{})}
	s := newPoolServer(t, true, 100, gate)
	p := newConnPool(s.transport())
	t.Cleanup(p.CloseIdleConnections)
	return s, gate, p, p.host(mustURL(t, s.URL))
}

// eventually waits until cond, read under h.mu, holds.
func (h *poolHost) eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return cond()
	}, 5*time.Second, time.Millisecond, msg)
}

// noneReserved checks that no connection of h holds a stream.
func (h *poolHost) noneReserved(t *testing.T, msg string) {
	t.Helper()
	h.mu.Lock()
	conns := h.conns
	h.mu.Unlock()
	for _, cc := range conns {
		assert.Zero(t, cc.InFlight(), msg)
	}
}

// A burst of requests to an HTTP/2 host needs about one connection per
// MaxConcurrentStreams requests: the pool dials a few at a time and hands
// each new connection's streams to the waiting requests. (net/http alone
// starts a dial for every request that finds the connections full: 100
// to 200 connections for these 300 requests when this test was written.)
//
// The server allows 100 streams per connection, the least RFC 9113
// recommends and what net/http's client assumes until the server's
// settings come: a connection takes that many requests at once.
func TestConnPoolBurstSharesConnections(t *testing.T) {
	leaktest.Check(t)
	s := newPoolServer(t, true, 100, nil)
	p := newConnPool(s.transport())
	defer p.CloseIdleConnections()
	const n = 300
	wait := burst(t, s, p, n)
	require.EqualValues(t, n, s.held.Load(), "every request reached the server at once")
	bodies, errs := wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, "HTTP/2.0", bodies[i])
	}
	assert.LessOrEqual(t, s.accepted.Load(), int64(n/100+dialsPerHost), "connections for %d requests of 100 streams each", n)
	// The connections stay for the next requests.
	before := s.accepted.Load()
	s.release = make(chan struct{})
	s.held.Store(0)
	bodies, errs = burst(t, s, p, 40)()
	for i := range 40 {
		require.NoError(t, errs[i])
		require.Equal(t, "HTTP/2.0", bodies[i])
	}
	assert.Equal(t, before, s.accepted.Load(), "no new connection for requests the existing ones can carry")
}

// A host that does not speak HTTP/2 is left to the transport, which keeps
// a connection per request in flight, as without the pool.
func TestConnPoolHTTP1Host(t *testing.T) {
	leaktest.Check(t)
	s := newPoolServer(t, false, 0, nil)
	p := newConnPool(s.transport())
	defer p.CloseIdleConnections()
	const n = 10
	bodies, errs := burst(t, s, p, n)()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, "HTTP/1.1", bodies[i])
	}
	assert.LessOrEqual(t, s.accepted.Load(), int64(n+dialsPerHost), "the connections the pool tried, then one per request")
	h := p.host(mustURL(t, s.URL))
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.True(t, h.http1)
}

// A host that takes no connection fails every waiting request with an
// error that says the request was not sent; nothing waits on.
func TestConnPoolDialFails(t *testing.T) {
	leaktest.Check(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	p := newConnPool(http.DefaultTransport.(*http.Transport).Clone())
	defer p.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/v1/chat/completions", nil)
			_, err := p.RoundTrip(req)
			assert.ErrorIs(t, err, errDialFailed)
			var ne *notSentError
			assert.ErrorAs(t, err, &ne)
			assert.ErrorContains(t, err, "connection refused")
		})
	}
	wg.Wait()
}

// A request whose context ends while it waits for a connection leaves the
// queue at once; the connection, when it comes, serves the others.
func TestConnPoolWaiterLeaves(t *testing.T) {
	leaktest.Check(t)
	s, gate, p, h := gatedPool(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := send(ctx, p, s.URL, nil)
		done <- err
	}()
	h.eventually(t, func() bool { return len(h.waiters) == 1 && h.dialing == 1 }, "the request waits for the dial")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the request still waits after its context ended")
	}
	close(gate.open)
	bodies, errs := burst(t, s, p, 8)()
	for i := range 8 {
		require.NoError(t, errs[i])
		require.Equal(t, "HTTP/2.0", bodies[i])
	}
	h.mu.Lock()
	require.NotEmpty(t, h.conns)
	h.mu.Unlock()
	h.noneReserved(t, "no stream left reserved by the request that left")
}

// gatedListener accepts connections only once open is closed.
type gatedListener struct {
	net.Listener
	open chan struct{}
}

func (l *gatedListener) Accept() (net.Conn, error) {
	<-l.open
	return l.Listener.Accept()
}

func (l *gatedListener) Close() error {
	select {
	case <-l.open:
	default:
		close(l.open)
	}
	return l.Listener.Close()
}

// Plain http:// requests go through the transport untouched.
func TestConnPoolPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	p := newConnPool(tr)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := p.RoundTrip(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "HTTP/1.1", string(b))
	p.mu.Lock()
	assert.Empty(t, p.hosts, "no pool for plain HTTP")
	p.mu.Unlock()
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// A server that ends each connection after its request (HTTP/2 GOAWAY, as
// servers that limit requests per connection do): every request still
// gets through, and the pool lets go of the connections the server
// closed.
func TestConnPoolServerClosesConnections(t *testing.T) {
	leaktest.Check(t)
	s := newPoolServer(t, true, 100, nil)
	close(s.release)
	s.Config.SetKeepAlivesEnabled(false)
	p := newConnPool(s.transport())
	defer p.CloseIdleConnections()
	for i := range 20 {
		body, err := send(context.Background(), p, s.URL, nil)
		require.NoError(t, err, "request %d", i)
		require.Equal(t, "HTTP/2.0", body)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := send(context.Background(), p, s.URL, nil)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	h := p.host(mustURL(t, s.URL))
	h.eventually(t, func() bool { return len(h.conns) <= dialsPerHost }, "closed connections are let go")
}

// Many waiting requests, half of which leave before the connection comes:
// the others all get through, and no stream stays reserved.
func TestConnPoolManyWaitersLeave(t *testing.T) {
	leaktest.Check(t)
	s, gate, p, h := gatedPool(t)
	close(s.release)

	const n = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rctx := context.Background()
			if i%2 == 1 {
				rctx = ctx
			}
			_, errs[i] = send(rctx, p, s.URL, nil)
		})
	}
	h.eventually(t, func() bool { return len(h.waiters) == n }, "every request waits for a connection")
	cancel()
	close(gate.open)
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			assert.NoError(t, err, "request %d", i)
		} else if err != nil {
			assert.ErrorIs(t, err, context.Canceled, "request %d", i)
		}
	}
	h.noneReserved(t, "no stream left reserved")
}

// A dial that every request waiting for it has left is abandoned: it does
// not go on in the background until the server answers.
func TestConnPoolAbandonedDialEnds(t *testing.T) {
	leaktest.Check(t)
	s, gate, p, h := gatedPool(t)
	close(s.release)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := send(ctx, p, s.URL, nil)
		done <- err
	}()
	h.eventually(t, func() bool { return h.dialing == 1 }, "the request dials")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	h.eventually(t, func() bool { return h.dialing == 0 }, "the dial ends with the last request waiting for it, the server still silent")

	// The next request dials again and gets through once the server
	// answers.
	close(gate.open)
	body, err := send(context.Background(), p, s.URL, nil)
	require.NoError(t, err)
	require.Equal(t, "HTTP/2.0", body)
}
