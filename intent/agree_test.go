package intent_test

import (
	"strings"
	"testing"

	"github.com/planround/planround/intent"
	"github.com/planround/planround/stream"
)

// agreePieces are what FuzzStripAgreesWithParser builds texts from: whole
// tags, pieces of them, look-alikes, white space and plain text.
var agreePieces = []string{
	"<no_tool>", "<need_tool>", "<chat>", "<search>", "<voice>",
	"<", ">", "no_", "need_", "tool", "ool>", "<ne", "ed", "_", "t", "<no_", "<cha", "t>", "sea", "rch>",
	" ", "\n", "\t", "a", "Hi", ".", "好", "<div>", "<<", ">>",
}

// FuzzStripAgreesWithParser holds the two rules for hiding tags equal: the
// text a stream parser configured with a dictionary's tags shows, however
// the reply is cut into deltas, is what the dictionary's Strip returns,
// apart from white space; and neither leaves a tag, or a tag cut short at
// the end, visible.
func FuzzStripAgreesWithParser(f *testing.F) {
	f.Add([]byte{24, 20, 15, 1, 9, 6}, []byte{1, 2, 3}, false)                   // Hi <no_<need_tool>tool>
	f.Add([]byte{24, 20, 15, 1, 9}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false) // Hi <no_<need_tool>tool
	f.Add([]byte{23, 20, 11}, []byte{4}, false)                                  // a <ne
	f.Add([]byte{16, 3, 17}, []byte{2, 2}, true)                                 // <cha<search>t>
	f.Add([]byte{23, 15, 20, 0}, []byte{7}, false)                               // a<no_ <no_tool>
	f.Fuzz(func(t *testing.T, build, cuts []byte, custom bool) {
		d := intent.DefaultDictionary()
		if custom {
			var err error
			d, err = intent.NewDictionary(intent.Tag{Name: "<chat>", SkipTools: true}, intent.Tag{Name: "<search>"})
			if err != nil {
				t.Fatal(err)
			}
		}
		var b strings.Builder
		for _, c := range build {
			b.WriteString(agreePieces[int(c)%len(agreePieces)])
		}
		text := b.String()

		p := stream.NewParser(stream.Config{Tags: d.Tags()})
		var shown strings.Builder
		emit := func(pc stream.Piece) { shown.WriteString(pc.Text) }
		for _, delta := range split(text, cuts) {
			p.Write(delta, emit)
		}
		p.Flush(emit)
		stripped := d.Strip(text)

		for what, s := range map[string]string{"parser": shown.String(), "Strip": stripped} {
			if r := d.Detect(s); r.Found {
				t.Fatalf("%s leaves %s visible in %q (text %q)", what, r.Tag, s, text)
			}
			for _, tag := range d.Tags() {
				for k := 1; k < len(tag); k++ {
					if strings.HasSuffix(s, tag[:k]) {
						t.Fatalf("%s leaves %q, the start of %s, at the end of %q (text %q)", what, tag[:k], tag, s, text)
					}
				}
			}
		}
		if got, want := noSpace(shown.String()), noSpace(stripped); got != want {
			t.Fatalf("text %q: the parser shows %q, Strip returns %q", text, shown.String(), stripped)
		}
	})
}

// split cuts s into deltas of the lengths cuts give (1..8 bytes each).
func split(s string, cuts []byte) []string {
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

// noSpace returns s without the white space Strip may tidy away.
func noSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}
