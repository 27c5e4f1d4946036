package agenttest

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Path is the URL path where the server answers chat completions; it
// answers the Responses API at [ResponsesPath].
const Path = "/v1/chat/completions"

// maxBody bounds a request body.
const maxBody = 32 << 20

// Server is an OpenAI-compatible server of chat completions and of the
// Responses API, listening on 127.0.0.1. Its methods are safe for concurrent use.
type Server struct {
	ts        *httptest.Server
	closing   chan struct{} // closed by Close: ends delays and holds
	closeOnce sync.Once
	conns     atomic.Int64 // TCP connections accepted
	t         testing.TB   // reports what is wrong with the script; nil for none

	mu       sync.Mutex // guards queue, served, respond, requests, seq, keep, apiKey, checks
	queue    []Response
	served   int // responses taken from the queue so far
	respond  func(*Request) Response
	requests []*Request
	seq      int    // requests decoded so far
	keep     int    // how many requests to keep; negative: all
	apiKey   string // the bearer token requests must carry; "" for none
	checks   Check
}

// NewServer starts a Server with an empty script. Call [Server.Close]
// when done. In a test, [Start] does that and reports what is wrong with
// the script through the test.
func NewServer() *Server { return newServer(nil) }

// Start starts a Server for the test t, as [NewServer] does, and closes it
// when the test and its subtests have ended. What is wrong with the script
// fails t, with a message saying what happened: a request that finds the
// script exhausted, a response with tool calls that its request does not
// offer (see [Response.Unsolicited]) and, when the test ends, each
// response never served. The requests are answered as a Server started
// with NewServer answers them.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t)
	t.Cleanup(func() {
		s.Close() // no handler runs after this: the queue is final
		s.mu.Lock()
		left, requests := s.queue, s.seq
		s.mu.Unlock()
		if len(left) > 0 {
			t.Error(leftoverMessage(left, requests))
		}
	})
	return s
}

func newServer(t testing.TB) *Server {
	s := &Server{closing: make(chan struct{}), keep: -1, t: t}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.ts.Start()
	return s
}

// Conns returns the number of TCP connections the server has accepted so
// far. A client that reuses its connections opens one for many requests.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// URL returns the base URL for an OpenAI client, ending in "/v1".
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Client returns an HTTP client configured for the server.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close ends held and delayed streams, then shuts the server down and
// waits for its handlers to return. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.ts.Close()
}

// Enqueue appends responses to the script. Each request takes the first
// one left.
//
// An agent's run starts with a planning round whose request offers no
// tools (unless its Config sets DisablePlanning), so the script of a run
// that calls a tool starts with a planning reply, as in the package
// example: a response with tool calls that its request does not offer is
// not served (see [Response.Unsolicited]).
func (s *Server) Enqueue(r ...Response) {
	s.mu.Lock()
	s.queue = append(s.queue, r...)
	s.mu.Unlock()
}

// Respond sets the function that answers requests while the script's queue
// is empty; nil removes it. fn may be called concurrently. [RespondFunc]
// says which requests an agent's run sends, and how fn tells them apart.
func (s *Server) Respond(fn func(req *Request) Response) {
	s.mu.Lock()
	s.respond = fn
	s.mu.Unlock()
}

// Pending returns the number of enqueued responses not yet served.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// KeepRequests makes the server keep only the n latest requests for
// [Server.Requests]: none when n is 0, all when n is negative (the
// default). A long-running server keeps none, so that its memory does not
// grow with every request it answers.
func (s *Server) KeepRequests(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = n
	s.trimLocked()
}

// trimLocked drops the requests beyond s.keep, oldest first. s.mu must be
// held.
func (s *Server) trimLocked() {
	if s.keep >= 0 && len(s.requests) > s.keep {
		s.requests = slices.Delete(s.requests, 0, len(s.requests)-s.keep)
	}
}

// RequireAPIKey makes the server refuse, with 401 and before reading the
// body, every request whose Authorization header is not "Bearer " + key.
// An empty key accepts every request (the default).
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	s.apiKey = key
	s.mu.Unlock()
}

