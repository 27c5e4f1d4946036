// Package outside builds throwaway modules on this repository as another
// module would: a go.mod of their own that requires planround and the
// examples' module (replaced by this checkout and its examples/) and builds
// offline, from the module cache alone.
//
// A module of its own loads more of the module graph than the repository's
// own build does: the repository's go.mod files are complete for their
// packages, so its build never reads the go.mod files of older versions
// its dependencies' go.mod files name (go-logr/stdr names go-logr/logr
// v1.2.2). A throwaway module that required planround alone would need
// them, and an empty module cache (a fresh machine) does not hold them. So
// the throwaway go.mod requires, at the same versions, every module the
// repository's go.mod and examples/go.mod require: its graph is then cut
// where theirs are, and everything it needs is what `go test ./...` in the
// repository downloaded already. New makes sure of that, whatever the
// tests that ran before downloaded: it runs `go mod download` in both
// modules first, through the configured proxy (a no-op when the cache
// holds it all), and the throwaway module then builds offline.
package outside

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Module is a throwaway module in a temporary directory.
type Module struct {
	// Dir is the module's root, Repo the repository's.
	Dir, Repo string
	// Env is the environment its go commands and programs run with:
	// offline (GOPROXY=off), no workspace, the local toolchain.
	Env []string

	goBin string
}

// New fills the module cache with what the repository's packages and the
// examples need and writes a module named example.com/outside in a
// temporary directory of t: its go.mod (see the package doc) and the lines
// of the repository's go.sum and examples/go.sum. It skips t when the go
// command is not on PATH, and fails it instead when PLANROUND_REQUIRE_ALL
// is 1.
func New(ctx context.Context, t testing.TB) *Module {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("go is not on PATH (PLANROUND_REQUIRE_ALL=1): cannot build the outside module")
		}
		t.Skip("go is not on PATH: cannot build the outside module")
	}
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	m := &Module{Dir: t.TempDir(), Repo: filepath.Dir(strings.TrimSpace(string(out))), goBin: goBin}
	var sums []string
	for _, dir := range []string{m.Repo, filepath.Join(m.Repo, examplesDir)} {
		// Each module on its own (GOWORK=off): the workspace's go.work
		// names the load harness too, whose modules no outside module needs.
		download := exec.CommandContext(ctx, goBin, "mod", "download")
		download.Dir, download.Env = dir, append(os.Environ(), "GOWORK=off")
		if b, err := download.CombinedOutput(); err != nil {
			t.Fatalf("go mod download in %s (the outside module builds from the module cache it fills): %v\n%s", dir, err, b)
		}
		sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, strings.Split(string(sum), "\n")...)
	}
	gomod, err := GoMod("example.com/outside", m.Repo)
	if err != nil {
		t.Fatal(err)
	}
	m.Write(t, "go.mod", gomod)
	slices.Sort(sums)
	m.Write(t, "go.sum", strings.TrimPrefix(strings.Join(slices.Compact(sums), "\n"), "\n")+"\n")
	m.Env = append(os.Environ(),
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"),
		"GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	return m
}

// examplesDir is the examples' module, in the repository.
const examplesDir = "examples"

const (
	sdkPath      = "github.com/planround/planround"
	examplesPath = sdkPath + "/examples"
)

// GoMod returns the go.mod of a module named name that requires this
// repository, found at repo, and its examples' module, at repo/examples,
// each replaced by its directory, and every module their go.mod files
// require, at the same versions (examples/go.mod's where both name one:
// the examples build with the SDK's requirements, so theirs are never
// older).
func GoMod(name, repo string) (string, error) {
	var order []string
	version := map[string]string{}
	for _, dir := range []string{repo, filepath.Join(repo, examplesDir)} {
		reqs, err := requirements(filepath.Join(dir, "go.mod"))
		if err != nil {
			return "", err
		}
		for _, r := range reqs {
			if r.path == sdkPath {
				continue
			}
			if _, ok := version[r.path]; !ok {
				order = append(order, r.path)
			}
			version[r.path] = r.version
		}
	}
	var b strings.Builder
	b.WriteString("module " + name + "\n\ngo 1.26.0\n\n")
	b.WriteString("require (\n")
	b.WriteString("\t" + sdkPath + " v0.0.0-00010101000000-000000000000\n")
	b.WriteString("\t" + examplesPath + " v0.0.0-00010101000000-000000000000\n")
	for _, path := range order {
		b.WriteString("\t" + path + " " + version[path] + "\n")
	}
	b.WriteString(")\n\n")
	b.WriteString("replace " + sdkPath + " => " + repo + "\n\n")
	b.WriteString("replace " + examplesPath + " => " + filepath.Join(repo, examplesDir) + "\n")
	return b.String(), nil
}

// requirement is a line of a go.mod's require directives.
type requirement struct{ path, version string }

// requirements returns the requirements of the go.mod at path, in their
// order: the modules of its require lines and blocks.
func requirements(path string) ([]requirement, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var reqs []requirement
	add := func(line string) {
		line, _, _ = strings.Cut(line, "//")
		if fields := strings.Fields(line); len(fields) == 2 {
			reqs = append(reqs, requirement{fields[0], fields[1]})
		}
	}
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inBlock && line == ")":
			inBlock = false
		case inBlock:
			add(line)
		case line == "require (":
			inBlock = true
		case strings.HasPrefix(line, "require "):
			add(strings.TrimPrefix(line, "require "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, nil
}

// Write writes a file of the module, at rel, failing t on error.
func (m *Module) Write(t testing.TB, rel, content string) {
	t.Helper()
	path := filepath.Join(m.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Build runs go build -o out (a directory when it ends in a separator)
// on the module's packages pkgs, with -race when the tests run with it
// (the build then reuses the packages the race build of the tests
// compiled). It fails t with the build's output.
func (m *Module) Build(ctx context.Context, t testing.TB, out string, pkgs ...string) {
	t.Helper()
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, m.goBin, append(args, pkgs...)...)
	cmd.Dir, cmd.Env = m.Dir, m.Env
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module outside the repository: %v\n%s", err, b)
	}
}

// Limit is how long a test may spend building an outside module and
// running its programs. A build on a warm cache takes seconds; on an empty
// module cache (a fresh machine, or .ci/run's check of one) it compiles
// every dependency again, openai-go and the SQLite driver the largest,
// which takes minutes on a small machine (docs/BENCHMARKS.md, "Cold build
// of the web chat").
const Limit = 10 * time.Minute

// Context returns a context that ends after Limit, or 30 seconds before
// t's deadline when that comes first, so that a slow build fails with its
// output rather than with the test binary's timeout.
func Context(t *testing.T) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(Limit)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(deadline) {
		deadline = d.Add(-30 * time.Second)
	}
	return context.WithDeadline(t.Context(), deadline)
}
