package intent

import "testing"

var (
	noTool   = Result{Tag: "<no_tool>", Intent: "no_tool", SkipTools: true, Found: true}
	needTool = Result{Tag: "<need_tool>", Intent: "need_tool", Found: true}
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		text string
		want Result
	}{
		{"empty", "", Result{}},
		{"no tag", "Paris is the capital of France.", Result{}},
		{"no_tool at end", "Paris is the capital of France. <no_tool>", noTool},
		{"need_tool at end", "Let me check the weather for you.\n<need_tool>", needTool},
		{"tag only", "<need_tool>", needTool},
		{"after voice", "<voice>Hello there!<no_tool>", noTool},
		{"voice alone", "<voice>Hello there!", Result{}},
		{"last wins need", "<no_tool> hmm, actually I should look. <need_tool>", needTool},
		{"last wins no", "<need_tool> no wait, I know this. <no_tool>", noTool},
		{"last wins repeated", "<no_tool><need_tool><no_tool><need_tool>", needTool},
		{"mid text counts", "I will check <need_tool> and then report.", needTool},
		{"inside code counts", "Use `<no_tool>` like this:\n```\n<need_tool>\n```\nDone.", needTool},
		{"non-ASCII around", "好的，我来查一下。<need_tool>", needTool},
		{"plural", "I need no <no_tools>", Result{}},
		{"upper case", "Done. <NO_TOOL>", Result{}},
		{"spaces inside", "Done. < no_tool >", Result{}},
		{"unclosed", "Done. <no_tool", Result{}},
		{"split by text", "Done. <no_t ool>", Result{}},
		{"prefix of tag", "<need_", Result{}},
		{"plural then real", "<no_tools> <no_tool>", noTool},
		{"real then plural", "<need_tool> <no_tools>", needTool},
	}
	d := DefaultDictionary()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Detect(tc.text); got != tc.want {
				t.Errorf("Detect(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}

func TestDetectCustom(t *testing.T) {
	d, err := NewDictionary(
		Tag{Name: "<chat>", SkipTools: true},
		Tag{Name: "<search>", Intent: "web_search"},
		Tag{Name: "<act>"},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want Result
	}{
		{"hi <chat>", Result{Tag: "<chat>", Intent: "chat", SkipTools: true, Found: true}},
		{"<chat> looking it up <search>", Result{Tag: "<search>", Intent: "web_search", Found: true}},
		{"<search><act>", Result{Tag: "<act>", Intent: "act", Found: true}},
		{"default tags are not ours <no_tool>", Result{}},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			if got := d.Detect(tc.text); got != tc.want {
				t.Errorf("Detect(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}
