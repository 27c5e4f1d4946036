package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// connPool is the RoundTripper of the SDK's default client. It sends HTTPS
// requests to a host that speaks HTTP/2 over connections it holds itself
// (made with http.Transport.NewClientConn), and everything else through
// the transport t as it is.
//
// It exists for bursts. When every HTTP/2 connection to a host carries as
// many streams as the server allows, http.Transport starts a new dial (a
// TCP connection and a TLS handshake) for every request that comes, and
// keeps one of them: 10,000 runs resuming within a second start thousands
// of handshakes on both sides, for the tens of connections they need.
// connPool starts at most dialsPerHost dials to a host at once; the other
// requests wait in order for a stream on a connection that exists or is
// being made. Each new connection takes as many waiting requests as the
// server lets it carry, so a burst needs about one dial per
// MaxConcurrentStreams requests.
//
// A host found to speak HTTP/1.1 (its first connection did not negotiate
// HTTP/2) is left to t for good: one handshake is spent finding out.
type connPool struct {
	t *http.Transport

	mu    sync.Mutex
	hosts map[string]*poolHost // by URL.Host
}

// dialsPerHost is how many connections connPool makes to one host at once.
const dialsPerHost = 4

// maxUnsent is how many times connPool takes another connection for a
// request that one connection did not send. A server that ends its
// connections after a few requests (GOAWAY) turns most of a burst away
// from each connection: every round through a new connection serves some
// of the requests, so the bound is high, and only stops a server that
// serves none.
const maxUnsent = 32

// NewPooledTransport returns the RoundTripper of the SDK's default client
// built over t: plain HTTP, and HTTPS to a host that does not speak HTTP/2,
// go through t as they are; HTTPS requests to an HTTP/2 host go over
// connections it makes itself with t.NewClientConn (so with t's dialer,
// proxy, TLS settings and timeouts), at most 4 to a host at once, each
// carrying as many requests as the server allows. Under a burst (many runs
// resuming at once) the requests that find every connection full wait in
// order for the next one instead of each starting a TLS handshake, as
// http.Transport alone does. A request for which no connection could be
// made fails with an error that the agent knows was not sent, so it is
// retried (see [Config.MaxRetries]).
//
// It is for a host that brings its own Transport (a proxy, client
// certificates, a wrapper that traces requests) and wants the default
// client's behaviour under bursts:
//
//	tr := http.DefaultTransport.(*http.Transport).Clone()
//	tr.TLSClientConfig = myTLS
//	cfg.HTTPClient = &http.Client{Transport: agent.NewPooledTransport(tr)}
//
// The connections it makes are not in t's pool: t.CloseIdleConnections
// does not close them, the returned RoundTripper's CloseIdleConnections
// (what http.Client.CloseIdleConnections calls) closes both. Known
// limit, shared with net/http: until a new connection has the server's
// settings it is taken to allow 100 streams, so a server allowing fewer
// holds the surplus requests until its streams free up. The requests it
// sends over its own connections report no GetConn or GotConn to
// net/http/httptrace, and t.MaxConnsPerHost does not count its
// connections.
func NewPooledTransport(t *http.Transport) http.RoundTripper { return newConnPool(t) }

func newConnPool(t *http.Transport) *connPool {
	return &connPool{t: t, hosts: make(map[string]*poolHost)}
}

// poolHost is what connPool holds for one host.
type poolHost struct {
	p    *connPool
	addr string // host:port

	mu      sync.Mutex
	conns   []*http.ClientConn // replaced, never changed in place: read outside mu
	http1   bool               // the host does not speak HTTP/2: t serves it
	dialing int                // dials in flight
	// dialCtx is the context of the dials in flight, cancelled when the
	// last request waiting for them leaves: a dial outlives no request.
	dialCtx    context.Context
	dialCancel context.CancelFunc
	failed     int           // dials failed in a row
	waiters    []*poolWaiter // in arrival order; gone ones are skipped
	// freed counts the times a stream became free or a connection was
	// added or lost: a request that found no stream looks again instead
	// of waiting when it changed meanwhile.
	freed uint64
}

