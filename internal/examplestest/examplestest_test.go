package examplestest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runCall is a call of Run in a package of test/examples.
var runCall = regexp.MustCompile(`examplestest\.Run\(t, "\./([^"]+)/\.\.\."\)`)

// TestEveryExampleRun: every package of the examples' module is run by
// exactly one package of test/examples, each calling Run for
// "./<its own name>/...", so that the README's `go test ./...` tests them
// all.
func TestEveryExampleRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	repo := Repo(t)
	list := exec.Command(goBin, "list", "./...")
	list.Dir = filepath.Join(repo, Dir)
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./... in %s: %v", list.Dir, err)
	}
	const module = "github.com/planround/planround/examples/"
	runs := map[string]int{} // example package -> wrappers that run it
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		rel, ok := strings.CutPrefix(strings.TrimSpace(line), module)
		if !ok {
			t.Errorf("go list in examples/ lists %s, outside the examples' module", strings.TrimSpace(line))
			continue
		}
		pkgs = append(pkgs, rel)
		runs[rel] = 0
	}
	if len(pkgs) < 3 {
		t.Fatalf("go list in examples/ found %d packages:\n%s", len(pkgs), out)
	}

	wrappers, err := filepath.Glob(filepath.Join(repo, "test", "examples", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrappers {
		src, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(filepath.Dir(w))
		calls := runCall.FindAllStringSubmatch(string(src), -1)
		if len(calls) != 1 || calls[0][1] != name {
			t.Errorf("%s calls Run %d times (%q), want once, for \"./%s/...\"", w, len(calls), calls, name)
			continue
		}
		matched := false
		for _, p := range pkgs {
			if p == name || strings.HasPrefix(p, name+"/") {
				runs[p]++
				matched = true
			}
		}
		if !matched {
			t.Errorf("%s runs ./%s/..., which matches no package of examples/", w, name)
		}
	}
	for _, p := range pkgs {
		if runs[p] != 1 {
			t.Errorf("examples/%s is run by %d packages of test/examples, want 1 (add test/examples/%s)", p, runs[p], strings.Split(p, "/")[0])
		}
	}
}

// TestRun: run passes the flags on, reports a run that passes with its
// output, and one that fails with its error and output.
func TestRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26.0\n")
	write("pass/pass_test.go", "package pass\n\nimport \"testing\"\n\nfunc TestPass(t *testing.T) {\n\tif testing.Short() {\n\t\tt.Log(\"short\")\n\t}\n}\n")
	write("fail/fail_test.go", "package fail\n\nimport \"testing\"\n\nfunc TestFail(t *testing.T) { t.Fatal(\"this one fails\") }\n")

	cmdline, out, err := run(t.Context(), goBin, dir, "./pass/...", time.Time{}, []string{"-short", "-v", "-count=1"})
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	if want := "go test -timeout=0 -short -v -count=1 ./pass/..."; !strings.HasPrefix(cmdline, want) {
		t.Errorf("command line %q, want it to start with %q", cmdline, want)
	}
	if !strings.Contains(string(out), "--- PASS: TestPass") || !strings.Contains(string(out), "short") {
		t.Errorf("output of the passing run:\n%s", out)
	}

	_, out, err = run(t.Context(), goBin, dir, "./fail/...", time.Now().Add(time.Hour), nil)
	if err == nil {
		t.Fatalf("the failing run reported no error:\n%s", out)
	}
	if !strings.Contains(string(out), "this one fails") || !strings.Contains(string(out), "FAIL") {
		t.Errorf("output of the failing run:\n%s", out)
	}

	_, _, err = run(t.Context(), goBin, dir, "./pass/...", time.Now().Add(time.Minute), nil)
	if err == nil || !strings.Contains(err.Error(), "too little") {
		t.Errorf("a run with a minute left: %v, want it refused", err)
	}
}
