package stream

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// stripTags is the reference: a leftmost scan that removes every complete
// tag (the longest one where several match).
func stripTags(s string, tags []string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		n := 0
		for _, t := range tags {
			if len(t) > n && strings.HasPrefix(s[i:], t) {
				n = len(t)
			}
		}
		if n > 0 {
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// refVoice is the reference voice flag: after leading ASCII white space and
// non-voice tags, the reply starts with VoiceTag.
func refVoice(s string, tags []string) bool {
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], VoiceTag) {
			return true
		}
		n := 0
		for _, t := range tags {
			if len(t) > n && strings.HasPrefix(s[i:], t) {
				n = len(t)
			}
		}
		switch {
		case n > 0:
			i += n
		case isSpace(s[i]):
			i++
		default:
			return false
		}
	}
	return false
}

// splitAt cuts s into deltas of the lengths cuts give (1..8 bytes each).
func splitAt(s string, cuts []byte) []string {
	var out []string
	for _, c := range cuts {
		n := int(c)%8 + 1
		if n >= len(s) {
			break
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func FuzzParser(f *testing.F) {
	for _, s := range []string{
		"Hello <no_tool>", "<voice>Hi. 你好。<need_tool>", " \n<no_tool><voice>ok", "a < b <div> <no_toolbox",
		"3.14 is pi. Dr. Who?! yes\nno", "<<voice>>", "<no_<no_tool>tool>", "end.", "x<need_t", "好\xe3\x80",
	} {
		f.Add(s, []byte{1, 2, 3, 0, 7}, false)
		f.Add(s, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	}
	f.Fuzz(func(t *testing.T, text string, cuts []byte, sentences bool) {
		mode := ModeDeltas
		if sentences {
			mode = ModeSentences
		}
		deltas := splitAt(text, cuts)
		p, ps := collect(Config{Mode: mode}, deltas...)
		if got := joinRaw(ps); got != text {
			t.Fatalf("raw pieces = %q, want %q", got, text)
		}
		if p.Raw() != text {
			t.Fatalf("Raw() = %q, want %q", p.Raw(), text)
		}
		want := stripTags(text, DefaultTags)
		if got := joinText(ps); got != want {
			t.Fatalf("text = %q, want %q (deltas %q)", got, want, deltas)
		}
		voice := refVoice(text, DefaultTags)
		if p.Voice() != voice {
			t.Fatalf("Voice() = %v, want %v", p.Voice(), voice)
		}
		for i, pc := range ps {
			// Each piece is whole: its Text is its Raw without tags, so no
			// part of a tag ever shows as text.
			if got := stripTags(pc.Raw, DefaultTags); got != pc.Text {
				t.Fatalf("piece %d: Text %q, but Raw %q strips to %q (deltas %q)", i, pc.Text, pc.Raw, got, deltas)
			}
			if pc.Voice != voice {
				t.Fatalf("piece %d Voice = %v, want %v", i, pc.Voice, voice)
			}
			if pc.Raw == "" {
				t.Fatalf("piece %d is empty", i)
			}
			if mode == ModeSentences && i < len(ps)-1 && pc.Text != "" && !endsSentence(pc.Text) {
				t.Fatalf("piece %d %q does not end a sentence (deltas %q)", i, pc.Text, deltas)
			}
		}
	})
}

// endsSentence reports whether s ends like a sentence piece.
func endsSentence(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	switch r {
	case '\n', '。', '！', '？':
		return true
	}
	if !unicode.IsSpace(r) || n == len(s) {
		return false
	}
	prev := s[len(s)-n-1]
	return prev == '.' || prev == '!' || prev == '?'
}

func FuzzAccumulator(f *testing.F) {
	f.Add(`{"city": "Paris", "days": [1, 2]}`, []byte{3, 1, 4, 1, 5}, uint8(0))
	f.Add(`{}`, []byte{}, uint8(1))
	f.Add(`{"q":"<no_tool> 你好"}`, []byte{0, 0, 0}, uint8(2))
	f.Fuzz(func(t *testing.T, args string, cuts []byte, style uint8) {
		var a Accumulator
		parts := splitAt(args, cuts)
		for i, p := range parts {
			d := ToolCallDelta{Index: int(style % 3), Arguments: p}
			if style&4 != 0 {
				d.Index = NoIndex
			}
			if i == 0 || style&8 != 0 {
				d.ID = "call_x" // on every fragment, or on the first only
			}
			if i == 0 {
				d.Name = "f"
			} else if style&16 != 0 {
				d.Name = "" // explicit empty name on continuations
			}
			a.Add(d)
		}
		calls := a.Calls()
		if len(calls) != 1 {
			t.Fatalf("calls = %+v, want one", calls)
		}
		if c := calls[0]; c.Arguments != args || c.Name != "f" || c.ID != "call_x" {
			t.Fatalf("call = %+v, want arguments %q, name f, id call_x", c, args)
		}
	})
}
