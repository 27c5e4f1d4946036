package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/skills"
)

// skillFile returns a SKILL.md with that front matter and body.
func skillFile(name, description, body string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte("---\nname: " + name + "\ndescription: " + description + "\n---\n" + body)}
}

type nopProgress struct{}

func (nopProgress) Write(p []byte) (int, error)       { return len(p), nil }
func (nopProgress) WriteString(s string) (int, error) { return len(s), nil }

// getSkill calls get_skill directly, as the agent would.
func getSkill(ctx context.Context, s *skills.Set, name, file string) (string, error) {
	args := map[string]string{"name": name}
	if file != "" {
		args["file"] = file
	}
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return s.Tool().Execute(ctx, raw, nopProgress{})
}

func names(sks []skills.Skill) []string {
	out := []string{}
	for _, sk := range sks {
		out = append(out, sk.Name)
	}
	return out
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"pdf/SKILL.md":                {Data: []byte("---\nname: pdf\ndescription: Read PDF files.\nlicense: MIT\nallowed-tools: [Bash]\n---\n# PDF\n\nUse pdftotext.\n")},
		"pdf/reference.md":            {Data: []byte("the reference")},
		"pdf/scripts/extract.py":      {Data: []byte("print(1)")},
		"pdf/nested/SKILL.md":         skillFile("nested", "A SKILL.md inside a skill is one of its files.", ""),
		"pdf/.cache/x":                {Data: []byte("hidden")},
		"team/writing/style/SKILL.md": skillFile("style", "House style.", "Write short sentences."),
		"team/README.md":              {Data: []byte("not a skill")},
		".git/hooks/SKILL.md":         skillFile("git", "Never found: dot folders are not searched.", ""),
		"broken/SKILL.md":             {Data: []byte("---\nname: [broken\n---\n")},
		"nameless/SKILL.md":           {Data: []byte("---\ndescription: d\n---\n")},
		"z-copy/SKILL.md":             skillFile("pdf", "Same name as pdf/, found after it.", ""),
		"empty/.keep":                 {},
	}
	var logs bytes.Buffer
	s, err := skills.Load(fsys, skills.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)

	assert.Equal(t, []string{"pdf", "style"}, s.Names())
	pdf, ok := s.Lookup("pdf")
	require.True(t, ok)
	assert.Equal(t, skills.Skill{
		Name:        "pdf",
		Description: "Read PDF files.",
		Meta:        map[string]any{"license": "MIT", "allowed-tools": []any{"Bash"}},
		Body:        "# PDF\n\nUse pdftotext.",
		Dir:         "pdf",
		Files:       []string{"nested/SKILL.md", "reference.md", "scripts/extract.py"},
	}, pdf)
	style, ok := s.Lookup("style")
	require.True(t, ok)
	assert.Equal(t, "team/writing/style", style.Dir)
	assert.Nil(t, style.Files)
	_, ok = s.Lookup("nested")
	assert.False(t, ok, "a SKILL.md inside a skill's folder is not another skill")
	_, ok = s.Lookup("git")
	assert.False(t, ok, "dot folders are not searched")

	skipped := s.Skipped()
	require.Len(t, skipped, 3)
	assert.Equal(t, "broken", skipped[0].Dir)
	assert.ErrorContains(t, skipped[0].Err, "front matter is not a YAML mapping")
	assert.Equal(t, "nameless", skipped[1].Dir)
	assert.ErrorContains(t, skipped[1].Err, "front matter has no name")
	assert.Equal(t, "z-copy", skipped[2].Dir)
	assert.ErrorContains(t, skipped[2].Err, `the name "pdf" is taken by the skill in pdf`)
	for _, sk := range skipped {
		assert.Contains(t, logs.String(), "dir="+sk.Dir, "each skipped skill is logged")
	}
	assert.Equal(t, 3, strings.Count(logs.String(), "skill skipped"))
}

