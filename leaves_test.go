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
