package stream

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// leftmostTag returns where the leftmost tag in s starts and its length
// (the longest of the tags that start there), or -1.
func leftmostTag(s string, tags []string) (at, n int) {
	for i := 0; i < len(s); i++ {
		for _, t := range tags {
			if len(t) > n && strings.HasPrefix(s[i:], t) {
				n = len(t)
			}
		}
		if n > 0 {
			return i, n
		}
	}
	return -1, 0
}

// stripTags is the reference for the visible text of a whole reply, the
// slow way: remove the leftmost tag again and again until none is left,
// then remove a proper prefix of a tag at the very end (a tag cut short;
// the longest such suffix) again and again.
func stripTags(s string, tags []string) string {
	return dropCutTag(removeTags(s, tags), tags)
}

// removeTags removes the leftmost tag again and again until none is left.
// It is the reference for a piece that is not the last: the reply goes on
// after it.
func removeTags(s string, tags []string) string {
	for {
		at, n := leftmostTag(s, tags)
		if at < 0 {
			return s
		}
		s = s[:at] + s[at+n:]
	}
}

// dropCutTag removes the longest suffix of s that is a proper prefix of a
// tag, again and again.
func dropCutTag(s string, tags []string) string {
	for {
		n := 0
		for k := 1; k <= len(s); k++ {
			for _, t := range tags {
				if len(t) > k && strings.HasPrefix(t, s[len(s)-k:]) {
					n = k
				}
			}
		}
		if n == 0 {
			return s
		}
		s = s[:len(s)-n]
	}
}

// refVoice is the reference voice flag: while tags are removed leftmost
// first, the first one found with nothing but ASCII white space before it
// is VoiceTag.
func refVoice(s string, tags []string) bool {
	for {
		at, n := leftmostTag(s, tags)
		end := at
		if at < 0 {
			end = len(s)
		}
		for i := range end {
			if !isSpace(s[i]) {
				return false
			}
		}
		if at < 0 {
			return false
		}
		if s[at:at+n] == VoiceTag {
			return true
		}
		s = s[:at] + s[at+n:]
	}
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
		"Hi <no_<need_tool>tool>", "a<no_<ne<no_tool>ed_tool>tool>b", "<vo<no_tool>ice>Hi. x<no_<ne", " <<voice>>. <",
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
		want := stripTags(text, defaultTags)
		if got := joinText(ps); got != want {
			t.Fatalf("text = %q, want %q (deltas %q)", got, want, deltas)
		}
		voice := refVoice(text, defaultTags)
		if p.Voice() != voice {
			t.Fatalf("Voice() = %v, want %v", p.Voice(), voice)
		}
		for i, pc := range ps {
			// Each piece is whole: its Text is its Raw without tags (and,
			// for the last, without a tag cut short at its end), so no part
			// of a tag ever shows as text.
			ref := removeTags
			if i == len(ps)-1 {
				ref = stripTags
			}
			if got := ref(pc.Raw, defaultTags); got != pc.Text {
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
