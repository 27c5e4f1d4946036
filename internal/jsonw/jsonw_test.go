package jsonw

import (
	"bytes"
	"encoding/json"
	"testing"
)

// stdString is what encoding/json writes for s, HTML escaping off.
func stdString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "a\nb\r\tc\b\f\x00\x1f\x7f", "<&>", "é😀", "\xff\xfe", "a\u2028b\u2029", "\xe2\x80"} {
		got := AppendString([]byte("x"), s)
		if want := append([]byte("x"), stdString(s)...); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\xff", "\u2028é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if want := stdString(s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("not JSON: %s: %v", got, err)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendString(buf[:0], "The weather in Lima is \"sunny\" today.\n")
	}
}
