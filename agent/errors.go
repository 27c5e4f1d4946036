package agent

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/planround/planround/internal/suspend"
	"github.com/planround/planround/internal/wire"
)

// ErrTruncated is returned (wrapped) by a run whose model response ended
// with neither a finish reason nor the end-of-stream marker: the connection
// was cut or reset, or the server ended the body early. What arrived was
// delivered. When reading the body failed, the error wraps the read error
// too (io.ErrUnexpectedEOF, syscall.ECONNRESET, ...) and its text says it.
var ErrTruncated = wire.ErrTruncated

// ErrTurnUsed is returned by ranging a second time over [Turn.Run].
var ErrTurnUsed = errors.New("agent: a Turn runs once")

// ErrSuspended suspends a run at a pending approval: returned (wrapped or
// not) by a pending Ticket's Wait, it says "not now" (the decision will come
// later, maybe hours later, maybe to another process), and given as the
// cause of the run's context (context.WithCancelCause) it suspends a run
// that waits for an approval instead of interrupting it, as a host does
// when it shuts down. A [ToolDefinition.Resumable] tool's Execute returns
// it (wrapped, see [Suspend]) to suspend the run while its call waits for
// something from outside the run, such as a form's answers; a host that
// shuts down while such a tool runs suspends the run the same way.
//
// A suspended run needs a Config.Store that implements memory.CallLog and
// an Input.SessionID: its calls that wait stay open in the Store, the run
// yields a suspended chunk as its last and the iterator returns nil;
// [Agent.Resume] continues the turn. Without a CallLog a suspension is a
// rejection (CauseApprovalFailed), as any other error of Wait, and a
// tool's ErrSuspended is an ordinary tool error that the model reads (so
// is the ErrSuspended of a tool that is not resumable).
var ErrSuspended = suspend.ErrSuspended

// ErrNothingToResume is returned (wrapped) by [Agent.Resume] for a session
// whose last turn has no open tool calls.
var ErrNothingToResume = errors.New("agent: nothing to resume")

// ErrBusy is returned (wrapped) by a run or a resumed turn on a session that
// a run of the same Agent drives already (and by the runner package for a
// session another process drives).
var ErrBusy = errors.New("agent: another run drives this session")

// ErrNoCallRecord is returned by [SaveCallState] when the call keeps no
// open-call record to save a state with: ctx is not a running call's, the
// run keeps no records (its Config.Store does not implement
// memory.CallLog, or it has no Input.SessionID), or the call has returned.
var ErrNoCallRecord = errors.New("agent: the call keeps no open-call record")

// ProviderError is an error the model provider reported: an HTTP error
// status with its error body, or an error object sent with status 200, inside
// a stream (data: {"error": ...}) or as the whole body. A run that fails this
// way returns an error wrapping a *ProviderError; get it with errors.As. Its
// text carries the provider's message, such as "404 Not Found: The model
// `gpt-x` does not exist", where openai-go's own error says only "404 Not
// Found".
type ProviderError struct {
	// StatusCode is the HTTP status of the response: the error status, or
	// 200 (http.StatusOK) when the error came in a response that began
	// normally.
	StatusCode int
	// Message is the provider's message. When the body held none (an HTML
	// page from a proxy, a JSON body of another shape) it is the start of
	// the body, on one line.
	Message string
	// Type, Code and Param are the provider's error type, code and the
	// request parameter it concerns, when given. A numeric code is kept as
	// its decimal text.
	Type, Code, Param string
	// Err is the underlying error: openai-go's *openai.Error (which holds the
	// request and the response) for an HTTP error status it could decode,
	// nil otherwise.
	Err error
}

// Error returns the status (for an HTTP error status), the provider's
// message, and the type, code and param when known.
func (e *ProviderError) Error() string {
	var b strings.Builder
	if e.StatusCode != http.StatusOK {
		b.WriteString(strconv.Itoa(e.StatusCode))
		if t := http.StatusText(e.StatusCode); t != "" {
			b.WriteString(" " + t)
		}
		b.WriteString(": ")
	} else {
		b.WriteString("provider error: ")
	}
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	b.WriteString(msg)
	var details []string
	for _, d := range [...]struct{ name, value string }{{"type", e.Type}, {"code", e.Code}, {"param", e.Param}} {
		if d.value != "" {
			details = append(details, d.name+" "+d.value)
		}
	}
	if len(details) > 0 {
		b.WriteString(" (" + strings.Join(details, ", ") + ")")
	}
	return b.String()
}

// Unwrap returns Err.
func (e *ProviderError) Unwrap() error { return e.Err }

// ConnectionError is the error of a model request that got no response: the
// connection could not be made, or broke before the response's headers
// came. A run that fails this way returns an error wrapping a
// *ConnectionError; get it with errors.As. Its text says whether the
// request may have reached the provider.
//
// A request that provably never reached the provider is sent again, up to
// [Config.MaxRetries] times; one that may have reached it is not, since
// the provider may have processed it (and billed it). When the run's
// context ended, the run is interrupted instead, and no ConnectionError is
// returned.
type ConnectionError struct {
	// Sent is false when the request provably never reached the provider:
	// no connection could be made for it (dial, proxy or TLS handshake
	// failed), or its HTTP/2 connection closed before its first request.
	// It is true when the request may have reached the provider: the
	// connection broke after the request was written, or the transport
	// gave no way to tell (an http.RoundTripper that does not report
	// getting a connection through net/http/httptrace).
	Sent bool
	// Attempts is how many times the request was sent or tried, the last
	// one included.
	Attempts int
	// Err is the last attempt's error, from the http.Client (a *url.Error,
	// wrapping a *net.OpError, io.ErrUnexpectedEOF, ...) or from a
	// middleware of Config.RequestOptions.
	Err error
}

// Error says whether the request may have reached the provider, how many
// attempts were made, and the last attempt's error.
func (e *ConnectionError) Error() string {
	if !e.Sent {
		attempts := "1 attempt"
		if e.Attempts != 1 {
			attempts = strconv.Itoa(e.Attempts) + " attempts"
		}
		return "the model request never reached the provider (" + attempts + "): " + e.Err.Error()
	}
	return "the model request may have reached the provider, so it was not sent again (attempt " +
		strconv.Itoa(e.Attempts) + "): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *ConnectionError) Unwrap() error { return e.Err }
