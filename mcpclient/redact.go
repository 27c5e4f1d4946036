package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/jsonw"
)

// redactor replaces the secrets of a server's configuration by "[redacted]".
//
// Its rule is that of a strings.Replacer given the secrets longest first:
// the text is read from its start, and at each position the longest secret
// that begins there is replaced, and reading goes on after it. String
// applies the rule to a whole text; a [streamRedactor] applies it to text
// that comes in pieces, with the same result.
//
// The zero redactor has nothing to redact.
type redactor struct{ *secretSet }

// secretSet is what a redactor with secrets knows.
type secretSet struct {
	list    []string // longest first, without duplicates or empty strings
	rep     *strings.Replacer
	longest int       // len(list[0])
	starts  [256]bool // the first bytes of the secrets
}

const redacted = "[redacted]"

func newRedactor(secrets []string) redactor {
	secrets = slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return s == "" })
	// The longest first, so that a secret containing another is replaced
	// whole.
	slices.SortFunc(secrets, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	secrets = slices.Compact(secrets)
	if len(secrets) == 0 {
		return redactor{}
	}
	set := &secretSet{list: secrets, longest: len(secrets[0])}
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, redacted)
		set.starts[s[0]] = true
	}
	set.rep = strings.NewReplacer(pairs...)
	return redactor{set}
}

// String returns s with its secrets redacted.
func (r redactor) String(s string) string {
	if r.secretSet == nil {
		return s
	}
	return r.rep.Replace(s)
}

// unredact returns the one of originals that reads given once redacted,
// or given when none or several do: what a person or the model names as
// it was shown to them, as the server wrote it.
func (r redactor) unredact(given string, originals []string) string {
	found := ""
	for _, o := range originals {
		if o != given && r.String(o) == given {
			if found != "" && found != o {
				return given
			}
			found = o
		}
	}
	if found == "" {
		return given
	}
	return found
}

// settled returns the length of the head of text that holds no beginning of
// a secret which text ends before: cut there, text shows no part of a
// secret once redacted.
func (r redactor) settled(text string) int {
	if r.secretSet == nil {
		return len(text)
	}
	return r.pending(text, 0)
}

// next returns the position and length of the first secret in text at or
// after from (the longest of those beginning there), or -1. A nil set has
// none.
func (s *secretSet) next(text string, from int) (pos, n int) {
	pos = -1
	if s == nil {
		return pos, 0
	}
	for _, secret := range s.list {
		end := len(text)
		if pos >= 0 {
			// Only a secret beginning before pos comes first; one beginning
			// at pos is not longer.
			end = min(end, pos-1+len(secret))
		}
		if end-from < len(secret) {
			continue
		}
		if j := strings.Index(text[from:end], secret); j >= 0 {
			pos, n = from+j, len(secret)
		}
	}
	return pos, n
}

// pending returns the first position at or after from where text's rest is
// the beginning of a secret longer than that rest: whether a secret begins
// there is known only with the text that follows. It returns len(text) when
// there is none. Such a position is among the last longest-1 bytes.
func (s *secretSet) pending(text string, from int) int {
	if s == nil {
		return len(text)
	}
	for p := max(from, len(text)-s.longest+1); p < len(text); p++ {
		if !s.starts[text[p]] {
			continue
		}
		rest := text[p:]
		for _, secret := range s.list {
			if len(secret) <= len(rest) {
				break // the others are shorter still
			}
			if strings.HasPrefix(secret, rest) {
				return p
			}
		}
	}
	return len(text)
}

// streamRedactor redacts text that comes in pieces and passes it on to out
// as it comes. What it passes on, put together, is the redaction (see
// [redactor]) of what it was given put together, so that a secret split
// between two pieces is redacted as well as a whole one: it holds back the
// end of a piece that may be the beginning of a secret (shorter than the
// longest secret) until the next piece tells, or until end.
//
// A piece may end a line. The line break is passed on where the line ends,
// but it is not part of the text that secrets are looked for in, so that a
// secret split between two lines is redacted too; a break that falls inside
// a secret is passed on after its "[redacted]".
//
// A streamRedactor is not safe for concurrent use. Writing a piece
// allocates nothing when nothing is held back from the piece before.
type streamRedactor struct {
	red    *secretSet
	out    agent.Progress
	held   string // text given and not passed on
	breaks []int  // the offsets in held after which a line ends
	buf    []byte // what is passed on, reused
}

