package agenttest_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planround/planround/internal/outside"
)

// TestOutsideModule: a module of its own, outside the repository (its
// go.mod replaces planround with this checkout), builds copies of
// examples/cli, examples/webchat and examples/aisdk (so ui/aisdk too) and a
// program that uses only agent and agent/agenttest. Go refuses an internal package to another module, so
// this fails as soon as an example, or what a test needs of the fake
// model, depends on one. The programs then run: the kit program runs a
// turn against the scripted server and one in process, and the CLI answers
// a prompt on the built-in demo model.
//
// The build runs offline (GOPROXY=off): everything comes from the module
// cache the repository's own build filled, checked against its go.sum and
// examples/go.sum, also when that cache started empty (see
// internal/outside). The examples' module (examples/go.mod) is required and
// replaced by the checkout's examples/, so a copy imports its shared
// packages (examples/tracefile) as a user's copy would.
func TestOutsideModule(t *testing.T) {
	ctx, cancel := outside.Context(t)
	defer cancel()

	m := outside.New(ctx, t)
	if _, err := os.Stat(filepath.Join(m.Repo, "examples", "cli")); err != nil {
		t.Fatalf("the repository at %s has no examples/cli: %v", m.Repo, err)
	}
	dir := m.Dir
	copyProgram(t, filepath.Join(m.Repo, "examples", "cli"), filepath.Join(dir, "cli"))
	copyProgram(t, filepath.Join(m.Repo, "examples", "webchat"), filepath.Join(dir, "webchat"))
	copyProgram(t, filepath.Join(m.Repo, "examples", "aisdk"), filepath.Join(dir, "aisdk"))
	copyProgram(t, filepath.Join("testdata", "outside", "kit"), filepath.Join(dir, "kit"))

	// The CLI must choose its demo model.
	env := append(m.Env, "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "OPENAI_MODEL=")
	bin := filepath.Join(dir, "bin")
	m.Build(ctx, t, bin+string(filepath.Separator), "./...")

	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	got := run("kit")
	for _, want := range []string{
		"server: add = 5\nserver: 2 + 3 = 5.\nserver requests: 3 left: 0\n",
		"in process: add = 5\nin process: 2 + 3 = 5.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("kit printed\n%s\nwant it to contain\n%s", got, want)
		}
	}
	got = run("cli", "-yes", "-json", "What's the weather in Paris?")
	if !strings.Contains(got, `"name":"get_weather","state":"result"`) || !strings.Contains(got, "demo data") {
		t.Errorf("cli on the demo model printed\n%s", got)
	}
}

// TestExamplesImportOnlyPublicPackages: a file of a public package that
// holds Example functions imports no internal package, so that what the
// documentation shows can be copied into another module. The Examples of
// an internal package (internal/person's) document it for this module's
// own code, which may import it.
func TestExamplesImportOnlyPublicPackages(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != repo {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if rel, _ := filepath.Rel(repo, path); slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), "internal") {
			return nil // not shown to users
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(src), "\nfunc Example") {
			return nil
		}
		files++
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.Contains(p+"/", "/internal/") {
				rel, _ := filepath.Rel(repo, path)
				t.Errorf("%s holds Example functions and imports %s", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file with Example functions under %s", repo)
	}
}

// copyProgram copies the directory tree at src to dst, without test files:
// what a user copies to start a program of their own.
func copyProgram(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}
