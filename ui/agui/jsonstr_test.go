package agui

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", `a"b\c`, "line\nbreak\ttab\r", "\x00\x1f\x7f", "é😀", "\u2028\u2029", "bad\xffutf8", "<tag>&amp;", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendString(%q) = %s, not JSON: %v", s, out, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		// encoding/json replaces each invalid byte; ToValidUTF8 a run of them.
		var canon string
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &canon)
		if got != canon {
			t.Fatalf("appendString(%q) decodes to %q, encoding/json's round trip to %q (valid: %q)", s, got, canon, want)
		}
		if !utf8.Valid(out) {
			t.Fatalf("appendString(%q) = %q is not UTF-8", s, out)
		}
	})
}

func TestAppendStringNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 256)
	n := testing.AllocsPerRun(100, func() {
		buf = appendString(buf[:0], "Hello, \"world\"\n — ünïcode ✓")
	})
	if n != 0 {
		t.Errorf("appendString allocates %v times, want 0", n)
	}
}
