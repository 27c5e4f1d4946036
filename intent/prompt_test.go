package intent

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanningPrompt(t *testing.T) {
	custom, err := NewDictionary(
		Tag{Name: "<chat>", SkipTools: true, Description: "small talk, nothing to look up"},
		Tag{Name: "<search>", Description: "you must search the web"},
		Tag{Name: "<act>"},
		Tag{Name: "<answer>", SkipTools: true},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		prompt string
		lines  []string // each must appear as a whole line
	}{
		{"package default", PlanningPrompt(), []string{
			"<no_tool> - you answered the user fully without tools",
			"<need_tool> - you need tools to finish the task",
		}},
		{"zero dictionary", Dictionary{}.PlanningPrompt(), []string{"<no_tool> - you answered the user fully without tools"}},
		{"custom", custom.PlanningPrompt(), []string{
			"<chat> - small talk, nothing to look up",
			"<search> - you must search the web",
			"<act> - you need tools to answer",
			"<answer> - you can answer fully without tools",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(tc.prompt, "\n")
			for _, want := range tc.lines {
				if !slices.Contains(lines, want) {
					t.Errorf("prompt has no line %q:\n%s", want, tc.prompt)
				}
			}
			checkPrompt(t, tc.prompt)
			for _, phrase := range []string{"exactly one", "language the user writes in", "do not write tool calls"} {
				if !strings.Contains(tc.prompt, phrase) {
					t.Errorf("prompt does not say %q:\n%s", phrase, tc.prompt)
				}
			}
		})
	}
	if got, want := PlanningPrompt(), DefaultDictionary().PlanningPrompt(); got != want {
		t.Errorf("PlanningPrompt() = %q, want DefaultDictionary().PlanningPrompt() = %q", got, want)
	}
	if strings.Contains(custom.PlanningPrompt(), NoTool) {
		t.Errorf("custom prompt mentions %s, which is not in its dictionary", NoTool)
	}
}

func TestContinuationPrompt(t *testing.T) {
	p := ContinuationPrompt()
	checkPrompt(t, p)
	for _, phrase := range []string{"completely", "Do not repeat", "language the user writes in", "tag"} {
		if !strings.Contains(p, phrase) {
			t.Errorf("ContinuationPrompt() does not say %q:\n%s", phrase, p)
		}
	}
	if DefaultDictionary().Detect(p).Found {
		t.Errorf("ContinuationPrompt() contains an intent tag, inviting the model to write one:\n%s", p)
	}
}

// checkPrompt fails if a prompt names or describes tools the way a tool
// list would, shows the model the wire format of a call, or contains the
// speech tag.
func checkPrompt(t *testing.T, p string) {
	t.Helper()
	for _, bad := range []string{
		"get_skill", "ask_user_question", "show_card", // tools the SDK ships or documents
		"function", "tool_calls", "arguments", `"name"`, "{", "}", "```",
		"<voice>", ContinueMessage,
	} {
		if strings.Contains(p, bad) {
			t.Errorf("prompt contains %q:\n%s", bad, p)
		}
	}
	if p != strings.TrimSpace(p) {
		t.Errorf("prompt has surrounding whitespace: %q", p)
	}
}
