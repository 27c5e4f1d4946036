package wire

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/planround/planround/stream"
)

// decoder is a small hand-written JSON reader for the common shape of a
// chat-completion chunk. It never decides that a frame is bad: whenever it
// meets something it does not handle exactly like encoding/json would
// (invalid JSON, an error frame, an escaped or case-folded key, a duplicate
// key, a float where an integer belongs, a lone surrogate, invalid UTF-8, a
// second choice with index 0, ...), fast returns false and the frame goes to
// [slowDecode], which is the reference. A fuzz test holds the two equal.
type decoder struct {
	b   []byte
	i   int
	buf []byte // scratch for unescaping strings
}

// maxDepth bounds the nesting the decoder follows before it gives up.
const maxDepth = 200

// fast decodes data into d and reports whether it could.
func (x *decoder) fast(data []byte, d *stream.Delta) bool {
	x.b, x.i = data, 0
	d.Content, d.Reasoning, d.FinishReason, d.Usage = "", "", "", nil
	d.ToolCalls = d.ToolCalls[:0]
	ok := x.chunk(d)
	x.b = nil
	return ok
}

// Known keys per object. A key that is not one of them but equals one of
// them ignoring case would be matched by encoding/json: fall back.
var (
	chunkKeys    = []string{"choices", "usage", "error"}
	choiceKeys   = []string{"index", "delta", "finish_reason"}
	deltaKeys    = []string{"content", "reasoning_content", "reasoning", "tool_calls"}
	toolCallKeys = []string{"index", "id", "function"}
	functionKeys = []string{"name", "arguments"}
	usageKeys    = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}
	promptKeys   = []string{"cached_tokens", "cache_write_tokens"}
	outputKeys   = []string{"reasoning_tokens"}
)

func (x *decoder) chunk(d *stream.Delta) bool {
	x.ws()
	ok := x.object(chunkKeys, func(k int) bool {
		switch k {
		case 0:
			return x.choices(d)
		case 1:
			return x.usage(d)
		default:
			return false // error frames take the reference path
		}
	})
	if !ok {
		return false
	}
	x.ws()
	return x.i == len(x.b)
}

// object reads an object whose known keys are keys; for each known key it
// calls val with the key's position, after the colon. Unknown keys are
// skipped. Duplicate known keys, escaped or non-ASCII keys, and keys that
// match a known one only ignoring case make it fail.
func (x *decoder) object(keys []string, val func(k int) bool) bool {
	if !x.eat('{') {
		return false
	}
	var seen uint8 // the known keys met so far, by position
	x.ws()
	if x.eat('}') {
		return true
	}
	for {
		key, ok := x.key()
		if !ok {
			return false
		}
		x.ws()
		if !x.eat(':') {
			return false
		}
		x.ws()
		k := -1
		for j, name := range keys {
			if string(key) == name {
				k = j
				break
			}
		}
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
			if !val(k) {
				return false
			}
		} else {
			for _, name := range keys {
				if len(key) == len(name) && strings.EqualFold(string(key), name) {
					return false
				}
			}
			if !x.skip(0) {
				return false
			}
		}
		x.ws()
		if x.eat(',') {
			x.ws()
			continue
		}
		return x.eat('}')
	}
}

// key reads an object key: a string of printable ASCII without escapes.
func (x *decoder) key() ([]byte, bool) {
	if !x.eat('"') {
		return nil, false
	}
	start := x.i
	for x.i < len(x.b) && keyByte[x.b[x.i]] {
		x.i++
	}
	if x.i < len(x.b) && x.b[x.i] == '"' {
		x.i++
		return x.b[start : x.i-1], true
	}
	return nil, false
}

// keyByte marks the bytes a key may hold: printable ASCII but '"' and '\\'.
// strByte marks the bytes a string may hold without a closer look: all but
// control characters, '"' and '\\'.
var keyByte, strByte = func() (k, s [256]bool) {
	for c := range 256 {
		s[c] = c >= 0x20 && c != '"' && c != '\\'
		k[c] = s[c] && c < utf8.RuneSelf
	}
	return k, s
}()

func (x *decoder) choices(d *stream.Delta) bool {
	if x.null() {
		return true
	}
	if !x.eat('[') {
		return false
	}
	x.ws()
	if x.eat(']') {
		return true
	}
	have := false // a choice with index 0 was taken
	for {
		if !x.choice(d, &have) {
			return false
		}
		x.ws()
		if x.eat(',') {
			x.ws()
			continue
		}
		return x.eat(']')
	}
}

// choice reads one choice. Only the choice with index 0 counts; the fields
// of another are read and dropped.
func (x *decoder) choice(d *stream.Delta, have *bool) bool {
	var (
		index                      int64
		content, reasoning, finish string
		calls                      = len(d.ToolCalls)
	)
	ok := x.object(choiceKeys, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			index, ok = x.intOrNull()
		case 1:
			ok = x.delta(d, &content, &reasoning)
		default:
			finish, ok = x.finishReason()
		}
		return ok
	})
	if !ok {
		return false
	}
	if index != 0 {
		d.ToolCalls = d.ToolCalls[:calls]
		return true
	}
	if *have {
		return false // several index-0 choices: let the reference decide
	}
	*have = true
	d.Content, d.Reasoning, d.FinishReason = content, reasoning, finish
	return true
}

