package mcpclient

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamed writes pieces through a streamRedactor of secrets, as lines
// when lines is set, and returns what it passed on, put together, after
// its end.
func streamed(secrets []string, pieces []string, lines bool) string {
	out := &buffer{}
	p := newRedactingProgress(out, newRedactor(secrets))
	for _, s := range pieces {
		if lines {
			p.writeLine(s)
		} else {
			p.WriteString(s)
		}
	}
	p.end()
	return out.String()
}

// Secrets that overlap in every way: one inside another, one beginning
// another, one ending where another begins, one repeating itself.
var overlapping = []string{"tok-9f8e7d6c5b4a", "Bearer tok-9f8e7d6c5b4a", "tok-9f8e7d6c5b4a-extra", "5b4a-x", "aaaa", "ab"}

const overlappingText = "Bearer tok-9f8e7d6c5b4a, tok-9f8e7d6c5b4a-extra and tok-9f8e7d6c5b4a-x; aaaaaaaaa abab tok-9f8e7d6c5b4"

// Split between two pieces at every offset, and between three at every
// pair of offsets, the text comes out as redacting it whole does.
func TestStreamRedactorSplits(t *testing.T) {
	red := newRedactor(overlapping)
	text := overlappingText
	want := red.String(text)
	require.NotEqual(t, text, want)
	for i := 0; i <= len(text); i++ {
		if got := streamed(overlapping, []string{text[:i], text[i:]}, false); got != want {
			t.Fatalf("split at %d:\n%q\nwant\n%q", i, got, want)
		}
		for j := i; j <= len(text); j++ {
			if got := streamed(overlapping, []string{text[:i], text[i:j], text[j:]}, false); got != want {
				t.Fatalf("split at %d and %d:\n%q\nwant\n%q", i, j, got, want)
			}
		}
	}
	// A byte at a time.
	var bytes []string
	for i := range len(text) {
		bytes = append(bytes, text[i:i+1])
	}
	assert.Equal(t, want, streamed(overlapping, bytes, false))
}

// Lines: a secret split between lines is redacted, with the line break
// after it; the other breaks stay where they are.
func TestStreamRedactorLines(t *testing.T) {
	secrets := []string{"tok-9f8e7d6c5b4a"}
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"step 1", "step 2"}, "step 1\nstep 2\n"},
		{[]string{"key tok-9f", "8e7d6c5b4a ok"}, "key [redacted]\n ok\n"},
		{[]string{"tok", "-9f8e", "7d6c5b4a"}, "[redacted]\n\n\n"},
		{[]string{"tok-9f", "tok-9f8e7d6c5b4a"}, "tok-9f\n[redacted]\n"},
		{[]string{"", "tok-9f8e7d6c5b4a", ""}, "\n[redacted]\n\n"},
		{[]string{"the end is tok-9f"}, "the end is tok-9f\n"},
	} {
		assert.Equal(t, tc.want, streamed(secrets, tc.lines, true), "%q", tc.lines)
	}
}

// Text passes on at once but for what may begin a secret; end passes on
// the rest, and nothing after.
func TestRedactingProgressHoldsBackOnlyWhatMayBeASecret(t *testing.T) {
	out := &buffer{}
	p := newRedactingProgress(out, newRedactor([]string{"tok-9f8e7d6c5b4a"}))
	p.writeLine("copying")
	assert.Equal(t, "copying\n", out.String())
	p.WriteString("the key: tok-9f8e")
	assert.Equal(t, "copying\nthe key: ", out.String())
	p.Write([]byte("7d6c5b4a, and tok"))
	assert.Equal(t, "copying\nthe key: [redacted], and ", out.String())
	p.end()
	assert.Equal(t, "copying\nthe key: [redacted], and tok", out.String())
	p.writeLine("-9f8e7d6c5b4a")
	p.end()
	assert.Equal(t, "copying\nthe key: [redacted], and tok", out.String(), "a write after the end")
}

