package durable

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// replicaBin is the replica program, built once by TestMain; buildErr says
// why it is not there.
var (
	replicaBin string
	buildErr   error
)

// TestMain builds the replica before any test starts, so that the build
// does not count against a test's time.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "planround-durable-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	replicaBin, buildErr = build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds ./replica into dir, with the race detector when the tests
// have it (so the build shares their cache).
func build(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go is not on PATH: %w", err)
	}
	bin := filepath.Join(dir, "replica")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goBin, append(args, "./replica")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./replica: %w\n%s", err, out)
	}
	return bin, nil
}
