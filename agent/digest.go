package agent

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// ArgumentsDigest returns the digest of a call's arguments that binds a
// decision to what the person deciding saw: "sha256:" and the hex SHA-256
// of the arguments in canonical form (object keys sorted, no insignificant
// white space, strings escaped the same way, numbers as written). Two
// texts of the same JSON value that differ only in key order or spacing
// have the same digest. Arguments that are not valid JSON (also JSON with
// trailing bytes, or with strings that are not valid UTF-8) get the digest
// of their bytes without the JSON white space around them, so they still
// bind, and never share a digest with valid JSON. Nil, empty or blank
// arguments are taken as {}.
func ArgumentsDigest(args json.RawMessage) string {
	sum := sha256.Sum256(canonicalJSON(args))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// jsonSpace is JSON's insignificant white space.
const jsonSpace = " \t\r\n"

// canonicalJSON returns raw in canonical form, or raw without the white
// space around it when it is not valid JSON in valid UTF-8 (the decoder
// would drop trailing bytes after a value and replace invalid UTF-8, so
// that two different texts got one form).
func canonicalJSON(raw json.RawMessage) []byte {
	raw = bytes.Trim(raw, jsonSpace)
	if len(raw) == 0 {
		return []byte("{}")
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return raw
	}
	if out, ok := fastCanonical(raw); ok {
		return out
	}
	return slowCanonical(raw)
}

// slowCanonical is the canonical form of raw, valid JSON in valid UTF-8, by
// encoding/json: the definition fastCanonical must agree with.
func slowCanonical(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return raw
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// fastCanonical returns the canonical form of raw, valid JSON in valid
// UTF-8, without decoding it into Go values, for the common case: ok is
// false when raw holds a string with an escape sequence or a character the
// encoder escapes (U+2028, U+2029), or an object with a key twice, which
// slowCanonical handles.
func fastCanonical(raw []byte) (out []byte, ok bool) {
	c := canonicalizer{in: raw, out: make([]byte, 0, len(raw))}
	if !c.value() {
		return nil, false
	}
	return c.out, true
}

// canonicalizer writes the canonical form of in to out as it reads it.
type canonicalizer struct {
	in      []byte
	i       int
	out     []byte
	members []member // the members of the objects being read, innermost last
	tmp     []byte
}

// member is one member of an object in out: its text out[start:end] and
// its key, in[key:keyEnd] (without quotes).
type member struct{ start, end, key, keyEnd int }

func (c *canonicalizer) space() {
	for c.i < len(c.in) && (c.in[c.i] == ' ' || c.in[c.i] == '\t' || c.in[c.i] == '\r' || c.in[c.i] == '\n') {
		c.i++
	}
}

func (c *canonicalizer) value() bool {
	c.space()
	switch c.in[c.i] {
	case '{':
		return c.object()
	case '[':
		return c.array()
	case '"':
		_, _, ok := c.str()
		return ok
	}
	// A number or a literal: copied as written, up to the next delimiter.
	start := c.i
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			c.out = append(c.out, c.in[start:c.i]...)
			return true
		}
		c.i++
	}
	c.out = append(c.out, c.in[start:]...)
	return true
}

// str copies a string that needs no change and returns the span of its
// content in in.
func (c *canonicalizer) str() (start, end int, ok bool) {
	c.i++ // the opening quote
	start = c.i
	for c.in[c.i] != '"' {
		switch b := c.in[c.i]; {
		case b == '\\':
			return 0, 0, false
		case b == 0xe2 && c.i+2 < len(c.in) && c.in[c.i+1] == 0x80 && (c.in[c.i+2] == 0xa8 || c.in[c.i+2] == 0xa9):
			return 0, 0, false // U+2028 and U+2029 are escaped by the encoder
		}
		c.i++
	}
	end = c.i
	c.i++
	c.out = append(c.out, '"')
	c.out = append(c.out, c.in[start:end]...)
	c.out = append(c.out, '"')
	return start, end, true
}

func (c *canonicalizer) array() bool {
	c.i++
	c.out = append(c.out, '[')
	c.space()
	if c.in[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return true
	}
	for {
		if !c.value() {
			return false
		}
		c.space()
		if c.in[c.i] == ']' {
			c.i++
			c.out = append(c.out, ']')
			return true
		}
		c.i++ // ','
		c.out = append(c.out, ',')
	}
}

func (c *canonicalizer) object() bool {
	c.i++
	c.out = append(c.out, '{')
	c.space()
	if c.in[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		return true
	}
	base := len(c.members)
	for {
		c.space()
		m := member{start: len(c.out)}
		var ok bool
		if m.key, m.keyEnd, ok = c.str(); !ok {
			return false
		}
		c.space()
		c.i++ // ':'
		c.out = append(c.out, ':')
		if !c.value() {
			return false
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.space()
		if c.in[c.i] == '}' {
			c.i++
			break
		}
		c.i++ // ','
		c.out = append(c.out, ',')
	}
	ms := c.members[base:]
	sorted := true
	for j := 1; j < len(ms); j++ {
		switch bytes.Compare(c.key(ms[j-1]), c.key(ms[j])) {
		case 0:
			return false // a key twice: the decoder keeps the last
		case 1:
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(c.key(a), c.key(b)) })
		for j := 1; j < len(ms); j++ {
			if bytes.Equal(c.key(ms[j-1]), c.key(ms[j])) {
				return false // a key twice
			}
		}
		first := slices.MinFunc(ms, func(a, b member) int { return cmp.Compare(a.start, b.start) }).start
		c.tmp = c.tmp[:0]
		for j, m := range ms {
			if j > 0 {
				c.tmp = append(c.tmp, ',')
			}
			c.tmp = append(c.tmp, c.out[m.start:m.end]...)
		}
		c.out = append(c.out[:first], c.tmp...)
	}
	c.members = c.members[:base]
	c.out = append(c.out, '}')
	return true
}

func (c *canonicalizer) key(m member) []byte { return c.in[m.key:m.keyEnd] }