// FuzzStreamRedactor: for any secrets and any split of any text into
// pieces, the pieces written one by one come out as the whole text
// redacted at once; written as lines, they come out the same but for the
// line breaks, one a piece.
func FuzzStreamRedactor(f *testing.F) {
	f.Add(strings.Join(overlapping, "\x00"), overlappingText, []byte{3, 17, 1, 0, 40})
	f.Add("tok-9f8e7d6c5b4a", "step 1 of 3\nkey tok-9f8e7d6c5b4a\n", []byte{9, 9, 9})
	f.Add("aaaa\x00aaa\x00aa", "aaaaaaaaaaaaaaa", []byte{1, 2, 3, 4, 5})
	f.Add("ab\x00ba\x00aba", "abababababa", []byte{1, 1, 1})
	f.Add("-----BEGIN KEY-----\nMIIE\n-----END KEY-----", "x -----BEGIN KEY-----\nMIIE\n-----END KEY----- y", []byte{12, 7})
	f.Add("p\\u0026ss\x00p&ss", `{"pw":"p\u0026ss"} p&ss`, []byte{8})
	f.Fuzz(func(t *testing.T, secretList, text string, cuts []byte) {
		secrets := strings.Split(secretList, "\x00")
		red := newRedactor(secrets)
		var pieces []string
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		pieces = append(pieces, rest)

		want := red.String(text)
		if got := streamed(secrets, pieces, false); got != want {
			t.Fatalf("secrets %q, pieces %q:\ngot  %q\nwant %q", secrets, pieces, got, want)
		}
		got := streamed(secrets, pieces, true)
		if strings.ReplaceAll(got, "\n", "") != strings.ReplaceAll(want, "\n", "") ||
			strings.Count(got, "\n") != strings.Count(want, "\n")+len(pieces) {
			t.Fatalf("secrets %q, lines %q:\ngot  %q\nwant %q with a break after each line", secrets, pieces, got, want)
		}
	})
}

// discard is a Progress that keeps nothing.
type discard struct{}

func (discard) Write(p []byte) (int, error)       { return len(p), nil }
func (discard) WriteString(s string) (int, error) { return len(s), nil }

// BenchmarkRedactingProgress: one progress line through the redactor of a
// server with five secrets, none of which it holds (the common case), one
// that it holds whole, and one split between two lines.
func BenchmarkRedactingProgress(b *testing.B) {
	secrets := []string{
		"tok-9f8e7d6c5b4a", "Bearer tok-9f8e7d6c5b4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
		"sk-proj-0123456789abcdefghijklmnopqrstuv", "/home/planround/projects",
	}
	red := newRedactor(secrets)
	b.Run("line", func(b *testing.B) {
		p := newRedactingProgress(discard{}, red)
		b.ReportAllocs()
		for b.Loop() {
			p.writeLine("step 3 of 10: copying src/main.go to build/main.go")
		}
	})
	b.Run("write", func(b *testing.B) {
		p := newRedactingProgress(discard{}, red)
		b.ReportAllocs()
		for b.Loop() {
			p.WriteString("step 3 of 10: copying src/main.go to build/main.go\n")
		}
	})
	b.Run("secret", func(b *testing.B) {
		p := newRedactingProgress(discard{}, red)
		b.ReportAllocs()
		for b.Loop() {
			p.writeLine("using ghp_16C7e42F292c6912E7710c838347Ae178B4a for the clone")
		}
	})
	b.Run("split", func(b *testing.B) {
		p := newRedactingProgress(discard{}, red)
		b.ReportAllocs()
		for b.Loop() {
			p.writeLine("using ghp_16C7e42F292c")
			p.writeLine("6912E7710c838347Ae178B4a for the clone")
		}
	})
	b.Run("per-write redaction", func(b *testing.B) {
		// What each write cost before the stream: a Replace and a line.
		b.ReportAllocs()
		for b.Loop() {
			discard{}.WriteString(red.String("step 3 of 10: copying src/main.go to build/main.go") + "\n")
		}
	})
}

// schemaEntry is a server entry with secrets and no server.
func schemaEntry(secrets ...string) *serverEntry {
	return &serverEntry{
		cfg:   &expanded{ServerConfig: ServerConfig{Name: "s"}},
		red:   newRedactor(secrets),
		names: newRedactor(nameForms(secrets)),
		log:   slog.New(slog.DiscardHandler),
	}
}

