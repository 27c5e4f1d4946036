package skills

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSkillFile(t *testing.T) {
	tests := []struct {
		name, in  string
		wantName  string
		wantDesc  string
		wantBody  string
		wantMeta  string // JSON of meta; "" for nil
		wantError string // part of the error; "" for none
	}{
		{
			name:     "minimal",
			in:       "---\nname: pdf\ndescription: Read PDFs.\n---\n# PDF\n\nUse pdftotext.\n",
			wantName: "pdf", wantDesc: "Read PDFs.", wantBody: "# PDF\n\nUse pdftotext.",
		},
		{
			name:     "CRLF, byte order mark, fence with trailing spaces",
			in:       "\uFEFF---  \r\nname: pdf\r\ndescription: Read PDFs.\r\n--- \r\n\r\nBody\r\n",
			wantName: "pdf", wantDesc: "Read PDFs.", wantBody: "Body",
		},
		{
			name:     "unknown keys kept, nested mappings with any keys",
			in:       "---\nname: x\ndescription: d\nlicense: MIT\nallowed-tools: [Read, Bash]\nmetadata:\n  version: 2\n  1: one\n---\n",
			wantName: "x", wantDesc: "d", wantBody: "",
			wantMeta: `{"allowed-tools":["Read","Bash"],"license":"MIT","metadata":{"1":"one","version":2}}`,
		},
		{
			name:     "folded description on several lines",
			in:       "---\nname: x\ndescription: >\n  one\n  two\n---\nb",
			wantName: "x", wantDesc: "one two", wantBody: "b",
		},
		{
			name:     "a fence in the body stays in the body",
			in:       "---\nname: x\ndescription: d\n---\na\n---\nb",
			wantName: "x", wantDesc: "d", wantBody: "a\n---\nb",
		},
		{name: "no front matter", in: "# Title\n", wantError: `does not start with a front matter line "---"`},
		{name: "empty file", in: "", wantError: `does not start with a front matter line`},
		{name: "not closed", in: "---\nname: x\ndescription: d\n", wantError: `no closing line "---"`},
		{name: "only an opening fence", in: "---", wantError: `no closing line`},
		{name: "bad YAML", in: "---\nname: [x\ndescription: d\n---\n", wantError: "front matter is not a YAML mapping"},
		{name: "YAML list", in: "---\n- a\n- b\n---\n", wantError: "front matter is not a YAML mapping"},
		{name: "duplicate key", in: "---\nname: a\nname: b\ndescription: d\n---\n", wantError: "front matter is not a YAML mapping"},
		{name: "empty front matter", in: "---\n---\nbody", wantError: "front matter has no name"},
		{name: "no name", in: "---\ndescription: d\n---\n", wantError: "front matter has no name"},
		{name: "null name", in: "---\nname:\ndescription: d\n---\n", wantError: "front matter has no name"},
		{name: "name a number", in: "---\nname: 12\ndescription: d\n---\n", wantError: "name is not a string but a number"},
		{name: "name a list", in: "---\nname: [a]\ndescription: d\n---\n", wantError: "name is not a string but a list"},
		{name: "name with a slash", in: "---\nname: a/b\ndescription: d\n---\n", wantError: `name "a/b" has '/'`},
		{name: "name with a space", in: "---\nname: 'a b'\ndescription: d\n---\n", wantError: `has ' '`},
		{name: "name starting with a dash", in: "---\nname: -a\ndescription: d\n---\n", wantError: `has '-'`},
		{name: "name too long", in: "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", wantError: "65 characters, more than 64"},
		{name: "no description", in: "---\nname: a\n---\n", wantError: "front matter has no description"},
		{name: "blank description", in: "---\nname: a\ndescription: '  '\n---\n", wantError: "description is empty"},
		{name: "description a mapping", in: "---\nname: a\ndescription: {x: 1}\n---\n", wantError: "description is not a string but a mapping"},
		{name: "description too long", in: "---\nname: a\ndescription: " + strings.Repeat("é", 1025) + "\n---\n", wantError: "1025 characters, more than 1024"},
		{name: "not UTF-8", in: "---\nname: a\ndescription: \xff\n---\n", wantError: "not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fm, err := parseSkillFile([]byte(tt.in))
			if tt.wantError != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantError)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantName, fm.name)
			assert.Equal(t, tt.wantDesc, fm.description)
			assert.Equal(t, tt.wantBody, fm.body)
			if tt.wantMeta == "" {
				assert.Nil(t, fm.meta)
			} else {
				got, err := json.Marshal(fm.meta)
				require.NoError(t, err)
				assert.JSONEq(t, tt.wantMeta, string(got))
			}
		})
	}
}

// Front matter comes from files the host installs, not from the network,
// but a parser that panics or accepts an invalid skill is cheap to catch.
func FuzzFrontMatter(f *testing.F) {
	for _, seed := range []string{
		"---\nname: pdf\ndescription: Read PDFs.\n---\n# PDF\n",
		"\uFEFF---\r\nname: a\r\ndescription: d\r\n---\r\n",
		"---\nname: x\ndescription: d\nmetadata: {1: [a, {b: c}]}\n---\n",
		"---\nname: &a x\ndescription: *a\n---\n",
		"---\na: &a [*a]\n---\n",
		"---\nname: [x\n---\n",
		"---\n---\n",
		"---",
		"",
		"---\nname: x\ndescription: !!binary aGVsbG8=\n---\n",
		"---\n? [a, b]\n: c\nname: x\ndescription: d\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fm, err := parseSkillFile(data)
		if err != nil {
			return
		}
		if checkName(fm.name) != nil {
			t.Errorf("accepted an invalid name %q", fm.name)
		}
		if n := utf8.RuneCountInString(fm.description); n == 0 || n > MaxDescriptionLen || strings.TrimSpace(fm.description) != fm.description {
			t.Errorf("accepted a description of %d characters: %q", n, fm.description)
		}
		if _, ok := fm.meta["name"]; ok {
			t.Error("name kept in meta")
		}
		if _, ok := fm.meta["description"]; ok {
			t.Error("description kept in meta")
		}
		if !utf8.ValidString(fm.body) {
			t.Error("body is not UTF-8")
		}
	})
}
