package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Response is one scripted answer. Build one with [Reply], [Raw],
// [ReplayFile], [Frames] or [HTTPError]; the methods below return a
// modified copy and leave the receiver unchanged, so a Response can be
// reused and enqueued many times.
//
// The zero Response is a 200 stream with no frames and no [DONE].
type Response struct {
	status      int         // 0: a 200 stream; otherwise a reply with body
	body        []byte      // the body when status != 0
	contentType string      // the body's Content-Type when status != 0
	header      http.Header // extra headers; copied on write

	frames     [][]byte // rendered SSE events, each ending in a blank line
	done       bool     // send "data: [DONE]" after the frames
	completion []byte   // the non-streaming form, nil when there is none
	// respFrames and respObject are the Responses API forms (stream and
	// response object), nil when there are none (see [ResponsesPath]).
	respFrames [][]byte
	respObject []byte
	// responses marks the copy of a Response being streamed to a
	// Responses API request: its in-stream error is an error event.
	responses bool
	// ignoreStream answers a streaming request with the completion, as
	// a server that ignores "stream": true does.
	ignoreStream bool

	delay     time.Duration
	keepAlive bool
	onFlush   func(frame int)

	fault   faultKind
	faultAt int    // number of frames written before the fault
	errMsg  string // message of an error frame

	// calls are the names of the tool calls the Response carries, in
	// order; a request must offer each of them (see [Response.Unsolicited]).
	calls       []string
	unsolicited bool   // serve calls the request does not offer
	text        string // the reply's text, for messages about the script
}

type faultKind uint8

const (
	faultNone faultKind = iota
	faultCut
	faultHold
	faultErrorFrame
	faultReset
)

var (
	doneFrame      = []byte("data: [DONE]\n\n")
	keepAliveFrame = []byte(": keep-alive\n\n")
)

// HTTPError returns a Response that answers with the HTTP status code and
// an OpenAI-style error body ({"error":{"message":...,"type":...,"code":...}})
// instead of a stream. The type and code follow the status: 401
// invalid_api_key, 429 rate_limit_exceeded, 5xx server_error.
func HTTPError(status int, message string) Response {
	if status < 400 || status > 599 {
		// Not an error status: answer 500 and say why rather than
		// sending a confusing success.
		message = fmt.Sprintf("agenttest: HTTPError called with non-error status %d: %s", status, message)
		status = http.StatusInternalServerError
	}
	typ, code := "invalid_request_error", ""
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	return Response{status: status, body: errorBody(message, typ, code), contentType: "application/json"}
}

// Body returns a Response that answers with the HTTP status, the
// Content-Type and the body as they are, whatever the request asked for:
// an HTML error page from a proxy, an error body that is not OpenAI's
// shape, a JSON object where a stream was expected. An empty contentType
// sends no Content-Type header.
func Body(status int, contentType, body string) Response {
	if status < 100 || status > 599 {
		body = string(errorBody(fmt.Sprintf("agenttest: Body called with status %d", status), "server_error", ""))
		status, contentType = http.StatusInternalServerError, "application/json"
	}
	return Response{status: status, body: []byte(body), contentType: contentType}
}

// errorBody renders {"error":{...}} with code null when code is empty.
func errorBody(message, typ, code string) []byte {
	e := struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{Message: message, Type: typ}
	if code != "" {
		e.Code = &code
	}
	b, err := json.Marshal(map[string]any{"error": e})
	if err != nil { // cannot happen for strings
		return []byte(`{"error":{"message":"agenttest: cannot render error"}}`)
	}
	return b
}

// Raw returns a Response that streams body as it is, split into events at
// blank lines so each event is flushed on its own. Nothing is added: the
// body decides whether a [DONE] comes.
func Raw(body []byte) Response {
	return framesResponse(splitEvents(body))
}

// ReplayFile returns a Response that streams the recorded SSE file at path
// as it is (see [Raw]).
func ReplayFile(path string) (Response, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Response{}, fmt.Errorf("agenttest: replay: %w", err)
	}
	return Raw(b), nil
}

// Frames returns a Response that streams each payload as one
// "data: <payload>" event. Payloads are sent literally: add "[DONE]" as the
// last payload to end the stream the OpenAI way.
func Frames(payloads ...string) Response {
	frames := make([][]byte, len(payloads))
	for i, p := range payloads {
		frames[i] = []byte("data: " + p + "\n\n")
	}
	return framesResponse(frames)
}

