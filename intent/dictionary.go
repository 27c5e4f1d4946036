package intent

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tags of the [DefaultDictionary].
const (
	NoTool   = "<no_tool>"
	NeedTool = "<need_tool>"
)

// voiceTag is the speech tag of the stream parser. It is not an intent
// tag: [Dictionary.Strip] keeps it and [NewDictionary] refuses it.
const voiceTag = "<voice>"

// ErrInvalidDictionary is returned (wrapped, with the reason) by
// [NewDictionary] when the tags do not form a valid dictionary.
var ErrInvalidDictionary = errors.New("intent: invalid dictionary")

// Tag is one intent tag the model may end its planning reply with.
type Tag struct {
	// Name is the literal tag, such as "<no_tool>". It starts with '<',
	// ends with '>', and has at least one character in between, none of
	// which is '<', '>', a space or a control character. Matching is exact
	// and case-sensitive.
	Name string
	// Intent is the name the host sees in a [Result], such as "no_tool".
	// Empty means Name without its angle brackets.
	Intent string
	// SkipTools reports whether the tag means that no tool is needed, so
	// the agent continues without tools instead of entering the tool loop.
	SkipTools bool
	// Description tells the model, in the planning prompt, when to choose
	// the tag, for example "you need tools to finish". Empty means a
	// generic description derived from SkipTools; give one whenever two
	// tags share the same SkipTools.
	Description string
}

// Dictionary is an immutable, ordered set of intent tags. The zero
// Dictionary behaves as [DefaultDictionary], so a config field of this
// type needs no initialisation. A Dictionary is safe for concurrent use.
type Dictionary struct {
	tags []Tag // validated, Intent filled in; nil means defaultTags
}

var defaultTags = []Tag{
	{Name: NoTool, Intent: "no_tool", SkipTools: true, Description: "you answered the user fully without tools"},
	{Name: NeedTool, Intent: "need_tool", SkipTools: false, Description: "you need tools to finish the task"},
}

// DefaultDictionary returns the standard dictionary: [NoTool] (intent
// "no_tool", SkipTools true) and [NeedTool] (intent "need_tool",
// SkipTools false), in that order.
func DefaultDictionary() Dictionary { return Dictionary{} }

// NewDictionary returns a dictionary of the given tags, in that order (the
// order of [Dictionary.Tags] and of the tag list in
// [Dictionary.PlanningPrompt]).
//
// It returns an error wrapping [ErrInvalidDictionary] if there are no
// tags, if a tag's Name is malformed (see [Tag.Name]) or is the speech tag
// "<voice>", or if two tags have the same Name.
func NewDictionary(tags ...Tag) (Dictionary, error) {
	if len(tags) == 0 {
		return Dictionary{}, fmt.Errorf("%w: no tags", ErrInvalidDictionary)
	}
	out := make([]Tag, 0, len(tags))
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		if err := checkName(t.Name); err != nil {
			return Dictionary{}, fmt.Errorf("%w: tag %q: %s", ErrInvalidDictionary, t.Name, err)
		}
		if seen[t.Name] {
			return Dictionary{}, fmt.Errorf("%w: tag %q appears twice", ErrInvalidDictionary, t.Name)
		}
		seen[t.Name] = true
		if t.Intent == "" {
			t.Intent = t.Name[1 : len(t.Name)-1]
		}
		t.Description = strings.TrimSpace(t.Description)
		out = append(out, t)
	}
	return Dictionary{tags: out}, nil
}

// checkName reports what is wrong with a tag name, or nil.
//
// Forbidding '<' and '>' inside a name guarantees that two occurrences of
// tags (the same or different ones) can never overlap in a text: a tag
// inside another would have to start at its '<' and end at its '>'. That
// makes "the last occurrence" well defined and stripping order-free.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) < 3 || name[0] != '<' || name[len(name)-1] != '>':
		return errors.New("must be '<', a name, '>'")
	case !utf8.ValidString(name):
		return errors.New("not valid UTF-8")
	case name == voiceTag:
		return errors.New("reserved for speech")
	}
	for _, r := range name[1 : len(name)-1] {
		if r == '<' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("must not contain %q", r)
		}
	}
	return nil
}

// all returns the dictionary's tags; callers must not modify the slice.
func (d Dictionary) all() []Tag {
	if d.tags == nil {
		return defaultTags
	}
	return d.tags
}

// Tags returns the tag strings in dictionary order, for example to
// configure a stream parser that hides them from the visible text (add
// "<voice>" there yourself). The slice is a fresh copy.
func (d Dictionary) Tags() []string {
	all := d.all()
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name
	}
	return names
}

// Lookup returns the tag with the given Name, with Intent filled in.
func (d Dictionary) Lookup(name string) (Tag, bool) {
	for _, t := range d.all() {
		if t.Name == name {
			return t, true
		}
	}
	return Tag{}, false
}