// write takes s, the next piece, as the end of a line when line is set.
func (w *streamRedactor) write(s string, line bool) {
	text := s
	if w.held != "" {
		text = w.held + s
	}
	if line {
		w.breaks = append(w.breaks, len(text))
	}
	w.pass(text, false)
}

// end passes on what is held back.
func (w *streamRedactor) end() {
	w.pass(w.held, true)
}

// pass passes on the redaction of text (held back and new), all of it when
// final, else up to where a later piece could change it; it holds back the
// rest.
func (w *streamRedactor) pass(text string, final bool) {
	w.buf = w.buf[:0]
	i, b := 0, 0 // text[:i] and breaks[:b] are in buf
	for {
		end := len(text)
		if !final {
			end = w.red.pending(text, i)
		}
		pos, n := w.red.next(text, i)
		if pos >= 0 && pos < end {
			// Settled: no secret begins before pos, and no longer one can
			// begin at pos, or pos would be pending.
			b = w.literal(text, i, pos, b)
			w.buf = append(w.buf, redacted...)
			i = pos + n
			for ; b < len(w.breaks) && w.breaks[b] <= i; b++ {
				w.buf = append(w.buf, '\n')
			}
			continue
		}
		if i == 0 && (len(w.breaks) == 0 || w.breaks[0] > end) {
			// Nothing redacted and no line ended: text's head as it is.
			if end > 0 {
				w.out.WriteString(text[:end])
			}
		} else {
			b = w.literal(text, i, end, b)
			if len(w.buf) > 0 {
				w.out.Write(w.buf)
			}
		}
		w.held = text[end:]
		k := copy(w.breaks, w.breaks[b:])
		w.breaks = w.breaks[:k]
		for j := range w.breaks {
			w.breaks[j] -= end
		}
		return
	}
}

// literal adds text[i:j], which holds no secret, to buf, with the line
// breaks from breaks[b] that fall in it, and returns the index of the
// first break after it.
func (w *streamRedactor) literal(text string, i, j, b int) int {
	for ; b < len(w.breaks) && w.breaks[b] <= j; b++ {
		w.buf = append(w.buf, text[i:w.breaks[b]]...)
		w.buf = append(w.buf, '\n')
		i = w.breaks[b]
	}
	w.buf = append(w.buf, text[i:j]...)
	return b
}

// redactingProgress is the Progress of one call with secrets redacted: the
// lines of the server's progress notifications (writeLine) and anything
// written go through one streamRedactor, so that a secret split between two
// notifications is redacted too. end passes on what is held back; the
// call's end must call it before the call returns, so that the agent has
// all of the partial output, also when the run was interrupted. What comes
// after end (a notification that raced with the call's end) is dropped.
type redactingProgress struct {
	mu    sync.Mutex // guards w and ended
	w     streamRedactor
	ended bool
}

func newRedactingProgress(p agent.Progress, red redactor) *redactingProgress {
	return &redactingProgress{w: streamRedactor{red: red.secretSet, out: p}}
}

func (p *redactingProgress) Write(b []byte) (int, error) {
	p.write(string(b), false)
	return len(b), nil
}

func (p *redactingProgress) WriteString(s string) (int, error) {
	p.write(s, false)
	return len(s), nil
}

// writeLine writes s as a line of its own.
func (p *redactingProgress) writeLine(s string) { p.write(s, true) }

func (p *redactingProgress) write(s string, line bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended {
		p.w.write(s, line)
	}
}

// end passes on what is held back. Later writes are dropped.
func (p *redactingProgress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended {
		p.ended = true
		p.w.end()
	}
}

// lineWriter is a Progress that takes a progress notification's line
// without its line break (redactingProgress).
type lineWriter interface {
	writeLine(s string)
}

