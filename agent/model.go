package agent

import (
	"context"
	"io"
	"time"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// modelAPI is the seam between the agent and a model API: the run loop,
// the summary and everything above them speak to it, not to a provider's
// SDK. One call of open is one model request (a round, or a summary): it
// takes the provider-neutral request the run assembled and returns the
// stream of the response's deltas. Chat completions (chatCompletions) is
// the one implementation today and the agent's default; the Responses API
// and Anthropic Messages are to come behind the same seam (issue 38).
//
// An implementation owns everything that is the API's own: building and
// sending the request (settings, tools and messages in its vocabulary),
// retries and the HTTP client (retryRequests and releaseBody are there for
// it to use), decoding the stream, and turning its errors into what the run
// reports: a *ProviderError for an error the provider sent, with the
// status; a *ConnectionError for a request that failed without a response;
// an error wrapping ErrTruncated for a stream cut before its end.
type modelAPI interface {
	// open sends req with ctx (the run's, carrying the chat span and the
	// API log's body capture) and returns the stream of its response. An
	// error means no stream: the request was refused or never answered.
	open(ctx context.Context, req request) (modelStream, error)
}

// modelStream is the response of one request, read by one goroutine.
//
// Its cost per delta is the run's: next returns a pointer into the
// stream's own reused Delta (no allocation, no boxing, no goroutine or
// channel per delta), as internal/wire's Reader does.
type modelStream interface {
	// next returns the next delta that carries something: text
	// (Content), reasoning, tool-call fragments by index (ID, name,
	// argument fragments), a finish reason ("stop", "tool_calls",
	// "length", ... as chat completions names them) or usage. The Delta
	// and its ToolCalls belong to the stream and are overwritten by the
	// next call; the strings and a non-nil Usage stay valid. It returns
	// io.EOF once the response is complete, and an error (see modelAPI)
	// when it ended otherwise; after either, every later call returns the
	// same.
	next() (*stream.Delta, error)
	// close releases the response: complete says next returned io.EOF (a
	// complete response's connection may be kept for the next request).
	// It is called once, whatever ended the reading.
	close(complete bool)
}

// request is one model request, in the agent's vocabulary: what the run
// assembled for a round (or a summary). A modelAPI translates it.
type request struct {
	messages []memory.Message
	// tools are the tools the model may call, none for a round without
	// tools.
	tools    []ToolDefinition
	settings ModelSettings
}

// What closeBody reads of a body after the end of the response, at most.
const (
	drainLimit = 4 << 10
	drainTime  = 50 * time.Millisecond
)

// closeBody closes the body of a response. After a complete response
// ([DONE] or the end of the body was read) it first reads what is left, up
// to drainLimit bytes and for at most drainTime: the end of the chunked
// body usually comes just after [DONE], and net/http reuses a connection
// only when its body was read to the end, so this saves a new TCP (and TLS)
// connection per request. A server that keeps the body open after [DONE]
// costs at most drainTime, then the body is closed under the read.
func closeBody(body io.ReadCloser, complete bool) {
	if complete {
		closed := make(chan struct{})
		t := time.AfterFunc(drainTime, func() {
			body.Close()
			close(closed)
		})
		_, _ = io.CopyN(io.Discard, body, drainLimit)
		if !t.Stop() {
			<-closed // the timer's Close has returned: nothing outlives the call
		}
	}
	body.Close()
}
