package intent

import (
	"testing"
)

func TestStrip(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", ""},
		{"no tag unchanged", "Hello.\n\n", "Hello.\n\n"},
		{"no tag keeps edges", "  indented and trailing  ", "  indented and trailing  "},
		{"no_tool", "Paris. <no_tool>", "Paris."},
		{"need_tool", "Let me check.\n\n<need_tool>", "Let me check."},
		{"tag then whitespace", "Let me check. <need_tool>\n", "Let me check."},
		{"tag only", "<no_tool>", ""},
		{"both", "Hmm. <no_tool> <need_tool>", "Hmm."},
		{"repeated", "<need_tool>a<need_tool>b<need_tool>", "ab"},
		{"mid text between spaces", "I will check <need_tool> and report.", "I will check and report."},
		{"mid text tabs", "a\t<no_tool>\tb", "a\tb"},
		{"mid text glued left", "a<no_tool> b", "a b"},
		{"mid text glued right", "a <no_tool>b", "a b"},
		{"mid text glued both", "a<no_tool>b", "ab"},
		{"start", "<no_tool> Hello", "Hello"},
		{"start newline", "<need_tool>\n\nHello", "Hello"},
		{"own line", "Line one.\n<no_tool>\nLine two.", "Line one.\n\nLine two."},
		{"after newline", "Line one.\n<no_tool> Line two.", "Line one.\nLine two."},
		{"voice kept", "<voice>Hello there! <no_tool>", "<voice>Hello there!"},
		{"voice after tag kept", "<no_tool><voice>Hi", "<voice>Hi"},
		{"voice between tags", "<need_tool> <voice> <no_tool>", "<voice>"},
		{"look-alikes kept", "<no_tool x <no_tools> <NO_TOOL> < no_tool > <need-tool>x", "<no_tool x <no_tools> <NO_TOOL> < no_tool > <need-tool>x"},
		{"cut tag at the end", "Let me check <need_", "Let me check"},
		{"cut tag after a tag", "Sure.<no_tool><need_t", "Sure."},
		{"nested cut tag at the end", "a <no_<ne", "a"},
		{"nested tag around a cut one", "a <no_<need_tool>", "a"},
		{"lone lt at the end", "1 <", "1"},
		{"cut tag followed by a space stays", "a <need_ ", "a <need_ "},
		{"nested from the issue", "Hi <no_<need_tool>tool>", "Hi"},
		{"white space after a broken tag stays", "x <need_ \n<no_tool>", "x <need_ "},
		{"look-alike and tag", "<no_tools> <no_tool>", "<no_tools>"},
		{"nested to fixed point", "<no_<need_tool>tool>", ""},
		{"nested keeps rest", "x<ne<no_tool>ed_tool>y", "xy"},
		{"non-ASCII", "好的，我来查一下。<need_tool>", "好的，我来查一下。"},
		{"leading whitespace kept", "  \nHi <no_tool>", "  \nHi"},
		{"crlf", "Hi\r\n<no_tool>\r\n", "Hi"},
	}
	d := DefaultDictionary()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Strip(tc.text); got != tc.want {
				t.Errorf("Strip(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestStripCustom(t *testing.T) {
	d, err := NewDictionary(Tag{Name: "<chat>", SkipTools: true}, Tag{Name: "<search>"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text, want string
	}{
		{"Hi <chat>", "Hi"},
		{"Looking. <chat><search>", "Looking."},
		{"Not ours: <no_tool>", "Not ours: <no_tool>"},
		{"<voice>Hi <search>", "<voice>Hi"},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			if got := d.Strip(tc.text); got != tc.want {
				t.Errorf("Strip(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}
