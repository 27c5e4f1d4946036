package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/planround/planround/stream"
)

// ErrTruncated is returned by [Reader.Next] when the body ended before the
// response was finished: neither "data: [DONE]" nor a finish_reason arrived,
// the last frame was cut in the middle, or reading the body failed (a cut
// or reset connection). The error returned wraps ErrTruncated and, for a
// read error, the read error too.
var ErrTruncated = errors.New("response truncated: the stream ended before the model finished")

// truncated returns ErrTruncated caused by the read error err.
func truncated(err error) error {
	return fmt.Errorf("%w (reading the body: %w)", ErrTruncated, err)
}

// MaxEventSize is the largest event (the data of one SSE event) a [Reader]
// accepts; a bigger one ends the stream with an error.
const MaxEventSize = 32 << 20

// Reader decodes an OpenAI-compatible chat-completions SSE body into
// [stream.Delta] values, one per useful chunk.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br buffer

	data []byte // the current event's data, lines joined by '\n'
	long []byte // a line longer than br's big buffer
	// The flags are together, so that they share a word: a Reader is
	// allocated per response (agent's chatStream embeds it).
	hasData  bool // a data field was seen in the current event
	errEv    bool // the current event is an error: event: error, or an error field
	partial  bool // the current event's last line had no line end (body cut)
	skipLF   bool // the last line ended with a CR: skip an LF right after it
	finished bool // a finish_reason was seen

	delta  stream.Delta
	dec    decoder
	finish string
	usage  *stream.Usage
	err    error // sticky: returned by every later Next; errUnstarted before the first
}

// errUnstarted is a Reader's err before its first Next, which looks at the
// start of the body first.
var errUnstarted = errors.New("wire: not started")

// keepCap is the largest capacity the slices a Reader collects an event or
// a long line in keep from one event to the next: after a larger event they
// are dropped, so that a Reader does not hold memory in proportion to the
// largest event it has seen.
const keepCap = 16 << 10

// NewReader returns a Reader that decodes the SSE body r. The caller
// closes r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: newBuffer(r), err: errUnstarted}
}

// Release hands back the memory the Reader borrowed to read a body that
// arrived faster than it was decoded (see buffer.go), for the next Reader
// to use. A caller that is done with the Reader calls it; one that does
// not leaves that memory to the garbage collector. The Reader remains
// usable.
func (r *Reader) Release() { r.br.release() }

// Next returns the next useful delta: one that carries content, reasoning,
// tool-call fragments, a finish reason or usage. Frames that carry none of
// these (role-only chunks, Azure's prompt-filter chunk, keep-alive comments,
// chunks of other choices) are skipped.
//
// The returned Delta and its ToolCalls slice belong to the Reader and are
// overwritten by the next call; copy what you keep. The strings in it are
// ordinary strings and stay valid, and a non-nil Usage is a new value that
// the Reader does not touch again.
//
// A body that is not an event stream is recognised by its first bytes,
// whatever its Content-Type says: a JSON object holding "error" ends with
// a [*StreamError], a whole chat.completion object (from a server that
// ignored "stream": true) is handed out as one delta, and anything else
// ends with a [*NotStreamError].
//
// Next returns:
//   - io.EOF after "data: [DONE]", or when the body ends after a
//     finish_reason was seen, cleanly or not (some providers, such as
//     Azure, may omit [DONE]; a connection cut after the finish loses
//     nothing of the response);
//   - an error wrapping [ErrTruncated] when the body ends with neither,
//     also when reading it fails (the error then wraps the read error
//     too);
//   - a [*StreamError] for an error frame (data: {"error": ...}), an
//     event named error (event: error, whose data is the error object, an
//     object holding it, or plain text), or an error field (error: {...},
//     which llama.cpp's server sends and follows with data: [DONE]);
//   - a [*NotStreamError] for a body that is not an event stream;
//   - an error naming the problem when a frame is not valid JSON.
//
// After an error (io.EOF included) every later call returns the same
// error.
func (r *Reader) Next() (*stream.Delta, error) {
	if r.err != nil {
		if r.err != errUnstarted {
			return nil, r.err
		}
		// The first call: look at the start of the body. (Keeping this
		// behind the sticky error's check costs the calls after it
		// nothing.)
		r.err = nil
		if k, err := r.sniff(); err != nil || k != bodyStream {
			return r.whole(k, err)
		}
	}
	for {
		data, err := r.readEvent()
		if err != nil {
			switch {
			case r.finished && (err == io.EOF || errors.Is(err, ErrTruncated)):
				// The response was complete: a cut after it loses nothing.
				r.err = io.EOF
			case err == io.EOF:
				r.err = ErrTruncated
			default:
				r.err = err
			}
			return nil, r.err
		}
		if r.errEv {
			r.err = errorEvent(data)
			return nil, r.err
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue // an event with empty data is not dispatched (SSE)
		}
		if isDone(data) {
			r.err = io.EOF
			return nil, r.err
		}
		useful, err := r.decode(data)
		if err != nil {
			var se *StreamError
			switch {
			case !r.partial || errors.As(err, &se):
				// A whole bad frame, or the provider's error.
			case r.finished:
				err = io.EOF // a frame cut after the finish, as above
			default:
				err = fmt.Errorf("%w (last frame cut: %v)", ErrTruncated, err)
			}
			r.err = err
			return nil, r.err
		}
		if useful {
			return &r.delta, nil
		}
	}
}

