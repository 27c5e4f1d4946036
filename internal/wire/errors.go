package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// StreamError is an error the provider reported inside the stream, as a
// frame such as data: {"error": {"message": "...", "type": "...", "code":
// "..."}} or data: {"error": "..."}. [Reader.Next] returns it as a
// *StreamError; use errors.As to get at the fields.
type StreamError struct {
	// Message is the provider's message (for an error that is a plain
	// string, that string).
	Message string
	// Type, Code and Param are the provider's error type, code and
	// parameter, when given. A numeric code is kept as its decimal text.
	Type, Code, Param string
	// Raw is the whole frame.
	Raw []byte
}

// Error returns the provider's message, prefixed "wire: provider error: ",
// with the type and code when known.
func (e *StreamError) Error() string {
	var b strings.Builder
	b.WriteString("wire: provider error: ")
	msg := e.Message
	if msg == "" {
		msg = "(no message) " + excerpt(e.Raw)
	}
	b.WriteString(msg)
	if e.Type != "" || e.Code != "" {
		b.WriteString(" (")
		if e.Type != "" {
			b.WriteString("type " + e.Type)
		}
		if e.Code != "" {
			if e.Type != "" {
				b.WriteString(", ")
			}
			b.WriteString("code " + e.Code)
		}
		b.WriteString(")")
	}
	return b.String()
}

// newStreamError builds the StreamError of the frame data whose "error"
// value is raw.
func newStreamError(raw json.RawMessage, data []byte) *StreamError {
	e := &StreamError{Raw: append([]byte(nil), data...)}
	switch raw[0] {
	case '"':
		e.Message = rawText(raw)
	case '{':
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil {
			e.Message = scalarText(fields["message"])
			e.Type = scalarText(fields["type"])
			e.Code = scalarText(fields["code"])
			e.Param = scalarText(fields["param"])
		}
	default:
		e.Message = string(raw)
	}
	return e
}

// scalarText returns the text of a JSON string, the JSON text of a number
// or boolean, and "" for anything else.
func scalarText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		return rawText(raw)
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f':
		return string(raw)
	}
	return ""
}

// errorEvent builds the StreamError of an error event: data is an object
// holding "error", the error object itself, a JSON string, or plain text.
func errorEvent(data []byte) *StreamError {
	raw := bytes.TrimSpace(data)
	if len(raw) > 0 && raw[0] == '{' {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil {
			if e := fields["error"]; len(e) > 0 && !isNull(e) {
				return newStreamError(e, data)
			}
			return newStreamError(raw, data)
		}
	}
	e := &StreamError{Message: string(raw), Raw: append([]byte(nil), data...)}
	if len(raw) > 0 && raw[0] == '"' {
		if s := rawText(raw); s != "" {
			e.Message = s
		}
	}
	return e
}

// NotStreamError is returned by [Reader.Next] when the body is not an event
// stream and not a JSON body the Reader understands (an error object or a
// whole chat.completion): an HTML page from a proxy, plain text, other JSON.
type NotStreamError struct {
	// Start is the start of the body, at most a few hundred bytes.
	Start []byte
}

// Error says that the body is not an event stream and shows its start.
func (e *NotStreamError) Error() string {
	return "wire: the response is not an event stream; it starts: " + Snippet(e.Start, 120)
}

// Snippet returns the start of b as one line of text for a message: at
// most n runes, blank space runs folded into one space, control characters
// and invalid UTF-8 replaced, and "…" where it was cut.
func Snippet(b []byte, n int) string {
	var out strings.Builder
	space := false // blank space before the next rune
	count := 0
	for _, c := range strings.ToValidUTF8(string(bytes.TrimSpace(b)), "\uFFFD") {
		if unicode.IsSpace(c) {
			space = true
			continue
		}
		if !unicode.IsPrint(c) {
			c = '\uFFFD'
		}
		need := 1
		if space {
			need = 2
		}
		if count+need > n {
			out.WriteString("…")
			break
		}
		if space {
			out.WriteByte(' ')
			space = false
		}
		out.WriteRune(c)
		count += need
	}
	return out.String()
}

// ErrorBody returns the error a JSON error body holds ({"error": {...}} or
// {"error": "..."}), as the body of an HTTP error status or of a 200
// response carries it, or nil when body holds none.
func ErrorBody(body []byte) *StreamError {
	raw := bytes.TrimSpace(body)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	if e := fields["error"]; len(e) > 0 && !isNull(e) {
		return newStreamError(e, body)
	}
	return nil
}
