package intent

import (
	"strings"
	"testing"
)

// detectRef is the obvious reference for Detect: scan start positions from
// the end and take the first tag that starts there.
func detectRef(d Dictionary, text string) Result {
	for i := len(text); i >= 0; i-- {
		for _, t := range d.all() {
			if strings.HasPrefix(text[i:], t.Name) {
				return Result{Tag: t.Name, Intent: t.Intent, SkipTools: t.SkipTools, Found: true}
			}
		}
	}
	return Result{}
}

// stripRef removes tags the slow way, until none is left, then a tag cut
// short at the end (the longest suffix that is a proper prefix of a tag),
// again and again, without any whitespace tidying; it agrees with Strip on
// text without whitespace.
func stripRef(d Dictionary, text string) string {
	for {
		prev := text
		for _, t := range d.all() {
			text = strings.ReplaceAll(text, t.Name, "")
		}
		if text == prev {
			break
		}
	}
	for {
		n := cutRef(d, text)
		if n == 0 {
			return text
		}
		text = text[:len(text)-n]
	}
}

// cutRef returns the length of the longest suffix of text that is a proper
// prefix of a tag, or 0.
func cutRef(d Dictionary, text string) int {
	n := 0
	for k := 1; k <= len(text); k++ {
		for _, t := range d.all() {
			if len(t.Name) > k && strings.HasPrefix(t.Name, text[len(text)-k:]) {
				n = k
			}
		}
	}
	return n
}

func FuzzDictionary(f *testing.F) {
	for _, s := range []string{
		"", "Paris. <no_tool>", "Checking.\n<need_tool>\n", "<no_tool><need_tool>",
		"<no_tools> <NO_TOOL>", "<no_<need_tool>tool>", "<voice>Hi <no_tool>",
		"a <need_tool> b", "<need_tool>\r\n\t x", "好的<need_tool>", "<<no_tool>>", "\xff<no_tool\xff>",
		"Hi <no_<need_tool>tool>", "Let me check <need_", "a <no_<ne", "<no_<need_tool>", "1 <", "x<need_ ",
	} {
		f.Add(s, "<chat>", "<search>")
	}
	f.Add("x <a> <ab> <b>", "<a>", "<b>")
	f.Add("<vo<a>ice>", "<a>", "<voice>")
	f.Fuzz(func(t *testing.T, text, tagA, tagB string) {
		dicts := []Dictionary{DefaultDictionary()}
		if d, err := NewDictionary(Tag{Name: tagA, SkipTools: true}, Tag{Name: tagB}); err == nil {
			dicts = append(dicts, d)
		}
		for _, d := range dicts {
			if got, want := d.Detect(text), detectRef(d, text); got != want {
				t.Fatalf("%q: Detect(%q) = %+v, reference %+v", d.Tags(), text, got, want)
			}

			got := d.Strip(text)
			for _, tag := range d.Tags() {
				if strings.Contains(got, tag) {
					t.Fatalf("%q: Strip(%q) = %q still contains %q", d.Tags(), text, got, tag)
				}
			}
			if r := d.Detect(got); r.Found {
				t.Fatalf("%q: Detect(Strip(%q)) = %+v, want nothing", d.Tags(), text, r)
			}
			if !d.Detect(text).Found && cutRef(d, text) == 0 && got != text {
				t.Fatalf("%q: Strip(%q) = %q changed a text without tags", d.Tags(), text, got)
			}
			if n := cutRef(d, got); n > 0 {
				t.Fatalf("%q: Strip(%q) = %q ends in a cut tag", d.Tags(), text, got)
			}
			if again := d.Strip(got); again != got {
				t.Fatalf("%q: Strip(%q) = %q, not a fixed point (%q)", d.Tags(), got, again, got)
			}
			if len(got) > len(text) {
				t.Fatalf("%q: Strip(%q) = %q grew", d.Tags(), text, got)
			}
			if n, m := strings.Count(got, voiceTag), strings.Count(text, voiceTag); n < m {
				t.Fatalf("%q: Strip(%q) = %q lost a %s", d.Tags(), text, got, voiceTag)
			}
			if !strings.ContainsAny(text, " \t\r\n") {
				if want := stripRef(d, text); got != want {
					t.Fatalf("%q: Strip(%q) = %q, reference %q", d.Tags(), text, got, want)
				}
			}
		}
	})
}