// secretForms returns the ways a secret may be written in what a server
// sends: as it is; without its line breaks, for a secret of several lines
// (a key whose lines came one per progress message); and escaped as JSON
// encoders write it in a string (a raw JSON body that an error quotes):
// Go's encoding/json (with < > & escaped), JavaScript's JSON.stringify,
// Python's json.dumps (non-ASCII escaped) and PHP's json_encode (non-ASCII
// and / escaped).
func secretForms(s string) []string {
	forms := []string{s}
	if strings.ContainsAny(s, "\r\n") {
		forms = append(forms, strings.NewReplacer("\r", "", "\n", "").Replace(s))
	}
	forms = append(forms,
		jsonEscape(s, true, false, false),
		jsonEscape(s, false, false, false),
		jsonEscape(s, false, true, false),
		jsonEscape(s, false, true, true))
	return slices.Compact(forms)
}

// jsonEscape writes s as in a JSON string, without the quotes: with < > &
// (and U+2028, U+2029) escaped when html is set, every non-ASCII character
// when ascii is, and / when slash is.
func jsonEscape(s string, html, ascii, slash bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20,
			html && (r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029),
			ascii && r > 0x7f && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case ascii && r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		case slash && r == '/':
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// jsonStrings returns raw, a JSON text, with the secrets redacted in its
// strings that hold an escape: a server's encoder may write a secret's &
// as \u0026, which redacting the text as it is would miss. Such a string
// is decoded, and written again when it held a secret. The caller redacts
// the rest of the text as it is.
func (r redactor) jsonStrings(raw []byte) []byte {
	if r.secretSet == nil {
		return raw
	}
	var out []byte // nil until a string is written again
	last := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		// The end of the string, and whether it has an escape.
		j, escaped := i+1, false
		for j < len(raw) && raw[j] != '"' {
			if raw[j] == '\\' {
				escaped = true
				j++
			}
			j++
		}
		if j >= len(raw) {
			break // not JSON
		}
		if escaped {
			var s string
			if json.Unmarshal(raw[i:j+1], &s) == nil {
				if red := r.String(s); red != s {
					out = append(out, raw[last:i]...)
					out = jsonw.AppendString(out, red)
					last = j + 1
				}
			}
		}
		i = j
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// schemaRedaction is what redacting a tool's input schema changed.
type schemaRedaction struct {
	// keys maps each object key that held a secret, redacted, back to the
	// key as the server wrote it: the model names a property as it reads
	// it, and the call gives the server the name it knows.
	keys map[string]string
	// seen maps every key as redacted to the key as written.
	seen map[string]string
	// clash is a key, redacted, that two keys as written would both read
	// as, so that the model's arguments could not be told apart.
	clash string
}

// schema returns v, a JSON value as encoding/json decodes it into an any,
// with the secrets redacted in every string, number and object key. The
// keys that held a secret are noted in sr.
func (r redactor) schema(v any, sr *schemaRedaction) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			rk := r.String(k)
			if sr.seen == nil {
				sr.seen = make(map[string]string)
			}
			if prev, ok := sr.seen[rk]; ok && prev != k {
				sr.clash = rk
			}
			sr.seen[rk] = k
			if rk != k {
				if sr.keys == nil {
					sr.keys = make(map[string]string)
				}
				sr.keys[rk] = k
			}
			out[rk] = r.schema(x, sr)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.schema(x, sr)
		}
		return out
	case string:
		return r.String(v)
	case float64, json.Number:
		b, err := json.Marshal(v)
		if err != nil {
			return v
		}
		if s := string(b); r.String(s) != s {
			return r.String(s) // a number holding a secret becomes a string
		}
	}
	return v
}

// restoreKeys returns args, a JSON object, with every object key that keys
// has (a property name as the model read it) written as the server wrote
// it. Arguments that are not JSON go as they are: the server says what is
// wrong.
func restoreKeys(args json.RawMessage, keys map[string]string) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return args
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(renameKeys(v, keys)) != nil {
		return args
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func renameKeys(v any, keys map[string]string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if orig, ok := keys[k]; ok {
				k = orig
			}
			out[k] = renameKeys(x, keys)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = renameKeys(x, keys)
		}
	}
	return v
}

// nameForms returns the secrets as a tool's name would hold them once made
// a valid function name (see sanitizeName), where that differs: a server
// that builds a tool's name from a secret must have made it valid too.
// Forms with fewer than minSecret letters and digits are left out, since
// they would redact names that hold no secret.
func nameForms(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		f := sanitizeName(s)
		if f == s {
			continue
		}
		if n := len(f) - strings.Count(f, "_") - strings.Count(f, "-"); n >= minSecret {
			out = append(out, f)
		}
	}
	return out
}