// authorized reports whether r carries the API key, if one is required.
func (s *Server) authorized(r *http.Request) bool {
	s.mu.Lock()
	key := s.apiKey
	s.mu.Unlock()
	if key == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+key)) == 1
}

// Requests returns the requests received so far, in order (the latest
// ones only, after [Server.KeepRequests]). The Requests are shared with the
// server and must not be modified.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// source is where a request's response came from.
type source uint8

const (
	fromNone    source = iota // the script is exhausted
	fromQueue                 // the queue filled by Enqueue
	fromRespond               // the Respond func
)

// pick is the response chosen for a request.
type pick struct {
	resp   Response
	from   source
	served int   // responses taken from the queue, this one included
	err    error // the enforced check the request breaks; no response then
}

// next records req and picks its response.
func (s *Server) next(req *Request) pick {
	s.mu.Lock()
	s.seq++
	req.Seq = s.seq
	if s.keep != 0 {
		s.requests = append(s.requests, req)
		s.trimLocked()
	}
	if !req.Responses { // the checks are chat-completions rules
		if err := check(s.checks, req); err != nil {
			s.mu.Unlock()
			return pick{err: err}
		}
	}
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue[0] = Response{}
		s.queue = s.queue[1:]
		s.served++
		served := s.served
		s.mu.Unlock()
		return pick{resp: r, from: fromQueue, served: served}
	}
	fn, served := s.respond, s.served
	s.mu.Unlock()
	if fn == nil {
		return pick{from: fromNone, served: served}
	}
	return pick{resp: fn(req), from: fromRespond, served: served}
}

// scriptError answers a request the script cannot answer with HTTP 500
// and message, which also fails the test of a Server made by Start.
func (s *Server) scriptError(w http.ResponseWriter, message string) {
	if s.t != nil {
		s.t.Error(message)
	}
	writeScriptError(w, message)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var responses bool
	switch r.URL.Path {
	case Path, Path + "/":
	case ResponsesPath, ResponsesPath + "/":
		responses = true
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("agenttest: no route for %s %s; the server answers POST %s and POST %s", r.Method, r.URL.Path, Path, ResponsesPath))
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "agenttest: method "+r.Method+" not allowed; use POST")
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "agenttest: missing or wrong API key")
		return
	}
	req, ok := readRequest(w, r, responses)
	if !ok {
		return
	}
	p := s.next(req)
	switch {
	case p.err != nil:
		writeError(w, http.StatusBadRequest, p.err.Error())
		return
	case p.from == fromNone:
		s.scriptError(w, exhaustedMessage(req, p.served))
		return
	}
	if name := unoffered(req, p.resp); name != "" {
		s.scriptError(w, unofferedMessage(req, p.resp, name, p.from == fromRespond))
		return
	}
	writeResponse(w, r, req, p.resp, s.closing)
}

// readRequest reads and decodes r's body. On failure it writes the error
// answer and returns false.
// responses says that it is a Responses API request.
func readRequest(w http.ResponseWriter, r *http.Request, responses bool) (*Request, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "agenttest: reading request body: "+err.Error())
		return nil, false
	}
	if len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "agenttest: request body too large")
		return nil, false
	}
	decode := decodeRequest
	if responses {
		decode = decodeResponsesRequest
	}
	req, err := decode(body, r.Header.Clone())
	if err != nil {
		writeError(w, http.StatusBadRequest, "agenttest: "+err.Error())
		return nil, false
	}
	return req, true
}

// writeResponse answers req with resp. Delays and holds end early when
// closing is closed.
func writeResponse(w http.ResponseWriter, r *http.Request, req *Request, resp Response, closing <-chan struct{}) {
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	switch {
	case resp.status != 0:
		setContentType(w.Header(), resp.contentType)
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body)
	case req.Responses:
		writeResponsesAPI(w, r, req, resp, closing)
	case !req.Stream || resp.ignoreStream:
		if resp.completion == nil {
			writeError(w, http.StatusInternalServerError, "agenttest: the request asked for no stream, but this response has only a streaming form (use Reply)")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp.completion)
	default:
		stream(r.Context(), w, resp, closing)
	}
}