// poolWaiter is a request waiting for a stream.
type poolWaiter struct {
	ready chan struct{} // closed to say: look again
	woken bool          // ready is closed
	gone  bool          // the request left (its context ended)
	err   error         // set with ready: every dial failed
}

// errDialFailed is wrapped by the error of a request whose connection
// could not be made: the request was not sent.
var errDialFailed = errors.New("no connection could be made")

// notSentError is a request's error that proves it never left: no
// connection could be made for it.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return errDialFailed.Error() + ": " + e.err.Error() }
func (e *notSentError) Unwrap() []error {
	return []error{errDialFailed, e.err}
}

func (p *connPool) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" || req.Close {
		return p.t.RoundTrip(req)
	}
	h := p.host(req.URL)
	for range maxUnsent {
		cc, err := h.get(req.Context())
		if err != nil {
			if req.Body != nil {
				req.Body.Close() // as a RoundTripper must, even on error
			}
			return nil, err
		}
		if cc == nil {
			return p.t.RoundTrip(req)
		}
		resp, err := cc.RoundTrip(req)
		if err == nil || !unusedConn(err) {
			return resp, err
		}
		// The connection closed between the reservation and the
		// request, which it did not send: take another one.
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, &notSentError{err}
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, &notSentError{err}
			}
			r := *req
			r.Body = body
			req = &r
		}
	}
	return nil, &notSentError{errors.New("the connections kept closing before the request could be sent")}
}

// unusedConn reports whether err is net/http's HTTP/2 error for a request
// that the server cannot have processed: its connection closed or was
// unusable before the request's stream began, the server's GOAWAY came before
// the request's stream, or the server refused the stream (REFUSED_STREAM,
// which RFC 9113 says means "not processed"). net/http's own pool sends
// such requests again too.
func unusedConn(err error) bool {
	switch msg := err.Error(); msg {
	case errH2NotEstablished, "http2: client conn not usable",
		"http2: Transport received Server's graceful shutdown GOAWAY":
		return true
	default:
		return strings.HasPrefix(msg, "stream error: ") && strings.Contains(msg, "; REFUSED_STREAM")
	}
}

// CloseIdleConnections closes the connections that carry no request, and
// t's idle ones.
func (p *connPool) CloseIdleConnections() {
	p.mu.Lock()
	hosts := make([]*poolHost, 0, len(p.hosts))
	for _, h := range p.hosts {
		hosts = append(hosts, h)
	}
	p.mu.Unlock()
	for _, h := range hosts {
		h.mu.Lock()
		conns := h.conns
		h.mu.Unlock()
		for _, cc := range conns {
			if cc.InFlight() == 0 {
				cc.Close() // its state hook drops it
			}
		}
	}
	p.t.CloseIdleConnections()
}

// host returns the poolHost of u's host, made on first use. It is found
// by u.Host as written (an Agent's requests all name their host the same
// way), and dials host:port.
func (p *connPool) host(u *url.URL) *poolHost {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[u.Host]
	if h == nil {
		port := u.Port()
		if port == "" {
			port = "443"
		}
		h = &poolHost{p: p, addr: net.JoinHostPort(u.Hostname(), port)}
		p.hosts[u.Host] = h
	}
	return h
}