// FinishReason returns the last finish_reason seen so far ("" if none).
func (r *Reader) FinishReason() string { return r.finish }

// Usage returns the last usage seen so far, or nil. Some providers put it on
// the finish chunk, others on a final chunk with no choices.
func (r *Reader) Usage() *stream.Usage { return r.usage }

// decode fills r.delta from one frame and reports whether it carries
// anything.
func (r *Reader) decode(data []byte) (bool, error) {
	d := &r.delta
	if !r.dec.fast(data, d) {
		if err := slowDecode(data, d); err != nil {
			return false, err
		}
	}
	if d.FinishReason != "" {
		r.finished = true
		r.finish = d.FinishReason
	}
	if d.Usage != nil {
		r.usage = d.Usage
	}
	return d.Content != "" || d.Reasoning != "" || len(d.ToolCalls) > 0 ||
		d.FinishReason != "" || d.Usage != nil, nil
}

// isDone reports whether data is the [DONE] sentinel.
func isDone(data []byte) bool {
	return string(bytes.TrimSpace(data)) == "[DONE]"
}

// readEvent returns the data of the next event that has a data field. It
// returns io.EOF at the end of the body (after dispatching a last event
// that was not followed by a blank line).
func (r *Reader) readEvent() ([]byte, error) {
	if cap(r.data) > keepCap {
		r.data = nil
	}
	if cap(r.long) > keepCap {
		r.long = nil
	}
	r.data = r.data[:0]
	r.hasData, r.errEv = false, false
	r.partial = false
	for {
		line, terminated, err := r.readLine()
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(line) == 0 && terminated {
			if r.hasData {
				return r.data, nil
			}
			continue
		}
		if len(line) > 0 {
			if !terminated {
				r.partial = true
			}
			if err := r.field(line); err != nil {
				return nil, err
			}
		}
		if err == io.EOF {
			if r.hasData {
				return r.data, nil
			}
			return nil, io.EOF
		}
	}
}

// field processes one non-empty line of an event.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment (keep-alive, "OPENROUTER PROCESSING")
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
	case "error":
		// Not an SSE field, but what llama.cpp writes for an error: its
		// value is the error, like the data of an error event.
		r.errEv = true
	case "event":
		if string(value) == "error" {
			r.errEv = true
		}
		return nil
	default:
		return nil // id:, retry: and unknown fields
	}
	if r.hasData {
		r.data = append(r.data, '\n')
	}
	if len(r.data)+len(value) > MaxEventSize {
		return fmt.Errorf("wire: event larger than %d bytes", MaxEventSize)
	}
	r.data = append(r.data, value...)
	r.hasData = true
	return nil
}

// readLine returns the next line without its line end: LF, CRLF or a lone
// CR, as the SSE format says. terminated is false for a last line the body
// ended in the middle of. The slice is valid until the next call.
//
// A line ends as soon as its CR arrives: the Reader does not wait for the
// next byte to see whether an LF follows (which would stall a stream framed
// with lone CRs); an LF right after a CR is skipped at the next call
// instead.
func (r *Reader) readLine() (line []byte, terminated bool, err error) {
	r.long = r.long[:0]
	spilled := false // the line so far is in r.long
	from := 0        // buf[:from] holds no line end
	for {
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF && len(buf) > 0 {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				buf = buf[1:]
			}
		}
		if end := lineEnd(buf[from:]); end >= 0 {
			end += from
			n := end + 1
			if buf[end] == '\r' {
				switch {
				case n == len(buf):
					r.skipLF = true
				case buf[n] == '\n':
					n++
				}
			}
			line = buf[:end]
			if spilled {
				r.long = append(r.long, line...)
				line = r.long
			}
			r.br.Discard(n)
			return line, true, nil
		}
		from = len(buf)
		if len(buf) == r.br.Size() && r.br.grow() {
			continue // the line goes on in the big buffer
		}
		if len(buf) == r.br.Size() {
			// A line longer than the buffer: keep it aside.
			if len(r.long)+len(buf) > MaxEventSize {
				return nil, false, fmt.Errorf("wire: line longer than %d bytes", MaxEventSize)
			}
			r.long = append(r.long, buf...)
			spilled = true
			r.br.Discard(len(buf))
			from = 0
			continue
		}
		// Wait for at least one more byte (Peek keeps what is buffered).
		if _, err := r.br.Peek(len(buf) + 1); err != nil {
			if err != io.EOF {
				return nil, false, truncated(err)
			}
			buf, _ = r.br.Peek(r.br.Buffered())
			line = buf
			if spilled {
				r.long = append(r.long, line...)
				line = r.long
			}
			r.br.Discard(len(buf))
			return line, false, io.EOF
		}
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
