package stream

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// collect runs deltas through a parser and returns the pieces, Write and
// Flush together.
func collect(cfg Config, deltas ...string) (*Parser, []Piece) {
	p := NewParser(cfg)
	var out []Piece
	emit := func(pc Piece) { out = append(out, pc) }
	for _, d := range deltas {
		p.Write(d, emit)
	}
	p.Flush(emit)
	return p, out
}

// texts returns the Text of every piece, empty ones included.
func texts(ps []Piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Text
	}
	return out
}

func joinText(ps []Piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

func joinRaw(ps []Piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Raw)
	}
	return b.String()
}

func TestParserDeltas(t *testing.T) {
	tests := []struct {
		name   string
		deltas []string
		text   string
		voice  bool
		// afterFirst is what the first Write alone must have emitted
		// (visible text), to check that nothing is held back needlessly.
		afterFirst *string
	}{
		{name: "plain", deltas: []string{"Hello", " world"}, text: "Hello world", afterFirst: ptr("Hello")},
		{name: "tag split in two", deltas: []string{"Done. <no_", "tool>"}, text: "Done. ", afterFirst: ptr("Done. ")},
		{name: "tag one char at a time", deltas: strings.Split("ok<need_tool>", ""), text: "ok"},
		{name: "less than flows", deltas: []string{"a < b", " ok"}, text: "a < b ok", afterFirst: ptr("a < b")},
		{name: "html flows", deltas: []string{"<div>", "x"}, text: "<div>x", afterFirst: ptr("<div>")},
		{name: "near miss flows", deltas: []string{"<no_toolbox", "!"}, text: "<no_toolbox!", afterFirst: ptr("<no_toolbox")},
		{name: "held prefix", deltas: []string{"see <no_t", "ea>"}, text: "see <no_tea>", afterFirst: ptr("see ")},
		{name: "partial tag at end never shows", deltas: []string{"x <need_to"}, text: "x "},
		{name: "lone lt at end never shows", deltas: []string{"1 <"}, text: "1 "},
		{name: "double lt", deltas: []string{"<<no_tool>"}, text: ""},
		{name: "lt before a tag in the middle", deltas: []string{"<<no_tool>x"}, text: "<x"},
		{name: "nested tag", deltas: []string{"Hi <no_<need_tool>tool>"}, text: "Hi "},
		{name: "nested tag split", deltas: []string{"Hi <no_", "<need_", "tool>", "tool>!"}, text: "Hi !", afterFirst: ptr("Hi ")},
		{name: "nested partial at end", deltas: []string{"Hi <no_<ne"}, text: "Hi "},
		{name: "nested twice", deltas: []string{"a<no_<ne<no_tool>ed_tool>tool>b"}, text: "ab"},
		{name: "nested voice", deltas: []string{"x<voi<no_tool>ce>y"}, text: "xy"},
		{name: "partial then text", deltas: []string{"<no_", "x>"}, text: "<no_x>"},
		{name: "tag in the middle", deltas: []string{"a<no_tool>b"}, text: "ab"},
		{name: "two tags", deltas: []string{"a<no_tool>b<need_tool>c"}, text: "abc"},
		{name: "voice", deltas: []string{"<voice>Hi", " there"}, text: "Hi there", voice: true},
		{name: "voice split", deltas: []string{"<vo", "ice>", "Hi"}, text: "Hi", voice: true},
		{name: "voice after space and intent tag", deltas: []string{" \n<no_tool>", " <voice>Hello"}, text: " \n Hello", voice: true},
		{name: "voice later is not voice", deltas: []string{"Hi <voice>there"}, text: "Hi there", voice: false},
		{name: "no voice holds only whitespace", deltas: []string{"  ", "Hey"}, text: "  Hey"},
		{name: "only tags", deltas: []string{"<no_tool>"}, text: ""},
		{name: "empty", deltas: nil, text: ""},
		{name: "cjk", deltas: []string{"你好", "<no_", "tool>"}, text: "你好"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.afterFirst != nil {
				p := NewParser(Config{})
				var got strings.Builder
				p.Write(tt.deltas[0], func(pc Piece) { got.WriteString(pc.Text) })
				if got.String() != *tt.afterFirst {
					t.Errorf("after first delta: text = %q, want %q", got.String(), *tt.afterFirst)
				}
			}
			p, ps := collect(Config{}, tt.deltas...)
			all := strings.Join(tt.deltas, "")
			if got := joinText(ps); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
			if got := joinRaw(ps); got != all {
				t.Errorf("raw pieces = %q, want %q", got, all)
			}
			if got := p.Raw(); got != all {
				t.Errorf("Raw() = %q, want %q", got, all)
			}
			if p.Voice() != tt.voice {
				t.Errorf("Voice() = %v, want %v", p.Voice(), tt.voice)
			}
			for i, pc := range ps {
				if pc.Voice != tt.voice {
					t.Errorf("piece %d Voice = %v, want %v", i, pc.Voice, tt.voice)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestParserSentences(t *testing.T) {
	tests := []struct {
		name   string
		deltas []string
		want   []string // visible text of each piece
	}{
		{name: "latin", deltas: []string{"Hi there. How", " are you? Fine!"}, want: []string{"Hi there. ", "How are you? ", "Fine!"}},
		{name: "cjk immediate", deltas: []string{"你好。今天", "天气很好！真的？"}, want: []string{"你好。", "今天天气很好！", "真的？"}},
		{name: "pi is not an end", deltas: []string{"Pi is 3.14 today. Yes"}, want: []string{"Pi is 3.14 today. ", "Yes"}},
		{name: "dot at delta end waits", deltas: []string{"It costs 3.", "5 euros. Ok"}, want: []string{"It costs 3.5 euros. ", "Ok"}},
		{name: "dot at delta end then space", deltas: []string{"End.", " Next"}, want: []string{"End. ", "Next"}},
		{name: "newline", deltas: []string{"line one\nline", " two"}, want: []string{"line one\n", "line two"}},
		{name: "ellipsis and interrobang", deltas: []string{"Wait... What?! Ok"}, want: []string{"Wait... ", "What?! ", "Ok"}},
		{name: "abbreviation splits", deltas: []string{"Ask Dr. Smith."}, want: []string{"Ask Dr. ", "Smith."}},
		{name: "tag at the end", deltas: []string{"Sure. I will<need_", "tool>"}, want: []string{"Sure. ", "I will"}},
		{name: "tag after sentence", deltas: []string{"Sure. <no_tool>"}, want: []string{"Sure. ", ""}},
		{name: "split cjk bytes", deltas: []string{"好\xe3", "\x80\x82再"}, want: []string{"好。", "再"}},
		{name: "ideographic space after dot", deltas: []string{"A.\u3000B"}, want: []string{"A.\u3000", "B"}},
		{name: "voice and sentences", deltas: []string{"<voice>One. Two."}, want: []string{"One. ", "Two."}},
		{name: "leading newlines stay with the first sentence", deltas: []string{"\n\nHi. Yo"}, want: []string{"\n\nHi. ", "Yo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := collect(Config{Mode: ModeSentences}, tt.deltas...)
			got := texts(ps)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("pieces = %q, want %q", got, tt.want)
			}
			if raw := joinRaw(ps); raw != strings.Join(tt.deltas, "") {
				t.Errorf("raw = %q, want %q", raw, strings.Join(tt.deltas, ""))
			}
		})
	}
}

func TestParserCustomTagsAndReset(t *testing.T) {
	p := NewParser(Config{Tags: []string{"", "[[end]]", "<voice>", "<voice>++"}})
	var out []Piece
	emit := func(pc Piece) { out = append(out, pc) }
	p.Write("<voice", emit)
	p.Write(">+", emit) // could still become <voice>++
	if len(out) != 0 {
		t.Fatalf("emitted %v before the tag was known", out)
	}
	p.Write("+hi [[en", emit)
	p.Write("d]]", emit)
	p.Flush(emit)
	if got, want := joinText(out), "hi "; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if p.Voice() {
		t.Errorf("Voice() = true for a reply that began with <voice>++, want false")
	}

	p.Reset()
	out = out[:0]
	p.Write("<voice>", emit)
	p.Flush(emit)
	if !p.Voice() || p.Raw() != "<voice>" || joinText(out) != "" {
		t.Errorf("after Reset: voice=%v raw=%q text=%q, want true, %q, %q", p.Voice(), p.Raw(), joinText(out), "<voice>", "")
	}

	none := NewParser(Config{Tags: []string{}})
	var b strings.Builder
	none.Write("<no_tool>", func(pc Piece) { b.WriteString(pc.Text) })
	none.Flush(func(pc Piece) { b.WriteString(pc.Text) })
	if b.String() != "<no_tool>" {
		t.Errorf("empty tag list: text = %q, want %q", b.String(), "<no_tool>")
	}
}

// A rune cut by the end of a delta is held back until its last byte
// arrives: no piece of a valid UTF-8 reply holds half a rune.
func TestParserRuneSplitAcrossDeltas(t *testing.T) {
	tests := []struct {
		name   string
		mode   Mode
		deltas []string
		first  string // text of the first Write
	}{
		{name: "deltas, 3-byte rune", mode: ModeDeltas, deltas: []string{"好\xe5\xa5", "\xbd!"}, first: "好"},
		{name: "deltas, 4-byte rune one byte at a time", mode: ModeDeltas, deltas: []string{"a\xf0", "\x9f", "\x98", "\x80b"}, first: "a"},
		{name: "deltas, after a held tag prefix", mode: ModeDeltas, deltas: []string{"<no_\xc3", "\xa9"}, first: "<no_"},
		{name: "deltas, only a lead byte", mode: ModeDeltas, deltas: []string{"\xe4", "\xbd\xa0"}, first: ""},
		{name: "sentences", mode: ModeSentences, deltas: []string{"好\xe5\xa5", "\xbd。"}, first: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(Config{Mode: tt.mode})
			var ps []Piece
			emit := func(pc Piece) { ps = append(ps, pc) }
			p.Write(tt.deltas[0], emit)
			if got := joinText(ps); got != tt.first {
				t.Errorf("after the first delta: text %q, want %q", got, tt.first)
			}
			for _, d := range tt.deltas[1:] {
				p.Write(d, emit)
			}
			p.Flush(emit)
			all := strings.Join(tt.deltas, "")
			if joinRaw(ps) != all {
				t.Errorf("raw = %q, want %q", joinRaw(ps), all)
			}
			for i, pc := range ps {
				if !utf8.ValidString(pc.Text) || !utf8.ValidString(pc.Raw) {
					t.Errorf("piece %d = %+v holds a broken rune", i, pc)
				}
			}
		})
	}
	t.Run("invalid UTF-8 is not held forever", func(t *testing.T) {
		p := NewParser(Config{})
		var got strings.Builder
		p.Write("ok\xff", func(pc Piece) { got.WriteString(pc.Raw) })
		if got.String() != "ok\xff" {
			t.Errorf("text = %q, want %q released at once", got.String(), "ok\xff")
		}
	})
	t.Run("a cut rune at the end of the stream comes out at Flush", func(t *testing.T) {
		_, ps := collect(Config{}, "x\xe5\xa5")
		if joinRaw(ps) != "x\xe5\xa5" {
			t.Errorf("raw = %q", joinRaw(ps))
		}
	})
}

// In sentence mode a . ! or ? followed by a tag that begins with white
// space ends the sentence before the tag, which stays whole.
func TestParserSentenceEndBeforeSpaceTag(t *testing.T) {
	tests := []struct {
		name   string
		tags   []string
		deltas []string
		want   []string
	}{
		{name: "space tag", tags: []string{" [t]"}, deltas: []string{"Hi. [t] ok"}, want: []string{"Hi.", " ok"}},
		{name: "space tag split", tags: []string{" [t]"}, deltas: []string{"Hi.", " [", "t] ok"}, want: []string{"Hi.", " ok"}},
		{name: "newline tag", tags: []string{"\n<x>"}, deltas: []string{"Hi.\n<x>z"}, want: []string{"Hi.", "z"}},
		{name: "space that is no tag", tags: []string{" [t]"}, deltas: []string{"Hi. [u] ok"}, want: []string{"Hi. ", "[u] ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := collect(Config{Tags: tt.tags, Mode: ModeSentences}, tt.deltas...)
			var got []string
			for _, pc := range ps {
				if pc.Text != "" {
					got = append(got, pc.Text)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("pieces = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParserSharedPrefixAndHeldLT(t *testing.T) {
	tags := []string{"<no_tool>", "<no_tools_at_all>", VoiceTag}
	tests := []struct {
		deltas []string
		text   string
	}{
		{[]string{"a<no_tool", "s_at_all>b"}, "ab"},
		{[]string{"a<no_tool", ">s"}, "as"},
		{[]string{"a<no_tools_at", "_al>"}, "a<no_tools_at_al>"},
		{[]string{"<", "<no_tool>x"}, "<x"},
		{[]string{"x<", "<", "<no_tools_at_all>"}, "x"},
		{[]string{"x<", "<", "<no_tools_at_all>y"}, "x<<y"},
	}
	for _, tt := range tests {
		_, ps := collect(Config{Tags: tags}, tt.deltas...)
		if got := joinText(ps); got != tt.text {
			t.Errorf("%q: text = %q, want %q", tt.deltas, got, tt.text)
		}
	}
}

func TestParserResetMidStream(t *testing.T) {
	p := NewParser(Config{})
	var before []Piece
	p.Write("<voice>Hel", func(pc Piece) { before = append(before, pc) })
	p.Write("lo <no_", func(pc Piece) { before = append(before, pc) })
	raw := p.Raw()
	p.Reset()
	if p.Raw() != "" || p.Voice() {
		t.Fatalf("after Reset: Raw %q, Voice %v", p.Raw(), p.Voice())
	}
	var after []Piece
	emit := func(pc Piece) { after = append(after, pc) }
	p.Write("tool>plain", emit)
	p.Flush(emit)
	if got := joinText(after); got != "tool>plain" || p.Raw() != "tool>plain" || p.Voice() {
		t.Errorf("after Reset: text %q raw %q voice %v, want the held prefix forgotten", got, p.Raw(), p.Voice())
	}
	if raw != "<voice>Hello <no_" || joinText(before) != "Hello " {
		t.Errorf("strings from before Reset changed: raw %q, text %q", raw, joinText(before))
	}
}
