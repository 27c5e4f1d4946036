package stream

import (
	"testing"
	"unicode/utf8"
)

// fuzzTagSets are the tag configurations FuzzParserTags picks from: the
// defaults, tags that share a prefix, tags that do not start with '<', a tag
// that is a prefix of another, tags that start with white space or with a
// sentence end, and a non-ASCII tag.
var fuzzTagSets = [][]string{
	defaultTags,
	{"<no_tool>", "<no_tools_at_all>", VoiceTag},
	{"[[stop]]", VoiceTag, "||"},
	{"<a>", "<a>b>", "a", VoiceTag},
	{" [t]", VoiceTag, "<no_tool>"},
	{"\n<x>", ".end", "。完", VoiceTag},
	{"【停】", VoiceTag},
}

// FuzzParserTags is FuzzParser over several tag configurations, and also
// checks that no piece of a valid UTF-8 reply holds a broken rune.
func FuzzParserTags(f *testing.F) {
	for _, s := range []string{
		"Hello <no_tool>", "<voice>Hi. 你好。<need_tool>", "a<no_tools_at_all>b<no_tool>s",
		"x[[sto]] [[stop]]|| |", "<a>b<a>b>a", "Hi. [t] ok", "Hi.\n<x>z.end 。完 。", "【停】【停",
		"好", "é<no_tool>", "\n\n<voice>Dr. Who?! 3.14\n",
	} {
		for set := range fuzzTagSets {
			f.Add(s, []byte{1, 2, 3, 0, 7}, uint8(set))
			f.Add(s, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(set)|0x80)
		}
	}
	f.Fuzz(func(t *testing.T, text string, cuts []byte, style uint8) {
		tags := fuzzTagSets[int(style&0x7f)%len(fuzzTagSets)]
		mode := ModeDeltas
		if style&0x80 != 0 {
			mode = ModeSentences
		}
		deltas := splitAt(text, cuts)
		p, ps := collect(Config{Tags: tags, Mode: mode}, deltas...)
		if got := joinRaw(ps); got != text {
			t.Fatalf("raw pieces = %q, want %q", got, text)
		}
		if p.Raw() != text {
			t.Fatalf("Raw() = %q, want %q", p.Raw(), text)
		}
		want := stripTags(text, tags)
		if got := joinText(ps); got != want {
			t.Fatalf("tags %q: text = %q, want %q (deltas %q)", tags, got, want, deltas)
		}
		voice := refVoice(text, tags)
		if p.Voice() != voice {
			t.Fatalf("tags %q: Voice() = %v, want %v", tags, p.Voice(), voice)
		}
		valid := utf8.ValidString(text)
		for i, pc := range ps {
			ref := removeTags
			if i == len(ps)-1 {
				ref = stripTags
			}
			if got := ref(pc.Raw, tags); got != pc.Text {
				t.Fatalf("tags %q: piece %d: Text %q, but Raw %q strips to %q (deltas %q)", tags, i, pc.Text, pc.Raw, got, deltas)
			}
			if pc.Voice != voice {
				t.Fatalf("piece %d Voice = %v, want %v", i, pc.Voice, voice)
			}
			if pc.Raw == "" {
				t.Fatalf("piece %d is empty", i)
			}
			if valid && (!utf8.ValidString(pc.Text) || !utf8.ValidString(pc.Raw)) {
				t.Fatalf("piece %d holds a broken rune: Text %q Raw %q (deltas %q)", i, pc.Text, pc.Raw, deltas)
			}
		}
	})
}