func TestLoadRootIsASkill(t *testing.T) {
	s, err := skills.Load(fstest.MapFS{
		"SKILL.md": skillFile("solo", "The root folder is the skill.", "body"),
		"ref.md":   {Data: []byte("ref")},
	})
	require.NoError(t, err)
	sk, ok := s.Lookup("solo")
	require.True(t, ok)
	assert.Equal(t, ".", sk.Dir)
	assert.Equal(t, []string{"ref.md"}, sk.Files)
	got, err := getSkill(context.Background(), s, "solo", "ref.md")
	require.NoError(t, err)
	assert.Equal(t, "ref", got)
}

func TestLoadEmptyAndMissing(t *testing.T) {
	s, err := skills.Load(fstest.MapFS{})
	require.NoError(t, err)
	assert.Empty(t, s.Skills())
	assert.Empty(t, s.Skipped())

	_, err = skills.LoadDir(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	assert.ErrorContains(t, err, "skills: ")
}

func TestLoadTooLargeSkill(t *testing.T) {
	big := skillFile("big", "d", strings.Repeat("x", skills.MaxFileSize))
	s, err := skills.Load(fstest.MapFS{"big/SKILL.md": big, "ok/SKILL.md": skillFile("ok", "d", "")})
	require.NoError(t, err)
	assert.Equal(t, []string{"ok"}, s.Names())
	require.Len(t, s.Skipped(), 1)
	assert.ErrorContains(t, s.Skipped()[0].Err, "file too large: SKILL.md has")
}

func TestEnabled(t *testing.T) {
	fsys := fstest.MapFS{
		"a/SKILL.md": skillFile("alpha", "First.", "Alpha body."),
		"b/SKILL.md": skillFile("beta", "Second.", "Beta body."),
		"c/SKILL.md": skillFile("gamma", "Third.", "Gamma body."),
	}
	all, err := skills.Load(fsys)
	require.NoError(t, err)
	perSession := map[string][]string{"s1": {"gamma", "alpha", "unknown"}}
	selected, err := skills.Load(fsys, skills.WithSelector(func(_ context.Context, sessionID string) []string {
		return perSession[sessionID]
	}))
	require.NoError(t, err)

	bg := context.Background()
	tests := []struct {
		name      string
		set       *skills.Set
		ctx       context.Context
		sessionID string
		want      []string
	}{
		{"default: all", all, bg, "s1", []string{"alpha", "beta", "gamma"}},
		{"context", all, skills.WithEnabled(bg, "beta"), "", []string{"beta"}},
		{"context, several, unknown ignored, set order", all, skills.WithEnabled(bg, "gamma", "nope", "alpha"), "", []string{"alpha", "gamma"}},
		{"context with no names: none", all, skills.WithEnabled(bg), "", []string{}},
		{"selector", selected, bg, "s1", []string{"alpha", "gamma"}},
		{"selector, another session: none", selected, bg, "s2", []string{}},
		{"context wins over selector", selected, skills.WithEnabled(bg, "beta"), "s1", []string{"beta"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(tt.set.Enabled(tt.ctx, tt.sessionID)))

			blocks, err := tt.set.Layer().Blocks(tt.ctx, tt.sessionID)
			require.NoError(t, err)
			if len(tt.want) == 0 {
				assert.Empty(t, blocks, "no block without enabled skills")
			} else {
				require.Len(t, blocks, 1, "one block for all enabled skills")
				assert.True(t, strings.HasPrefix(blocks[0], skills.Intro))
				for _, name := range []string{"alpha", "beta", "gamma"} {
					listed := strings.Contains(blocks[0], "\n- "+name+": ")
					assert.Equal(t, strings.Contains(strings.Join(tt.want, " "), name), listed, "%s listed", name)
				}
			}

			// get_skill agrees with the layer. Tools find the session
			// through agent.CallFromContext; without a call, it is "".
			if tt.sessionID != "" {
				return
			}
			for _, name := range []string{"alpha", "beta", "gamma"} {
				got, err := getSkill(tt.ctx, tt.set, name, "")
				if strings.Contains(strings.Join(tt.want, " "), name) {
					assert.NoError(t, err)
					assert.Contains(t, got, "body.")
				} else {
					assert.ErrorContains(t, err, `the skill "`+name+`" is not enabled in this conversation`)
				}
			}
		})
	}
}