func (x *decoder) delta(d *stream.Delta, content, reasoning *string) bool {
	if x.null() {
		return true
	}
	var rc, r string
	ok := x.object(deltaKeys, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			*content, ok = x.stringOrNull()
		case 1:
			rc, ok = x.textOrIgnore()
		case 2:
			r, ok = x.textOrIgnore()
		default:
			ok = x.toolCalls(d)
		}
		return ok
	})
	*reasoning = rc
	if rc == "" {
		*reasoning = r
	}
	return ok
}

func (x *decoder) toolCalls(d *stream.Delta) bool {
	if x.null() {
		return true
	}
	if !x.eat('[') {
		return false
	}
	x.ws()
	if x.eat(']') {
		return true
	}
	for {
		if x.peek() != '{' {
			return false
		}
		tc := stream.ToolCallDelta{Index: stream.NoIndex}
		ok := x.object(toolCallKeys, func(k int) bool {
			switch k {
			case 0:
				if x.null() {
					return true
				}
				n, ok := x.int()
				tc.Index = int(n)
				return ok
			case 1:
				var ok bool
				tc.ID, ok = x.stringOrNull()
				return ok
			default:
				return x.function(&tc)
			}
		})
		if !ok {
			return false
		}
		if !emptyCall(tc) {
			d.ToolCalls = append(d.ToolCalls, tc)
		}
		x.ws()
		if x.eat(',') {
			x.ws()
			continue
		}
		return x.eat(']')
	}
}

func (x *decoder) function(tc *stream.ToolCallDelta) bool {
	if x.null() {
		return true
	}
	return x.object(functionKeys, func(k int) bool {
		var ok bool
		if k == 0 {
			tc.Name, ok = x.stringOrNull()
		} else {
			tc.Arguments, ok = x.arguments()
		}
		return ok
	})
}

// arguments reads a function's arguments: a string (the usual case), null,
// or any other JSON value, which is kept as its JSON text.
func (x *decoder) arguments() (string, bool) {
	switch x.peek() {
	case '"', 'n':
		return x.stringOrNull()
	}
	start := x.i
	if !x.skip(0) {
		return "", false
	}
	return string(x.b[start:x.i]), true
}

func (x *decoder) usage(d *stream.Delta) bool {
	if x.null() {
		return true
	}
	u := new(stream.Usage)
	ok := x.object(usageKeys, func(k int) bool {
		switch k {
		case 3:
			return x.tokenDetails(promptKeys, &u.CacheReadTokens, &u.CacheWriteTokens)
		case 4:
			return x.tokenDetails(outputKeys, &u.ReasoningTokens, nil)
		}
		if x.null() {
			return true
		}
		n, ok := x.int()
		switch k {
		case 0:
			u.PromptTokens = n
		case 1:
			u.CompletionTokens = n
		default:
			u.TotalTokens = n
		}
		return ok
	})
	d.Usage = u
	return ok
}

// tokenDetails reads a usage details object (prompt_tokens_details,
// completion_tokens_details) whose known keys are keys, into first and
// second. Anything but null or an object falls back.
func (x *decoder) tokenDetails(keys []string, first, second *int64) bool {
	if x.null() {
		return true
	}
	return x.object(keys, func(k int) bool {
		if x.null() {
			return true
		}
		n, ok := x.int()
		if k == 0 {
			*first = n
		} else {
			*second = n
		}
		return ok
	})
}

// finishReason reads a finish_reason, sharing the strings of the common
// values.
func (x *decoder) finishReason() (string, bool) {
	if x.null() {
		return "", true
	}
	raw, esc, ok := x.str()
	if !ok || esc {
		return "", false
	}
	for _, s := range [...]string{"stop", "tool_calls", "length", "content_filter", "function_call"} {
		if string(raw) == s {
			return s, true
		}
	}
	return x.makeString(raw, false)
}

// textOrIgnore reads a reasoning field: a string, or anything else, which
// is skipped and counts as no text.
func (x *decoder) textOrIgnore() (string, bool) {
	if x.peek() == '"' {
		return x.stringOrNull()
	}
	return "", x.skip(0)
}

func (x *decoder) stringOrNull() (string, bool) {
	if x.null() {
		return "", true
	}
	raw, esc, ok := x.str()
	if !ok {
		return "", false
	}
	return x.makeString(raw, esc)
}

