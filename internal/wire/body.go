package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/planround/planround/stream"
)

// bodyKind is what the start of a body says it is.
type bodyKind uint8

const (
	bodyStream bodyKind = iota // an event stream
	bodyJSON                   // a JSON value
	bodyOther                  // neither: HTML, plain text, ...
)

// maxStart bounds the start of a body kept in a [NotStreamError].
const maxStart = 256

var bom = []byte("\xEF\xBB\xBF")

// sniff looks at the first bytes of the body, before any event is read:
// it drops a byte order mark and blank space before the first line (which
// mean nothing in an event stream or in JSON) and tells an event stream,
// whose first line is a comment or a known field, from a JSON value and
// from anything else. The Content-Type is not consulted: servers send
// streams as text/plain, application/json or with none at all.
//
// A read error before the first byte that is not blank is returned as
// truncation.
func (r *Reader) sniff() (bodyKind, error) {
	// The longest field name is "retry": 6 bytes and the byte after it
	// decide.
	const look = 7
	first := true
	for {
		buf, err := r.br.Peek(look)
		i := 0
		if first {
			first = false
			if bytes.HasPrefix(buf, bom) {
				i = len(bom)
			}
		}
		for i < len(buf) && isBlank(buf[i]) {
			i++
		}
		if i > 0 {
			r.br.Discard(i)
			if i < len(buf) || err == nil {
				continue // peek again from the first byte that counts
			}
		}
		switch {
		case len(buf) > i:
			return classify(buf[i:]), nil
		case err == nil:
			continue
		case err == io.EOF:
			return bodyStream, nil // an empty body: the stream path says truncated
		default:
			return bodyStream, truncated(err)
		}
	}
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// classify tells what a body is from its first bytes b (at most a few,
// the first not blank).
func classify(b []byte) bodyKind {
	switch b[0] {
	case ':':
		return bodyStream // a comment
	case '{', '[':
		return bodyJSON
	}
	for _, name := range [...]string{"data", "event", "id", "retry", "error"} {
		if !bytes.HasPrefix(b, []byte(name)) {
			continue
		}
		if len(b) == len(name) {
			return bodyStream // the body ends after the field name
		}
		if c := b[len(name)]; c == ':' || c == '\r' || c == '\n' {
			return bodyStream
		}
	}
	return bodyOther
}

// whole ends a body that is not an event stream: it reads a JSON body to
// its end and hands out the error or the completion it holds, and reports
// anything else as a NotStreamError. err is sniff's error.
func (r *Reader) whole(k bodyKind, err error) (*stream.Delta, error) {
	if err != nil {
		r.err = err
		return nil, err
	}
	if k != bodyJSON {
		buf, _ := r.br.Peek(min(r.br.Buffered(), maxStart))
		r.err = &NotStreamError{Start: bytes.Clone(buf)}
		return nil, r.err
	}
	body, err := io.ReadAll(io.LimitReader(&r.br, MaxEventSize+1))
	switch {
	case err != nil:
		r.err = truncated(err)
		return nil, r.err
	case len(body) > MaxEventSize:
		r.err = fmt.Errorf("wire: response body larger than %d bytes", MaxEventSize)
		return nil, r.err
	}
	useful, err := r.completion(body)
	switch {
	case err != nil:
		r.err = err
	case useful:
		r.finished = true
		r.err = io.EOF // for the next call: the body holds one delta
		return &r.delta, nil
	default:
		r.err = io.EOF
	}
	return nil, r.err
}

// completionJSON is a whole chat.completion object, or an error object.
type completionJSON struct {
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Index        int          `json:"index"`
		Message      *messageJSON `json:"message"`
		FinishReason string       `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

type messageJSON struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCallJSON  `json:"tool_calls"`
}

// completion fills r.delta from a JSON body and reports whether it carries
// anything. It returns a *StreamError for an error object and a
// *NotStreamError for JSON that is neither an error nor a completion.
func (r *Reader) completion(body []byte) (bool, error) {
	notStream := &NotStreamError{Start: bytes.Clone(body[:min(len(body), maxStart)])}
	var c completionJSON
	if json.Unmarshal(body, &c) != nil {
		return false, notStream
	}
	if len(c.Error) > 0 && !isNull(c.Error) {
		return false, newStreamError(c.Error, body)
	}
	var msg *messageJSON
	d := &r.delta
	for _, ch := range c.Choices {
		if ch.Index == 0 && ch.Message != nil {
			msg, d.FinishReason = ch.Message, ch.FinishReason
			break
		}
	}
	if msg == nil {
		return false, notStream
	}
	d.Content = rawText(msg.Content)
	d.Reasoning = rawText(msg.ReasoningContent)
	if d.Reasoning == "" {
		d.Reasoning = rawText(msg.Reasoning)
	}
	for i, tc := range msg.ToolCalls {
		// A message's calls are whole and in order: the position is the
		// index.
		t := stream.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: argumentsText(tc.Function.Arguments)}
		if t.ID != "" || t.Name != "" || t.Arguments != "" {
			d.ToolCalls = append(d.ToolCalls, t)
		}
	}
	u, err := usage(c.Usage, body)
	if err != nil {
		return false, err
	}
	d.Usage = u
	r.finish = d.FinishReason
	r.usage = u
	return d.Content != "" || d.Reasoning != "" || len(d.ToolCalls) > 0 || d.FinishReason != "" || d.Usage != nil, nil
}
