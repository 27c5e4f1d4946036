package agenttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
)

// RespondFunc answers chat-completions requests in process. Its RoundTrip
// method makes it an [http.RoundTripper]: as the Transport of the HTTP
// client an agent is configured with ([RespondFunc.Client]), it serves the
// agent's requests without a listening port, so no other process can reach
// it. Any base URL will do; [RespondFunc.URL] is one under .invalid, a
// host name that cannot resolve, so that a request that misses the
// RoundTripper fails instead of reaching a real provider.
//
// A RespondFunc has no script, records no requests and enforces no
// [Check]: it is the function itself that decides, from the request, which
// round of a run it answers. An agent's run sends, by default:
//
//   - the planning round: no tools ([Request.HasTools] is false), and a
//     temporary planning prompt (a system message) after the user's
//     message. Its reply ends with <need_tool> ([Plan]) to go on to the
//     tool rounds, or with <no_tool>. A reply with tool calls is not
//     served to it (see [Response.Unsolicited]): the function's Response
//     is refused with HTTP 500 and a message saying so.
//   - the tool rounds: the tools offered. After a planning reply with
//     text, the request holds that reply and a user message "[continue]",
//     so the last user message is not the user's own
//     ([Request.UserMessage] is); after a tool ran, the last message is
//     its result (role "tool").
//   - or, after <no_tool>, one continuation round: no tools again, and a
//     temporary continuation prompt last.
//
// With agent.Config.DisablePlanning the run starts with the tool rounds.
// A RespondFunc may be called concurrently. [Server.Respond] takes the
// same kind of function.
type RespondFunc func(req *Request) Response

// Client returns an HTTP client whose Transport is f, for the HTTPClient
// of an agent's configuration.
func (f RespondFunc) Client() *http.Client { return &http.Client{Transport: f} }

// URL returns a base URL for an OpenAI client of f's [RespondFunc.Client],
// ending in "/v1". Its host is under .invalid, so the same URL with
// another client fails to resolve instead of reaching a provider.
func (f RespondFunc) URL() string { return "http://agenttest.invalid/v1" }

// RoundTrip answers a POST to a URL whose path ends in /chat/completions
// (or /responses, in the Responses API's form: see [ResponsesPath]) with
// f's Response, as a [Server] would over a connection: delays, holds,
// keep-alive comments and in-stream errors are the same. A fault that cuts
// the connection ([Response.CutAfter]) ends the body with
// [io.ErrUnexpectedEOF], one that resets it ([Response.ResetAfter]) with an
// error that wraps [syscall.ECONNRESET]. Other paths are answered 404 and
// other methods 405, with an OpenAI-style error body; f is not called for
// them, nor for a body that is not a chat-completions request (400). A
// Response with a tool call that the request does not offer is not served
// (see [Response.Unsolicited]): RoundTrip answers HTTP 500 instead, with a
// message saying why.
//
// The response's body streams while f's Response is served; closing it, or
// ending the request's context, stops the serving. The caller must close
// the body, as with any RoundTripper.
func (f RespondFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	return serveInProcess(r, func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		responses := strings.HasSuffix(path, "/responses")
		if !responses && !strings.HasSuffix(path, "/chat/completions") {
			writeError(w, http.StatusNotFound, fmt.Sprintf("agenttest: no route for %s %s; a RespondFunc answers POST .../chat/completions and POST .../responses", r.Method, r.URL.Path))
			return
		}
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "agenttest: method "+r.Method+" not allowed; use POST")
			return
		}
		req, ok := readRequest(w, r, responses)
		if !ok {
			return
		}
		resp := f(req)
		if name := unoffered(req, resp); name != "" {
			writeScriptError(w, unofferedMessage(req, resp, name, true))
			return
		}
		writeResponse(w, r, req, resp, nil)
	})
}

// errBodyClosed is the cause of a handler's context when the client closed
// the response body.
var errBodyClosed = errors.New("agenttest: response body closed")

// serveInProcess runs handler for r in a new goroutine and returns its
// response as soon as the handler has written the header. The body is a
// pipe the handler writes into; the goroutine ends when the handler
// returns, which it does once it has written everything, or when the body
// is closed or r's context ends (its writes then fail and its context is
// cancelled).
func serveInProcess(r *http.Request, handler func(http.ResponseWriter, *http.Request)) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	pr, pw := io.Pipe()
	w := &pipeWriter{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	hr := r.WithContext(ctx) // a shallow copy: r itself is not modified
	if hr.Body == nil {
		hr.Body = http.NoBody
	}
	// The body's reader sees the context's error when it ends, as with a
	// real transport.
	stop := context.AfterFunc(r.Context(), func() { pw.CloseWithError(context.Cause(r.Context())) })
	go func() {
		defer func() {
			stop()
			cancel(nil)
			_ = hr.Body.Close()
			switch p := recover(); {
			case p != nil:
				w.fail(fmt.Errorf("agenttest: the handler panicked: %v", p))
			case r.Context().Err() != nil:
				// The handler stopped because the request's context
				// ended: the body ends with that error, not with EOF.
				w.fail(context.Cause(r.Context()))
			default:
				w.finish()
			}
		}()
		handler(w, hr)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		_ = pr.CloseWithError(context.Cause(r.Context()))
		cancel(context.Cause(r.Context()))
		return nil, context.Cause(r.Context())
	}
	if w.err != nil {
		return nil, w.err
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{pr: pr, cancel: cancel},
		ContentLength: -1,
		Request:       r,
	}, nil
}

// pipeWriter is the http.ResponseWriter of a handler served in process.
// Only the handler's goroutine uses it; ready is closed once the header is
// committed, after which status, sent and err do not change.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	ready  chan struct{}
	once   sync.Once

	status int         // the status sent
	sent   http.Header // the header as it was when sent
	err    error       // why there is no response at all
}

func (w *pipeWriter) Header() http.Header { return w.header }

// WriteHeader commits the header with status; later calls do nothing.
func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = make(http.Header, len(w.header))
		for k, v := range w.header {
			if v != nil { // a nil value suppresses the header, as net/http does
				w.sent[k] = append([]string(nil), v...)
			}
		}
		close(w.ready)
	})
}

// Write sends p to the reader of the body; it returns when the reader has
// taken all of it, or with an error once the body was closed.
func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: every Write already reached the reader.
func (w *pipeWriter) Flush() {}

// abort ends the body with the error a client sees when the server cuts
// (or, with reset, resets) the connection in the middle of the body.
func (w *pipeWriter) abort(reset bool) {
	w.WriteHeader(http.StatusOK)
	err := io.ErrUnexpectedEOF
	if reset {
		err = fmt.Errorf("agenttest: read: %w", syscall.ECONNRESET)
	}
	_ = w.pw.CloseWithError(err)
}

// finish ends the body after the handler returned.
func (w *pipeWriter) finish() {
	w.WriteHeader(http.StatusOK)
	_ = w.pw.Close()
}

// fail ends the response with err: RoundTrip returns err when the header
// was not sent yet, and reading the body returns it otherwise.
func (w *pipeWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	_ = w.pw.CloseWithError(err)
}

// pipeBody is the body of a response served in process.
type pipeBody struct {
	pr     *io.PipeReader
	cancel context.CancelCauseFunc
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

// Close stops the handler: its writes fail and its context is cancelled.
func (b *pipeBody) Close() error {
	b.cancel(errBodyClosed)
	return b.pr.Close()
}
