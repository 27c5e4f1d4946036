package planround_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The leaf packages import only the standard library: a Store
// implementation or a host that reads intent tags pulls in no provider SDK,
// and memory and intent do not import each other.
func TestLeavesImportOnlyTheStandardLibrary(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const module = "github.com/planround/planround/"
	leaves := []string{module + "memory", module + "intent"}
	// -deps lists every package the leaves build with, themselves last;
	// for each, whether it is in the standard library.
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}, leaves...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	var outside []string
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		// The leaves' own internal packages count as theirs: what they
		// build with is listed too.
		own := strings.HasPrefix(path, module) && strings.Contains(path, "/internal/")
		if std != "true" && !own && !slices.Contains(leaves, path) {
			outside = append(outside, path)
		}
	}
	if len(outside) > 0 {
		t.Errorf("memory and intent build with packages outside the standard library:\n%s", strings.Join(outside, "\n"))
	}

	// Neither imports the other, directly or not.
	for _, leaf := range leaves {
		out, err := exec.Command(goTool, "list", "-deps", leaf).Output()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", leaf, err, stderr(err))
		}
		for dep := range strings.Lines(string(out)) {
			dep = strings.TrimSpace(dep)
			if dep != leaf && slices.Contains(leaves, dep) {
				t.Errorf("%s imports %s", leaf, dep)
			}
		}
	}
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// internal/ is plumbing: the packages under it serve the SDK's packages and
// do not build on them, so none imports (in its tests either, directly or
// not) the packages that a host uses to run agents. memory's types and the
// other vocabulary packages are fine; memory's stores are not.
//
// internal/person is the exception, and is checked by
// TestPersonIsTheRunners: it is the runner's own, built on agent, approval
// and interact.
func TestInternalIsPlumbing(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const module = "github.com/planround/planround/"
	above := []string{
		"agent", "approval", "runner", "ui", "examples", "demo", "interact",
		"mcpclient", "memory/sqlitestore", "memory/pgstore", "test",
		"internal/person",
	}
	isAbove := func(path string) bool {
		for _, p := range above {
			if path == module+p || strings.HasPrefix(path, module+p+"/") {
				return true
			}
		}
		return false
	}
	list := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr(err))
		}
		return string(out)
	}

	// Directly, with each package's tests: who imports what.
	for line := range strings.Lines(list("-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./internal/...")) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if isAbove(pkg) {
			continue // internal/person
		}
		all := strings.Fields(imports) // the package's, then its tests'
		slices.Sort(all)
		for _, imp := range slices.Compact(all) {
			if isAbove(imp) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
	// Indirectly: everything internal/ and its tests build with. -test adds
	// the test variants, listed as "path [pkg.test]".
	var plumbing []string
	for line := range strings.Lines(list("./internal/...")) {
		if path := strings.TrimSpace(line); !isAbove(path) {
			plumbing = append(plumbing, path)
		}
	}
	for line := range strings.Lines(list(append([]string{"-deps", "-test"}, plumbing...)...)) {
		path, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if isAbove(path) {
			t.Errorf("internal/ builds with %s", path)
		}
	}
}

// internal/person holds the waiting services of the person in the loop
// (the approvals, with their audit, and the forms): the runner builds them,
// and no other package of the SDK or of the examples does, so that
// approval and interact keep only what decides or asks without a store.
// Outside tests, only runner imports internal/person, and the conformance
// kits whose users are tests: approval/approvaltest (RunStore, for a store's
// author) and memory/internal/upgradetest. internal/person itself, with
// its tests, builds on agent, approval and interact, never on runner or on
// what is built on the runner.
func TestPersonIsTheRunners(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const module = "github.com/planround/planround/"
	const person = module + "internal/person"
	allowed := []string{module + "runner", module + "approval/approvaltest", module + "memory/internal/upgradetest"}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...", "./examples/...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	importers := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || !slices.Contains(fields[1:], person) {
			continue
		}
		importers++
		if !slices.Contains(allowed, fields[0]) {
			t.Errorf("%s imports %s: only the runner builds the person's waiting services", fields[0], person)
		}
	}
	if importers == 0 {
		t.Errorf("nothing imports %s: the list is wrong", person)
	}

	// internal/person and its tests build with neither the runner nor what
	// stands on it.
	below := []string{"runner", "ui", "examples", "demo", "mcpclient", "test"}
	out, err = exec.Command(goTool, "list", "-deps", "-test", "./internal/person").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	for line := range strings.Lines(string(out)) {
		path, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, p := range below {
			if path == module+p || strings.HasPrefix(path, module+p+"/") {
				t.Errorf("internal/person builds with %s", path)
			}
		}
	}
}

// The library builds without the load harness's plotting library (gonum),
// which lives in the harness's own module (loadharness/).
func TestLibraryBuildsWithoutGonum(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const module = "github.com/planround/planround/"
	out, err := exec.Command(goTool, "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	// The library: every package but the examples and the end-to-end tests.
	var lib []string
	for path := range strings.Lines(string(out)) {
		path = strings.TrimSpace(path)
		if !strings.HasPrefix(path, module+"examples/") && !strings.HasPrefix(path, module+"test/") {
			lib = append(lib, path)
		}
	}
	if len(lib) < 10 {
		t.Fatalf("go list ./... found only %d library packages: %q", len(lib), lib)
	}
	out, err = exec.Command(goTool, append([]string{"list", "-deps"}, lib...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr(err))
	}
	for dep := range strings.Lines(string(out)) {
		if strings.HasPrefix(dep, "gonum.org/") {
			t.Errorf("the library builds with %s", strings.TrimSpace(dep))
		}
	}
}
