package intent

import "strings"

// Result is what [Dictionary.Detect] found.
type Result struct {
	// Tag is the tag that decided, such as "<need_tool>"; empty if none.
	Tag string
	// Intent is the tag's [Tag.Intent]; empty if none.
	Intent string
	// SkipTools is the tag's [Tag.SkipTools]; false if none, because a
	// reply without a tag is treated as needing tools.
	SkipTools bool
	// Found reports whether the text held any tag of the dictionary.
	Found bool
}

// Detect finds the intent of a complete planning reply: the tag of the
// dictionary whose occurrence starts last in text wins. A text without any
// tag gives a Result with Found and SkipTools false, which the agent treats
// as "<need_tool>".
//
// Detect matches tags exactly and anywhere: a tag in the middle of the
// text, inside a code block or inside quotes counts like one at the end,
// because the model writes the tag for the agent, never for the user, and
// the stream parser hides it wherever it is. Text that only resembles a
// tag, such as "<no_tools>", "<NO_TOOL>" or "< no_tool >", does not count.
//
// Detect must see the whole reply: on a prefix of a streamed reply it may
// miss a tag split across chunks or pick a tag that a later one overrides.
func (d Dictionary) Detect(text string) Result {
	best, at := -1, -1
	for i, t := range d.all() {
		// Tags never overlap (see checkName), so positions are unique.
		if j := strings.LastIndex(text, t.Name); j > at {
			best, at = i, j
		}
	}
	if best < 0 {
		return Result{}
	}
	t := d.all()[best]
	return Result{Tag: t.Name, Intent: t.Intent, SkipTools: t.SkipTools, Found: true}
}