// setContentType sets the Content-Type header to ct; an empty ct sends
// none (and stops net/http from guessing one).
func setContentType(h http.Header, ct string) {
	if ct == "" {
		h["Content-Type"] = nil
		return
	}
	h.Set("Content-Type", ct)
}

// stream writes resp's frames one by one, flushing each.
func stream(ctx context.Context, w http.ResponseWriter, resp Response, closing <-chan struct{}) {
	h := w.Header()
	if _, ok := resp.header["Content-Type"]; ok {
		setContentType(h, resp.header.Get("Content-Type"))
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	flush := func() bool { return rc.Flush() == nil }
	if !flush() {
		return
	}
	var timer *time.Timer
	if resp.delay > 0 {
		timer = time.NewTimer(resp.delay)
		timer.Stop()
		defer timer.Stop()
	}
	// wait sleeps the response's delay; false means stop streaming.
	wait := func() bool {
		if timer == nil {
			return true
		}
		timer.Reset(resp.delay)
		select {
		case <-timer.C:
			return true
		case <-ctx.Done():
			return false
		case <-closing:
			return false
		}
	}
	for i, f := range resp.frames {
		if resp.fault != faultNone && i == resp.faultAt {
			fault(ctx, w, rc, resp, closing)
			return
		}
		if i > 0 {
			if resp.keepAlive {
				if _, err := w.Write(keepAliveFrame); err != nil {
					return
				}
			}
			if !wait() {
				return
			}
		}
		if _, err := w.Write(f); err != nil || !flush() {
			return
		}
		if resp.onFlush != nil {
			resp.onFlush(i + 1)
		}
	}
	if resp.fault != faultNone {
		fault(ctx, w, rc, resp, closing)
		return
	}
	if resp.done {
		if len(resp.frames) > 0 && !wait() {
			return
		}
		if _, err := w.Write(doneFrame); err == nil {
			flush()
		}
	}
}

// fault performs resp's fault after its frames so far were written.
func fault(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, resp Response, closing <-chan struct{}) {
	switch resp.fault {
	case faultErrorFrame:
		frame := append(append([]byte("data: "), errorBody(resp.errMsg, "server_error", "")...), "\n\n"...)
		if resp.responses {
			frame = responsesErrorFrame(resp.errMsg, min(resp.faultAt, len(resp.frames)))
		}
		if _, err := w.Write(frame); err == nil {
			_ = rc.Flush()
		}
	case faultHold:
		select {
		case <-ctx.Done():
		case <-closing:
		}
	case faultCut, faultReset:
		if pw, ok := w.(*pipeWriter); ok { // in process: no connection
			pw.abort(resp.fault == faultReset)
			return
		}
		conn, _, err := rc.Hijack()
		if err != nil {
			// Without a connection to close, abort the handler: the
			// server then drops the connection without ending the body.
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok && resp.fault == faultReset {
			// Linger 0: Close sends a TCP RST instead of a FIN.
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// writeScriptError answers a request the script cannot answer: HTTP 500
// that asks the client not to send the request again (x-should-retry:
// false, which openai-go and package agent follow), since it would find
// the same script.
func writeScriptError(w http.ResponseWriter, message string) {
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, http.StatusInternalServerError, message)
}

// writeError answers with an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, message string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(message, typ, ""))
}

// writeResponsesAPI answers a Responses API request with resp's
// Responses form: the event stream, or the response object for a request
// that asked for no stream (or a Response that ignores "stream").
func writeResponsesAPI(w http.ResponseWriter, r *http.Request, req *Request, resp Response, closing <-chan struct{}) {
	if resp.respObject == nil {
		writeError(w, http.StatusInternalServerError, "agenttest: the request is a Responses API request ("+ResponsesPath+"), but this response has only a chat-completions form (use Reply, HTTPError or Body)")
		return
	}
	if !req.Stream || resp.ignoreStream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp.respObject)
		return
	}
	resp.frames, resp.done, resp.responses = resp.respFrames, false, true
	stream(r.Context(), w, resp, closing)
}
