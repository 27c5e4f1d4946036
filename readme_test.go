package planround_test

import (
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
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

// The README's programs compile as a module of its own would build them:
// its first Go code block is a whole program, and so is every other one
// that begins with "package main"; only the public API they use lets them
// build outside the repository (see internal/outside). The build takes a
// while on a cold cache, so -short skips it.
func TestREADMEProgramBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the README's programs in a module of their own takes a while")
	}
	langs, blocks := codeBlocks(readFile(t, "README.md"))
	var programs []string
	for i, lang := range langs {
		if lang != "go" {
			continue
		}
		if len(programs) == 0 && !strings.HasPrefix(blocks[i], "package main\n") {
			t.Fatalf("README.md's first go code block is not a whole program (package main):\n%s", blocks[i])
		}
		if strings.HasPrefix(blocks[i], "package main\n") {
			programs = append(programs, blocks[i])
		}
	}
	if len(programs) < 2 {
		t.Fatalf("README.md has %d whole programs, want 2 (a program, a durable service)", len(programs))
	}
	ctx, cancel := outside.Context(t)
	defer cancel()
	m := outside.New(ctx, t)
	for i, p := range programs {
		m.Write(t, fmt.Sprintf("readme%d/main.go", i+1), p)
	}
	bin := filepath.Join(m.Dir, "bin")
	m.Build(ctx, t, bin+string(filepath.Separator), "./...")
	for i := range programs {
		if _, err := os.Stat(filepath.Join(bin, fmt.Sprintf("readme%d", i+1))); err != nil {
			t.Errorf("the build made no program %d: %v", i+1, err)
		}
	}
}

// The README's durable service is the runnable Example_durableHost of
// ui/aisdk: its functions newService and owner are the same code, so what
// the README shows is what the Example runs (a restart in the middle of a
// turn, the tool run once).
func TestREADMEHostIsTheExample(t *testing.T) {
	langs, blocks := codeBlocks(readFile(t, "README.md"))
	var host string
	for i, lang := range langs {
		if lang == "go" && strings.Contains(blocks[i], "func newService(") {
			host = blocks[i]
		}
	}
	if host == "" {
		t.Fatal("README.md has no go code block with func newService")
	}
	readme := funcsOf(t, "README.md", host)
	example := funcsOf(t, "ui/aisdk/example_host_test.go", readFile(t, filepath.Join("ui", "aisdk", "example_host_test.go")))
	for _, name := range []string{"newService", "owner"} {
		switch {
		case readme[name] == "":
			t.Errorf("README.md's durable service has no func %s", name)
		case readme[name] != example[name]:
			t.Errorf("func %s differs between README.md and ui/aisdk/example_host_test.go:\nREADME:\n%s\nExample:\n%s", name, readme[name], example[name])
		}
	}
	if n := strings.Count(readme["newService"]+readme["owner"], "\n"); n > 40 {
		t.Errorf("the durable host (newService and owner) is %d lines, want at most 40", n)
	}
}

// funcsOf returns the source of src's top-level functions by name, with
// their doc comments, as gofmt prints them.
func funcsOf(t *testing.T, name, src string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	funcs := make(map[string]string)
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil {
			continue
		}
		var b strings.Builder
		if err := format.Node(&b, fset, &printer.CommentedNode{Node: fd, Comments: f.Comments}); err != nil {
			t.Fatalf("%s: func %s: %v", name, fd.Name.Name, err)
		}
		funcs[fd.Name.Name] = b.String()
	}
	return funcs
}