func TestLayerBlock(t *testing.T) {
	s, err := skills.Load(fstest.MapFS{
		"a/SKILL.md": {Data: []byte("---\nname: alpha\ndescription: |\n  Line one.\n    Line two.\n---\n")},
		"b/SKILL.md": skillFile("beta", "Second.", ""),
	})
	require.NoError(t, err)
	blocks, err := s.Layer().Blocks(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{skills.Intro + "\n\n- alpha: Line one. Line two.\n- beta: Second."}, blocks)
}

func TestGetSkill(t *testing.T) {
	fsys := fstest.MapFS{
		"pdf/SKILL.md":           skillFile("pdf", "Read PDFs.", "# PDF\nUse pdftotext."),
		"pdf/reference.md":       {Data: []byte("# Reference\n")},
		"pdf/docs/deep/notes.md": {Data: []byte("notes")},
		"pdf/big.txt":            {Data: bytes.Repeat([]byte("x"), skills.MaxFileSize+1)},
		"pdf/image.png":          {Data: []byte{0x89, 'P', 'N', 'G', 0xff, 0xfe}},
		"pdf/link-in.md":         {Data: []byte("docs/deep/notes.md"), Mode: os.ModeSymlink},
		"pdf/docs/up.md":         {Data: []byte("../reference.md"), Mode: os.ModeSymlink},
		"pdf/link-out.md":        {Data: []byte("../secret/key.txt"), Mode: os.ModeSymlink},
		"pdf/link-dir":           {Data: []byte("../secret"), Mode: os.ModeSymlink},
		"pdf/link-abs.md":        {Data: []byte("/secret/key.txt"), Mode: os.ModeSymlink},
		"pdf/loop":               {Data: []byte("loop"), Mode: os.ModeSymlink},
		"pdf/.env":               {Data: []byte("TOP SECRET")},
		"pdf/.git/config":        {Data: []byte("TOP SECRET")},
		"pdf/docs/.hidden.md":    {Data: []byte("TOP SECRET")},
		"pdf/link-hidden.md":     {Data: []byte(".env"), Mode: os.ModeSymlink},
		"empty/SKILL.md":         skillFile("empty", "Only a description.", ""),
		"secret/key.txt":         {Data: []byte("TOP SECRET")},
	}
	s, err := skills.Load(fsys)
	require.NoError(t, err)
	pdf, _ := s.Lookup("pdf")
	assert.Equal(t, []string{"big.txt", "docs/deep/notes.md", "docs/up.md", "image.png", "link-in.md", "reference.md"}, pdf.Files,
		"hidden files and links that leave the folder, loop or lead to a hidden file are not listed")

	tests := []struct {
		name, skill, file string
		want              string // the result, when no error
		wantErr           string
	}{
		{name: "instructions", skill: "pdf", want: "# PDF\nUse pdftotext.\n\nFiles of this skill (get_skill with \"file\" returns one): big.txt, docs/deep/notes.md, docs/up.md, image.png, link-in.md, reference.md"},
		{name: "SKILL.md is the instructions", skill: "pdf", file: "SKILL.md", want: "# PDF\nUse pdftotext.\n\nFiles of this skill (get_skill with \"file\" returns one): big.txt, docs/deep/notes.md, docs/up.md, image.png, link-in.md, reference.md"},
		{name: "no body: the description", skill: "empty", want: "Only a description."},
		{name: "a file", skill: "pdf", file: "reference.md", want: "# Reference\n"},
		{name: "a file with ./", skill: "pdf", file: "./reference.md", want: "# Reference\n"},
		{name: "a deep file", skill: "pdf", file: "docs/deep/notes.md", want: "notes"},
		{name: "a link inside", skill: "pdf", file: "link-in.md", want: "notes"},
		{name: "a link up, still inside", skill: "pdf", file: "docs/up.md", want: "# Reference\n"},

		{name: "unknown skill", skill: "nope", wantErr: `there is no skill "nope"; the enabled skills are: empty, pdf`},
		{name: "dot-dot", skill: "pdf", file: "../secret/key.txt", wantErr: `file "../secret/key.txt" has a ".." element: leaves the skill folder`},
		{name: "dot-dot alone", skill: "pdf", file: "..", wantErr: `has a ".." element`},
		{name: "dot-dot inside", skill: "pdf", file: "docs/../../secret/key.txt", wantErr: `has a ".." element`},
		{name: "a/../../x", skill: "pdf", file: "a/../../x", wantErr: `has a ".." element`},
		{name: "absolute", skill: "pdf", file: "/etc/passwd", wantErr: `file "/etc/passwd" is an absolute path`},
		{name: "drive letter", skill: "pdf", file: "C:/Windows/win.ini", wantErr: "starts with a drive letter"},
		{name: "backslash", skill: "pdf", file: `..\secret\key.txt`, wantErr: "has a backslash"},
		{name: "backslash inside", skill: "pdf", file: `docs\deep\notes.md`, wantErr: "has a backslash"},
		{name: "trailing slash", skill: "pdf", file: "docs/", wantErr: "is not a file path"},
		{name: "double slash", skill: "pdf", file: "docs//deep/notes.md", wantErr: "is not a file path"},
		{name: "dot inside", skill: "pdf", file: "docs/./deep/notes.md", wantErr: "is not a file path"},
		{name: "link out", skill: "pdf", file: "link-out.md", wantErr: `link-out.md: a symbolic link leaves the skill folder`},
		{name: "through a link to a folder outside", skill: "pdf", file: "link-dir/key.txt", wantErr: `a symbolic link leaves the skill folder`},
		{name: "absolute link", skill: "pdf", file: "link-abs.md", wantErr: `a symbolic link to "/secret/key.txt" leaves the skill folder`},
		{name: "link loop", skill: "pdf", file: "loop", wantErr: "more than 40 symbolic links"},
		{name: "hidden file", skill: "pdf", file: ".env", wantErr: `file ".env" is hidden (".env" starts with a dot)`},
		{name: "hidden file with ./", skill: "pdf", file: "./.env", wantErr: `file ".env" is hidden`},
		{name: "hidden folder", skill: "pdf", file: ".git/config", wantErr: `(".git" starts with a dot)`},
		{name: "hidden deeper", skill: "pdf", file: "docs/.hidden.md", wantErr: `is hidden`},
		{name: "link to a hidden file", skill: "pdf", file: "link-hidden.md", wantErr: `link-hidden.md: a symbolic link leads to the hidden ".env"`},
		{name: "folder", skill: "pdf", file: "docs", wantErr: `"docs" is a folder of the skill "pdf"; its files are: big.txt`},
		{name: "missing", skill: "pdf", file: "missing.md", wantErr: `the skill "pdf" has no file "missing.md"; its files are: big.txt`},
		{name: "missing in an empty skill", skill: "empty", file: "x.md", wantErr: `it has no files besides its instructions`},
		{name: "too large", skill: "pdf", file: "big.txt", wantErr: "file too large: big.txt has 262145 bytes, more than the limit of 262144"},
		{name: "binary", skill: "pdf", file: "image.png", wantErr: `file "image.png" of the skill "pdf" is not UTF-8 text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := getSkill(context.Background(), s, tt.skill, tt.file)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "TOP SECRET")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestToolDefinition(t *testing.T) {
	s, err := skills.Load(fstest.MapFS{})
	require.NoError(t, err)
	def := s.Tool().Definition()
	assert.Equal(t, skills.ToolName, def.Name)
	assert.True(t, def.SkipApproval, "get_skill reads only the host's skill documents")
	assert.True(t, def.NoTruncate, "get_skill's text stays whole in later requests")
	schema, err := json.Marshal(def.Parameters)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"type": "object",
		"additionalProperties": false,
		"required": ["name"],
		"properties": {
			"name": {"type": "string", "description": "the skill's name, as the skills list gives it"},
			"file": {"type": "string", "description": "a file of the skill, as a path inside its folder such as reference.md; leave it out for the skill's instructions"}
		}
	}`, string(schema))
	_, err = agent.NewToolRegistry(s.Tool())
	require.NoError(t, err)
}
