package agent

import (
	"net/http"
	"sync"
)

// The SDK's default client: the transport of every Agent whose Config has
// no HTTPClient, shared by all of them so that their runs share
// connections.
//
// It is a copy of http.DefaultTransport (its proxy from the environment,
// its dial and TLS handshake timeouts, HTTP/2 when the server offers it)
// with what holding many conversations at once calls for:
//
//   - more idle connections kept per host (defaultIdlePerHost instead of
//     2), so that the next round of a run, or another run, takes a
//     connection instead of dialing one (over TLS: a handshake) and
//     leaving the last one's buffers to the garbage collector;
//   - 1 KiB read and write buffers per HTTP/1.1 connection instead of
//     4 KiB each: a request is written once, and a stream's events are a
//     few hundred bytes, so the larger buffers only hold memory for as
//     long as a run streams (docs/BENCHMARKS.md, issue 24: 6 KB less
//     heap per conversation mid-stream). A body that arrives faster than
//     it is decoded does not pay a read(2) per KiB for it: the stream's
//     reader then reads 16 KiB at a time into a buffer it borrows only
//     while it is behind, which the connection's buffer hands straight to
//     the socket (docs/BENCHMARKS.md, issue 36);
//   - over HTTPS to a host that speaks HTTP/2, connections that are
//     made a few at a time however many requests come at once (see
//     connPool): a burst of runs shares the connections it needs instead
//     of starting a handshake each.
//
// A host that replaced http.DefaultTransport with a transport of its own
// (a tracing wrapper, say) has it used as it is.
var defaultClient = sync.OnceValue(func() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: http.DefaultTransport}
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = defaultIdlePerHost
	if t.MaxIdleConns != 0 && t.MaxIdleConns < defaultIdlePerHost {
		t.MaxIdleConns = defaultIdlePerHost
	}
	t.ReadBufferSize, t.WriteBufferSize = defaultConnBuffer, defaultConnBuffer
	return &http.Client{Transport: newConnPool(t)}
})

const (
	// defaultIdlePerHost is how many idle connections the default client
	// keeps per host.
	defaultIdlePerHost = 64
	// defaultConnBuffer is the size of each of an HTTP/1.1 connection's
	// read and write buffers in the default client.
	defaultConnBuffer = 1024
)
