package names

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want bool
	}{
		{"", 8, false},
		{"a", 8, true},
		{"Weather_report-2", 16, true},
		{strings.Repeat("a", 8), 8, true},
		{strings.Repeat("a", 9), 8, false},
		{"a b", 8, false},
		{"a/b", 8, false},
		{"é", 8, false},
		{"ab\x00", 8, false},
	} {
		if got := Valid(tc.s, tc.max); got != tc.want {
			t.Errorf("Valid(%q, %d) = %v, want %v", tc.s, tc.max, got, tc.want)
		}
	}
}