// A secret is redacted in a schema's strings, numbers and keys; a key that
// held one maps back for the call; two keys that read the same once
// redacted refuse the tool.
func TestRedactToolSchema(t *testing.T) {
	e := schemaEntry("48213977", "db.prod:5432")
	tool := mcp.NewToolWithRawSchema("query_db.prod:5432", "Queries db.prod:5432.", json.RawMessage(`{
		"type": "object",
		"properties": {
			"port": {"type": "integer", "default": 48213977, "enum": [1, 48213977]},
			"db.prod:5432_table": {"type": "object", "properties": {"db.prod:5432": {"type": "string"}}}
		}}`))
	// The client reads the tool as a server sends it.
	b, err := json.Marshal(tool)
	require.NoError(t, err)
	var read mcp.Tool
	require.NoError(t, json.Unmarshal(b, &read))
	spec, err := e.convertTool(read)
	require.NoError(t, err)
	assert.Equal(t, "query__redacted_", spec.base)
	assert.Equal(t, "Queries [redacted].", spec.desc)
	params, _ := json.Marshal(spec.params)
	assert.JSONEq(t, `{"type": "object", "properties": {
			"port": {"type": "integer", "default": "[redacted]", "enum": [1, "[redacted]"]},
			"[redacted]_table": {"type": "object", "properties": {"[redacted]": {"type": "string"}}}
		}}`, string(params))
	assert.Equal(t, map[string]string{"[redacted]_table": "db.prod:5432_table", "[redacted]": "db.prod:5432"}, spec.keys)
	args := restoreKeys(json.RawMessage(`{"port":1,"[redacted]_table":{"[redacted]":"x & y"}}`), spec.keys)
	assert.JSONEq(t, `{"port":1,"db.prod:5432_table":{"db.prod:5432":"x & y"}}`, string(args))

	// A name made valid by the server.
	assert.Equal(t, "query__redacted_", e.toolName("query_db_prod_5432"))
	assert.Equal(t, "query_db_prod", e.toolName("query_db_prod"))

	clash := mcp.NewToolWithRawSchema("clash", "", json.RawMessage(`{"type": "object", "properties": {"48213977": {}, "[redacted]": {}}}`))
	_, err = e.convertTool(clash)
	assert.ErrorContains(t, err, `read "[redacted]"`)
}

// Strings of a JSON text that a server's encoder escaped are redacted too,
// and the text is otherwise left as it is.
func TestRedactJSONStrings(t *testing.T) {
	red := newRedactor([]string{"p&ss<wörd>"})
	raw := []byte(`{"a": "p\u0026ss\u003cw\u00f6rd\u003e!", "b\"": "x\ny", "p\u0026ss\u003cw\u00f6rd\u003e": 1}`)
	assert.Equal(t, `{"a": "[redacted]!", "b\"": "x\ny", "[redacted]": 1}`, string(red.jsonStrings(raw)))
	plain := []byte(`{"a": "no secret \u0026 here"}`)
	assert.True(t, bytes.Equal(plain, red.jsonStrings(plain)))
}

// The forms of a secret as JSON encoders write it.
func TestSecretForms(t *testing.T) {
	assert.Equal(t, []string{"tok-9f8e7d6c5b4a"}, secretForms("tok-9f8e7d6c5b4a"))
	assert.ElementsMatch(t, []string{
		"p&s/s<wörd>\"", `p\u0026s/s\u003cwörd\u003e\"`, `p&s/s<wörd>\"`, `p&s/s<w\u00f6rd>\"`, `p&s\/s<w\u00f6rd>\"`,
	}, secretForms("p&s/s<wörd>\""))
	assert.Contains(t, secretForms("-----BEGIN-----\nAAAA\n-----END-----"), "-----BEGIN-----AAAA-----END-----")
	assert.Contains(t, secretForms("a😀bc"), `a\ud83d\ude00bc`)
}

// A resource's text cut at its bound is cut before a secret that crosses
// the bound.
func TestResourceCutBeforeASecret(t *testing.T) {
	secret := "tok-9f8e7d6c5b4a"
	red := newRedactor([]string{secret})
	text := strings.Repeat("x", maxResourceText-6) + secret + strings.Repeat("y", 100)
	got, _ := resultText(&mcp.CallToolResult{Content: []mcp.Content{
		mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://long", Text: text}),
	}}, red)
	assert.NotContains(t, red.String(got), secret[:6])
	assert.Contains(t, got, "x\n[… 116 more bytes]")
}
