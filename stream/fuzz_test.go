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
	f.Add(`{"a":1}`, []byte{1, 1}, uint8(32|4|8))  // two calls, no index, id on every fragment: interleaved
	f.Add(`{"a":1}`, []byte{1, 1}, uint8(32|4))    // two calls, no index, id on the first: one after the other
	f.Add(`{"a":1}`, []byte{2}, uint8(32|64|4|16)) // two calls, no index, no id at all
	f.Add(`{"a":1}`, []byte{0, 3}, uint8(32|1))    // two calls, indexes 1 and 2, interleaved
	f.Fuzz(func(t *testing.T, args string, cuts []byte, style uint8) {
		// style: bits 0-1 index base, 4 no index, 8 id on every fragment,
		// 16 explicit empty name on continuations, 32 a second call, 64 no
		// ids at all.
		var a Accumulator
		parts := splitAt(args, cuts)
		type callDef struct{ id, name string }
		defs := []callDef{{"call_x", "f"}}
		if style&32 != 0 {
			defs = append(defs, callDef{"call_y", "g"})
		}
		noIDs := style&64 != 0
		// fragment returns fragment i of call k.
		fragment := func(k, i int) ToolCallDelta {
			d := ToolCallDelta{Index: int(style%3) + k, Arguments: parts[i]}
			if style&4 != 0 {
				d.Index = NoIndex
			}
			if !noIDs && (i == 0 || style&8 != 0) {
				d.ID = defs[k].id // on every fragment, or on the first only
			}
			if i == 0 {
				d.Name = defs[k].name
			} else if style&16 != 0 {
				d.Name = "" // explicit empty name on continuations
			}
			return d
		}
		// Fragments of two calls interleave when something tells them
		// apart: an index, or an id on every fragment. Otherwise the second
		// call follows the first.
		interleave := len(defs) == 2 && (style&4 == 0 || (style&8 != 0 && !noIDs))
		if interleave {
			for i := range parts {
				for k := range defs {
					a.Add(fragment(k, i))
				}
			}
		} else {
			for k := range defs {
				for i := range parts {
					a.Add(fragment(k, i))
				}
			}
		}
		calls := a.Calls()
		if len(calls) != len(defs) {
			t.Fatalf("calls = %+v, want %d (interleaved %v)", calls, len(defs), interleave)
		}
		for k, c := range calls {
			if c.Arguments != args || c.Name != defs[k].name {
				t.Fatalf("call %d = %+v, want arguments %q, name %s", k, c, args, defs[k].name)
			}
			if noIDs {
				if !strings.HasPrefix(c.ID, "call_") || c.ID == calls[len(calls)-1-k].ID && len(calls) > 1 {
					t.Fatalf("call %d id = %q, want a generated id of its own", k, c.ID)
				}
			} else if c.ID != defs[k].id {
				t.Fatalf("call %d id = %q, want %s", k, c.ID, defs[k].id)
			}
		}
	})
}
