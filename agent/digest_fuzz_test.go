package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"unicode/utf8"
)

// FuzzArgumentsDigest holds ArgumentsDigest to its contract for any bytes:
// it never panics and always has its form; the canonical form is a fixed
// point (canonicalizing it again changes nothing, so its digest is the
// digest of what it came from); valid JSON keeps its value and its digest
// under re-spacing, and its canonical form is valid JSON; anything else is
// digested as its own bytes, which are never valid JSON.
func FuzzArgumentsDigest(f *testing.F) {
	for _, s := range []string{
		``, `   `, `{}`, `{"city":"Oslo"}`, `{ "b" : 1 , "a" : [ 1 , 2 ] }`,
		`{"a":{"z":null,"y":true,"x":"\u00e9\n\"<>&"}}`, `{"n":1.0,"m":1e400,"k":-0,"j":12345678901234567890}`,
		`{"a":1,"a":2}`, `{"s":"\ud800"}`, `{"s":"\u2028\u2029"}`, "{\"s\":\"\xff\"}", `{"a":1}}`, `{"a":1} x`,
		`[1,"two",{"3":4}]`, `"text"`, `42`, `null`, `{"city": "Par`, "\u00a0{}", "{}\n",
	} {
		f.Add([]byte(s))
	}
	form := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := ArgumentsDigest(raw)
		if !form.MatchString(d) {
			t.Fatalf("ArgumentsDigest(%q) = %q: not of the form sha256:<64 hex digits>", raw, d)
		}
		c := canonicalJSON(raw)
		if again := canonicalJSON(c); !bytes.Equal(again, c) {
			t.Fatalf("canonical form of %q is not stable: %q, then %q", raw, c, again)
		}
		if got := ArgumentsDigest(c); got != d {
			t.Fatalf("digest of the canonical form %q = %s, of %q = %s", c, got, raw, d)
		}
		trimmed := bytes.Trim(raw, jsonSpace)
		if len(trimmed) == 0 {
			if string(c) != "{}" {
				t.Fatalf("blank arguments %q: canonical form %q, want {}", raw, c)
			}
			return
		}
		if !json.Valid(trimmed) || !utf8.Valid(trimmed) {
			if !bytes.Equal(c, trimmed) || json.Valid(c) && utf8.Valid(c) {
				t.Fatalf("invalid %q: canonical form %q, want its own bytes %q", raw, c, trimmed)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form of valid %q is not JSON: %q", raw, c)
		}
		if !reflect.DeepEqual(decodeNumbers(t, c), decodeNumbers(t, trimmed)) {
			t.Fatalf("canonical form %q does not hold the value of %q", c, raw)
		}
		var spaced bytes.Buffer
		if err := json.Indent(&spaced, trimmed, " ", "\t"); err != nil {
			t.Fatalf("indenting valid %q: %v", raw, err)
		}
		if got := ArgumentsDigest(spaced.Bytes()); got != d {
			t.Fatalf("re-spaced %q has digest %s, %q has %s", spaced.Bytes(), got, raw, d)
		}
	})
}

// decodeNumbers decodes valid JSON with numbers as written.
func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}