// makeString turns a string token's raw bytes into a Go string, or fails
// for input encoding/json would alter (invalid UTF-8, lone surrogates).
func (x *decoder) makeString(raw []byte, esc bool) (string, bool) {
	if !esc {
		if !utf8.Valid(raw) {
			return "", false
		}
		return string(raw), true
	}
	b := x.buf[:0]
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			if !utf8.Valid(raw[i:j]) {
				return "", false
			}
			b = append(b, raw[i:j]...)
			i = j
			continue
		}
		// str validated the escapes.
		switch raw[i+1] {
		case '"', '\\', '/':
			b = append(b, raw[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(raw[i+2 : i+6])
			if utf16.IsSurrogate(r) {
				if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, hex4(raw[i+8:i+12]))
				if r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
			i += 6
			continue
		}
		i += 2
	}
	x.buf = b
	return string(b), true
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// str reads a string token and returns its raw content (between the
// quotes) and whether it holds escapes. Escapes are validated; control
// characters make it fail.
func (x *decoder) str() (raw []byte, esc bool, ok bool) {
	if !x.eat('"') {
		return nil, false, false
	}
	start := x.i
	for x.i < len(x.b) {
		for x.i < len(x.b) && strByte[x.b[x.i]] {
			x.i++
		}
		if x.i == len(x.b) {
			break
		}
		c := x.b[x.i]
		switch {
		case c == '"':
			x.i++
			return x.b[start : x.i-1], esc, true
		case c == '\\':
			esc = true
			if x.i+1 >= len(x.b) {
				return nil, false, false
			}
			switch x.b[x.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				x.i += 2
			case 'u':
				if x.i+6 > len(x.b) {
					return nil, false, false
				}
				for _, h := range x.b[x.i+2 : x.i+6] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				x.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			x.i++
		}
	}
	return nil, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// intOrNull reads an integer or null (0).
func (x *decoder) intOrNull() (int64, bool) {
	if x.null() {
		return 0, true
	}
	return x.int()
}

// int reads a plain integer of at most 15 digits; a fraction, an exponent
// or more digits make it fail (encoding/json's rules differ there).
func (x *decoder) int() (int64, bool) {
	neg := x.eat('-')
	start := x.i
	var n int64
	for x.i < len(x.b) && x.b[x.i] >= '0' && x.b[x.i] <= '9' {
		n = n*10 + int64(x.b[x.i]-'0')
		x.i++
	}
	digits := x.i - start
	if digits == 0 || digits > 15 || (digits > 1 && x.b[start] == '0') {
		return 0, false
	}
	if x.i < len(x.b) {
		switch x.b[x.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// skip reads and validates any JSON value.
func (x *decoder) skip(depth int) bool {
	if depth > maxDepth || x.i >= len(x.b) {
		return false
	}
	switch c := x.b[x.i]; {
	case c == '"':
		_, _, ok := x.str()
		return ok
	case c == '{':
		x.i++
		x.ws()
		if x.eat('}') {
			return true
		}
		for {
			if _, _, ok := x.str(); !ok {
				return false
			}
			x.ws()
			if !x.eat(':') {
				return false
			}
			x.ws()
			if !x.skip(depth + 1) {
				return false
			}
			x.ws()
			if x.eat(',') {
				x.ws()
				continue
			}
			return x.eat('}')
		}
	case c == '[':
		x.i++
		x.ws()
		if x.eat(']') {
			return true
		}
		for {
			if !x.skip(depth + 1) {
				return false
			}
			x.ws()
			if x.eat(',') {
				x.ws()
				continue
			}
			return x.eat(']')
		}
	case c == '-' || c >= '0' && c <= '9':
		return x.number()
	case c == 't':
		return x.lit("true")
	case c == 'f':
		return x.lit("false")
	case c == 'n':
		return x.lit("null")
	}
	return false
}

// number reads a number per the JSON grammar.
func (x *decoder) number() bool {
	x.eat('-')
	switch {
	case x.eat('0'):
	case x.i < len(x.b) && x.b[x.i] >= '1' && x.b[x.i] <= '9':
		x.digits()
	default:
		return false
	}
	if x.eat('.') && !x.digits() {
		return false
	}
	if x.eat('e') || x.eat('E') {
		if !x.eat('+') {
			x.eat('-')
		}
		if !x.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (x *decoder) digits() bool {
	start := x.i
	for x.i < len(x.b) && x.b[x.i] >= '0' && x.b[x.i] <= '9' {
		x.i++
	}
	return x.i > start
}

func (x *decoder) lit(s string) bool {
	if len(x.b)-x.i >= len(s) && string(x.b[x.i:x.i+len(s)]) == s {
		x.i += len(s)
		return true
	}
	return false
}

func (x *decoder) null() bool { return x.lit("null") }

func (x *decoder) ws() {
	for x.i < len(x.b) {
		switch x.b[x.i] {
		case ' ', '\t', '\n', '\r':
			x.i++
		default:
			return
		}
	}
}

func (x *decoder) eat(c byte) bool {
	if x.i < len(x.b) && x.b[x.i] == c {
		x.i++
		return true
	}
	return false
}

func (x *decoder) peek() byte {
	if x.i < len(x.b) {
		return x.b[x.i]
	}
	return 0
}

// emptyCall reports whether a fragment carries nothing at all.
func emptyCall(tc stream.ToolCallDelta) bool {
	return tc.Index == stream.NoIndex && tc.ID == "" && tc.Name == "" && tc.Arguments == ""
}
