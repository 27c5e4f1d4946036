package intent

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDefaultDictionary(t *testing.T) {
	d := DefaultDictionary()
	if got, want := d.Tags(), []string{"<no_tool>", "<need_tool>"}; !slices.Equal(got, want) {
		t.Errorf("Tags() = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, intent string
		skip         bool
	}{
		{"<no_tool>", "no_tool", true},
		{"<need_tool>", "need_tool", false},
	} {
		got, ok := d.Lookup(tc.name)
		if !ok || got.Intent != tc.intent || got.SkipTools != tc.skip || got.Description == "" {
			t.Errorf("Lookup(%q) = %+v, %v; want intent %q, skip %v, a description", tc.name, got, ok, tc.intent, tc.skip)
		}
	}
	if _, ok := d.Lookup("<voice>"); ok {
		t.Error(`Lookup("<voice>") found a tag`)
	}
	var zero Dictionary
	if got, want := zero.Tags(), d.Tags(); !slices.Equal(got, want) {
		t.Errorf("zero Dictionary Tags() = %q, want %q", got, want)
	}
}

func TestTagsReturnsCopy(t *testing.T) {
	d := DefaultDictionary()
	d.Tags()[0] = "<mutated>"
	if got := d.Tags()[0]; got != NoTool {
		t.Errorf("after changing the returned slice, Tags()[0] = %q, want %q", got, NoTool)
	}
}

func TestNewDictionary(t *testing.T) {
	d, err := NewDictionary(
		Tag{Name: "<chat>", SkipTools: true, Description: "  small talk  "},
		Tag{Name: "<search>", Intent: "web_search"},
		Tag{Name: "<免工具>", Intent: "no_tool", SkipTools: true},
	)
	if err != nil {
		t.Fatalf("NewDictionary: %v", err)
	}
	if got, want := d.Tags(), []string{"<chat>", "<search>", "<免工具>"}; !slices.Equal(got, want) {
		t.Errorf("Tags() = %q, want %q", got, want)
	}
	tests := []struct {
		name string
		want Tag
	}{
		{"<chat>", Tag{Name: "<chat>", Intent: "chat", SkipTools: true, Description: "small talk"}},
		{"<search>", Tag{Name: "<search>", Intent: "web_search"}},
		{"<免工具>", Tag{Name: "<免工具>", Intent: "no_tool", SkipTools: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := d.Lookup(tc.name)
			if !ok || got != tc.want {
				t.Errorf("Lookup(%q) = %+v, %v; want %+v, true", tc.name, got, ok, tc.want)
			}
		})
	}
}

func TestNewDictionaryErrors(t *testing.T) {
	tests := []struct {
		name   string
		tags   []Tag
		reason string // part of the error message
	}{
		{"no tags", nil, "no tags"},
		{"empty name", []Tag{{Name: ""}}, "empty name"},
		{"no brackets", []Tag{{Name: "no_tool"}}, "must be"},
		{"no closing bracket", []Tag{{Name: "<no_tool"}}, "must be"},
		{"no opening bracket", []Tag{{Name: "no_tool>"}}, "must be"},
		{"nothing inside", []Tag{{Name: "<>"}}, "must be"},
		{"lone bracket", []Tag{{Name: "<"}}, "must be"},
		{"inner open bracket", []Tag{{Name: "<a<b>"}}, "must not contain"},
		{"inner close bracket", []Tag{{Name: "<a>b>"}}, "must not contain"},
		{"space", []Tag{{Name: "<no tool>"}}, "must not contain"},
		{"newline", []Tag{{Name: "<no\ntool>"}}, "must not contain"},
		{"control", []Tag{{Name: "<no\x00tool>"}}, "must not contain"},
		{"invalid UTF-8", []Tag{{Name: "<no\xfftool>"}}, "UTF-8"},
		{"voice", []Tag{{Name: "<voice>"}}, "reserved"},
		{"duplicate", []Tag{{Name: "<a>"}, {Name: "<b>"}, {Name: "<a>", SkipTools: true}}, "twice"},
		{"bad after good", []Tag{{Name: "<a>"}, {Name: "b"}}, `"b"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDictionary(tc.tags...)
			if !errors.Is(err, ErrInvalidDictionary) {
				t.Fatalf("NewDictionary(%+v) error = %v, want %v", tc.tags, err, ErrInvalidDictionary)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
			if d.tags != nil {
				t.Errorf("NewDictionary returned tags %+v with an error", d.tags)
			}
		})
	}
}
