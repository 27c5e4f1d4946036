package planround_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/planround/planround/internal/outside"
)

// readmeLimit is the README's size bound: what it is, the two commands, a
// program, the packages and links; the manuals live in docs/.
const readmeLimit = 12_000

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docFiles returns README.md and the Markdown files of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 {
		t.Fatalf("docs/ holds %d Markdown files: %q", len(docs), docs)
	}
	return append([]string{"README.md"}, docs...)
}

// codeBlocks returns the fenced code blocks of a Markdown text, each with
// its info string (the language after the fence).
func codeBlocks(md string) (langs, blocks []string) {
	var cur strings.Builder
	in := false
	lang := ""
	for line := range strings.Lines(md) {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, lang = true, strings.TrimSpace(strings.TrimPrefix(line, "```"))
			cur.Reset()
		case in && strings.TrimSpace(line) == "```":
			in = false
			langs, blocks = append(langs, lang), append(blocks, cur.String())
		case in:
			cur.WriteString(line)
		}
	}
	return langs, blocks
}

// withoutFences returns a Markdown text with the lines of its fenced code
// blocks left blank.
func withoutFences(md string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			in = !in
		}
		if in || strings.HasPrefix(line, "```") {
			b.WriteString("\n")
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// prose returns a Markdown text without its fenced code blocks and inline
// code spans, so that what looks like a link in code is not taken for one.
func prose(md string) string {
	// A code span: a run of backticks up to the same run, across a line end.
	return codeSpan.ReplaceAllString(withoutFences(md), "``")
}

var (
	codeSpan = regexp.MustCompile("``[^`](?:[^`]|`[^`])*``|`[^`]+`")
	mdLink   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`(?m)^#{1,6} +(.+?)\s*$`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// hyphens and underscores dropped, spaces as hyphens.
func slug(h string) string {
	h = strings.ToLower(strings.ReplaceAll(h, "`", ""))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestREADMEIsShort(t *testing.T) {
	readme := readFile(t, "README.md")
	if len(readme) >= readmeLimit {
		t.Errorf("README.md is %d bytes, want under %d: the manuals belong in docs/", len(readme), readmeLimit)
	}
}

// The README's first code block is the two commands a newcomer runs, and
// no section comes before it.
func TestREADMEStartsWithTheCommands(t *testing.T) {
	readme := readFile(t, "README.md")
	_, blocks := codeBlocks(readme)
	if len(blocks) == 0 {
		t.Fatal("README.md has no code block")
	}
	var cmds []string
	for line := range strings.Lines(blocks[0]) {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if want := []string{"go run ./examples/webchat", "go test ./..."}; !slices.Equal(cmds, want) {
		t.Errorf("README.md's first code block runs %q, want %q", cmds, want)
	}
	if i, j := strings.Index(readme, "\n## "), strings.Index(readme, "```"); i >= 0 && i < j {
		t.Errorf("README.md has a section before the commands: %q", readme[i+1:i+1+strings.Index(readme[i+1:], "\n")])
	}
}

// Every relative link of README.md and docs/*.md names a file or folder
// of the repository, and an anchor into a Markdown file names one of its
// headings. Every file of docs/ is linked from one of them.
func TestDocsLinks(t *testing.T) {
	files := docFiles(t)
	anchors := map[string][]string{} // Markdown file -> its headings' anchors
	for _, f := range files {
		for _, m := range heading.FindAllStringSubmatch(withoutFences(readFile(t, f)), -1) {
			anchors[filepath.Clean(f)] = append(anchors[filepath.Clean(f)], slug(m[1]))
		}
	}
	linked := map[string]bool{}
	for _, f := range files {
		links := mdLink.FindAllStringSubmatch(prose(readFile(t, f)), -1)
		if len(links) == 0 {
			t.Errorf("%s has no link", f)
		}
		for _, m := range links {
			target := m[1]
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := filepath.Clean(f)
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which does not exist: %v", f, target, err)
					continue
				}
				linked[resolved] = true
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !slices.Contains(anchors[resolved], anchor) {
				t.Errorf("%s links to %s: %s has no heading with the anchor %q (it has %q)", f, target, resolved, anchor, anchors[resolved])
			}
		}
	}
	for _, f := range files[1:] {
		if !linked[filepath.Clean(f)] {
			t.Errorf("%s is linked from neither README.md nor another file of docs/", f)
		}
	}
}

// Every package a program imports (all but internal/, the examples and the
// end-to-end tests) has a row in the README's table and a line in the
// package documentation of doc.go.
func TestEveryPackageListed(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goTool, "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	const module = "github.com/planround/planround/"
	readme, doc := readFile(t, "README.md"), readFile(t, "doc.go")
	n := 0
	for path := range strings.Lines(string(out)) {
		rel, ok := strings.CutPrefix(strings.TrimSpace(path), module)
		if !ok || strings.Contains(rel+"/", "internal/") || strings.HasPrefix(rel, "examples/") || strings.HasPrefix(rel, "test/") {
			continue
		}
		n++
		if !strings.Contains(readme, "[`"+rel+"`]("+rel+")") {
			t.Errorf("README.md's package table has no link [`%s`](%s)", rel, rel)
		}
		if !strings.Contains(doc, "//   - "+rel+": ") {
			t.Errorf("doc.go's package list has no line \"  - %s: \"", rel)
		}
	}
	if n < 15 {
		t.Fatalf("go list ./... found %d packages to list:\n%s", n, out)
	}
}

// The README's program compiles as a module of its own would build it: its
// first Go code block is a whole program, and only the public API it uses
// lets it build outside the repository (see internal/outside). The build
// takes a while on a cold cache, so -short skips it.
func TestREADMEProgramBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the README's program in a module of its own takes a while")
	}
	langs, blocks := codeBlocks(readFile(t, "README.md"))
	i := slices.Index(langs, "go")
	if i < 0 {
		t.Fatal("README.md has no go code block")
	}
	program := blocks[i]
	if !strings.HasPrefix(program, "package main\n") {
		t.Fatalf("README.md's first go code block is not a whole program (package main):\n%s", program)
	}
	ctx, cancel := outside.Context(t)
	defer cancel()
	m := outside.New(ctx, t)
	m.Write(t, "readme/main.go", program)
	m.Build(ctx, t, filepath.Join(m.Dir, "bin")+string(filepath.Separator), "./readme")
	if _, err := os.Stat(filepath.Join(m.Dir, "bin", "readme")); err != nil {
		t.Errorf("the build made no program: %v", err)
	}
}