// framesResponse returns a Response that streams frames as they are, with
// the tool calls and text it finds in them.
func framesResponse(frames [][]byte) Response {
	r := Response{frames: frames}
	var text strings.Builder
	for _, f := range frames {
		for line := range bytes.Lines(f) {
			data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
			if !ok {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Function struct {
								Name string `json:"name"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal(bytes.TrimSpace(data), &c) != nil {
				continue // [DONE], or a frame a test made invalid on purpose
			}
			for _, ch := range c.Choices {
				if text.Len() < maxDescribed {
					text.WriteString(ch.Delta.Content)
				}
				for _, tc := range ch.Delta.ToolCalls {
					if tc.Function.Name != "" {
						r.calls = append(r.calls, tc.Function.Name)
					}
				}
			}
		}
	}
	r.text = text.String()
	return r
}

// splitEvents cuts an SSE body after each blank line ("\n\n" or
// "\r\n\r\n"). A trailing piece without a blank line is the last event.
func splitEvents(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		n := bytes.Index(body, []byte("\n\n"))
		m := bytes.Index(body, []byte("\r\n\r\n"))
		end := len(body)
		switch {
		case m >= 0 && (n < 0 || m < n):
			end = m + 4
		case n >= 0:
			end = n + 2
		}
		out = append(out, body[:end:end])
		body = body[end:]
	}
	return out
}

// NumFrames returns the number of frames the Response streams, not
// counting [DONE] and keep-alive comments. Fault positions count these
// frames. To a Responses API request ([ResponsesPath]) a reply streams
// another number of events, and fault positions count those.
func (r Response) NumFrames() int { return len(r.frames) }

// Status returns the HTTP status the Response answers with.
func (r Response) Status() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// WithHeader returns r answering with the extra HTTP header key: value.
func (r Response) WithHeader(key, value string) Response {
	h := make(http.Header, len(r.header)+1)
	maps.Copy(h, r.header)
	h.Set(key, value)
	r.header = h
	return r
}

// RetryAfter returns r with a Retry-After header of d rounded up to whole
// seconds. Use it with an [HTTPError] 429 or 503.
func (r Response) RetryAfter(d time.Duration) Response {
	s := int64(math.Ceil(max(d, 0).Seconds()))
	return r.WithHeader("Retry-After", strconv.FormatInt(s, 10))
}

// IgnoreStream returns r answering a request that asked for a stream with
// the whole chat.completion object instead (or, for a Responses API
// request, the response object), as a server that ignores "stream": true
// does. It applies to responses built with a [Builder].
func (r Response) IgnoreStream() Response {
	r.ignoreStream = true
	return r
}

// NoDone returns r without the final "data: [DONE]" event.
func (r Response) NoDone() Response {
	r.done = false
	return r
}

// KeepAlive returns r with a ": keep-alive" comment event before every
// frame but the first.
func (r Response) KeepAlive() Response {
	r.keepAlive = true
	return r
}

// Delay returns r waiting d before every frame but the first and before
// [DONE]. The wait ends early when the client goes away or the server
// closes.
func (r Response) Delay(d time.Duration) Response {
	r.delay = max(d, 0)
	return r
}

// OnFlush returns r calling fn after each frame has been written and
// flushed, with the frame's number (1 for the first). fn runs on the
// server's handler goroutine, before the next frame; keep it short.
// It replaces an earlier OnFlush.
func (r Response) OnFlush(fn func(frame int)) Response {
	r.onFlush = fn
	return r
}

// CutAfter returns r closing the TCP connection abruptly after n frames:
// the client sees an unexpected EOF in the middle of the chunked body.
// A fault replaces any earlier fault of r; n beyond the last frame cuts
// before [DONE].
func (r Response) CutAfter(n int) Response {
	r.fault, r.faultAt = faultCut, max(n, 0)
	return r
}

// ResetAfter returns r resetting the TCP connection after n frames: the
// server closes it with an RST instead of a FIN, so the client's next read
// fails with "connection reset by peer". A fault replaces any earlier
// fault of r; n beyond the last frame resets before [DONE].
func (r Response) ResetAfter(n int) Response {
	r.fault, r.faultAt = faultReset, max(n, 0)
	return r
}

// HoldAfter returns r writing n frames and then waiting, without ending
// the stream, until the client goes away or the server closes. Combine it
// with [Response.OnFlush] to cancel a client mid-stream at a known point.
// A fault replaces any earlier fault of r.
func (r Response) HoldAfter(n int) Response {
	r.fault, r.faultAt = faultHold, max(n, 0)
	return r
}

// ErrorAfter returns r writing n frames, then an in-stream error frame
// (data: {"error":{"message":message,...}}), and ending the body there
// without [DONE]. A fault replaces any earlier fault of r.
func (r Response) ErrorAfter(n int, message string) Response {
	r.fault, r.faultAt, r.errMsg = faultErrorFrame, max(n, 0), message
	return r
}