// get returns a connection with a stream reserved for the request, or nil
// when the host is left to the transport (HTTP/1.1).
func (h *poolHost) get(ctx context.Context) (*http.ClientConn, error) {
	for {
		h.mu.Lock()
		if h.http1 {
			h.mu.Unlock()
			return nil, nil
		}
		conns, freed := h.conns, h.freed
		h.mu.Unlock()
		for _, cc := range conns {
			if cc.Reserve() == nil {
				return cc, nil
			}
		}
		h.mu.Lock()
		if h.freed != freed || h.http1 {
			h.mu.Unlock()
			continue
		}
		w := &poolWaiter{ready: make(chan struct{})}
		h.waiters = append(h.waiters, w)
		h.dialLocked()
		h.mu.Unlock()
		select {
		case <-w.ready:
			if w.err != nil {
				return nil, w.err
			}
		case <-ctx.Done():
			h.mu.Lock()
			w.gone = true
			if w.woken {
				h.wakeLocked(1) // pass the turn on
			}
			if h.dialCtx != nil && !h.hasWaitersLocked() {
				h.dialCancel() // nobody waits for them any more
				h.dialCtx, h.dialCancel = nil, nil
			}
			h.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// dialLocked starts a dial when fewer than dialsPerHost are in flight.
// h.mu is held.
func (h *poolHost) dialLocked() {
	if h.dialing >= dialsPerHost || h.http1 {
		return
	}
	if h.dialCtx == nil {
		h.dialCtx, h.dialCancel = context.WithCancel(context.Background())
	}
	h.dialing++
	go h.dial(h.dialCtx)
}

// doneDialingLocked counts a dial of ctx as ended. h.mu is held.
func (h *poolHost) doneDialingLocked() {
	h.dialing--
	if h.dialing == 0 && h.dialCtx != nil {
		h.dialCancel() // a made connection does not depend on it
		h.dialCtx, h.dialCancel = nil, nil
	}
}

// dial makes one connection and hands its streams to the waiters. ctx ends
// when no request waits for it any more.
func (h *poolHost) dial(ctx context.Context) {
	cc, err := h.p.t.NewClientConn(ctx, "https", h.addr)
	if err == nil && cc.Available() <= 1 {
		// HTTP/1.1 (or a server allowing one stream at a time): the
		// transport's own pool serves such a host better.
		cc.Close()
		h.mu.Lock()
		h.doneDialingLocked()
		h.http1 = true
		h.freed++
		h.wakeLocked(len(h.waiters))
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	// Read before this dial is counted as ended, which cancels ctx when
	// it was the last one in flight.
	abandoned := err != nil && ctx.Err() != nil
	h.doneDialingLocked()
	if abandoned {
		// Abandoned: the requests it was for left. One that came since
		// gets a dial of its own.
		if h.hasWaitersLocked() {
			h.dialLocked()
		}
		h.mu.Unlock()
		return
	}
	if err != nil {
		h.failed++
		if len(h.conns) == 0 && h.dialing == 0 || h.failed >= dialsPerHost {
			// Nothing else will come, or the host keeps refusing: every
			// waiter fails, unsent (the agent retries such a request
			// after a backoff).
			ne := &notSentError{err}
			for _, w := range h.waiters {
				if !w.gone && !w.woken {
					w.err = ne
					w.woken = true
					close(w.ready)
				}
			}
			h.waiters = nil
		} else if h.hasWaitersLocked() {
			h.dialLocked()
		}
		h.mu.Unlock()
		return
	}
	h.failed = 0
	h.conns = append(h.conns[:len(h.conns):len(h.conns)], cc)
	h.mu.Unlock()
	cc.SetStateHook(h.changed)
	h.changed(cc) // its streams go to the waiters
}

// changed is the state hook of every connection: a stream freed, the
// connection added (SetStateHook calls it once) or closed.
func (h *poolHost) changed(cc *http.ClientConn) {
	closed := cc.Err() != nil
	n := cc.Available()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.freed++
	if closed {
		conns := make([]*http.ClientConn, 0, len(h.conns))
		for _, c := range h.conns {
			if c != cc {
				conns = append(conns, c)
			}
		}
		h.conns = conns
		if h.hasWaitersLocked() {
			h.dialLocked()
		}
		return
	}
	h.wakeLocked(n)
	if h.hasWaitersLocked() {
		h.dialLocked()
	}
}

// wakeLocked tells the first n waiters to look again. h.mu is held.
func (h *poolHost) wakeLocked(n int) {
	i := 0
	for ; i < len(h.waiters) && n > 0; i++ {
		w := h.waiters[i]
		if w.gone || w.woken {
			continue
		}
		w.woken = true
		close(w.ready)
		n--
	}
	h.waiters = h.waiters[i:]
	if len(h.waiters) == 0 {
		h.waiters = nil
	}
}

// hasWaitersLocked reports whether a request waits, first dropping the
// waiters at the front that left or were woken, so that requests leaving
// one by one do not each walk past all those that left before. h.mu is
// held.
func (h *poolHost) hasWaitersLocked() bool {
	for len(h.waiters) > 0 && (h.waiters[0].gone || h.waiters[0].woken) {
		h.waiters[0] = nil
		h.waiters = h.waiters[1:]
	}
	return len(h.waiters) > 0
}
