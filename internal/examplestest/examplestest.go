// Package examplestest runs the tests of the examples' module from this
// module's `go test ./...`.
//
// The README's `go test ./...`, run at the repository's root, tests the
// examples. Since examples/ became a module of its own (examples/go.mod,
// issue 37), the pattern ./... stops at its go.mod, in the workspace
// (go.work) too: it matches the packages of the module it starts in, and
// no others. So each package of test/examples calls [Run] for one
// directory of examples/: a `go test` of the examples' module, in a process
// of its own, with the flags of the test that runs it. Each directory has
// its own package so that each gets its own test binary, and so its own
// timeout (go test's default is 10 minutes a binary): the web chat's tests
// alone take minutes under -race. TestEveryExampleRun checks that every
// package of the examples' module is run by one of them.
package examplestest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/internal/procgroup"
)

// Dir is the examples' module, in the repository.
const Dir = "examples"

// Run runs `go test` on the packages pattern names in the examples' module
// ("./webchat/...", relative to examples/), and fails t with its output
// when they fail. The run is given t's flags: -race (when t's binary was
// built with it), -short, -v, and -count when it was set; and the time left
// before t's deadline as its -timeout, less a margin so that a hung test's
// stacks are printed before t's own binary times out. When t ends first,
// the run and everything it started are killed.
//
// It skips t when the go command is not on PATH, and fails it instead
// when PLANROUND_REQUIRE_ALL is 1.
//
// go test caches t's result when it passes, keyed by the files and
// environment variables t's process read: not by those the run's own
// processes read. So Run reads every directory of the repository (but
// .git and node_modules), which keys the result to the names, sizes and
// modification times of the files in them, and the variables of the
// environment the run may read (see readInputs): t runs again when any of
// them changes, and the run's own go test, which tracks what its tests
// read, then reruns those whose inputs changed.
func Run(t *testing.T, pattern string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("go is not on PATH (PLANROUND_REQUIRE_ALL=1): cannot run the examples' tests")
		}
		t.Skip("go is not on PATH: cannot run the examples' tests")
	}
	repo := Repo(t)
	if err := readInputs(repo); err != nil {
		t.Fatal(err)
	}
	deadline, _ := t.Deadline()
	cmdline, out, err := run(t.Context(), goBin, filepath.Join(repo, Dir), pattern, deadline, flags())
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	t.Logf("%s:\n%s", cmdline, out)
}

// run runs goBin's `go test` in dir on pattern with flags, and returns
// the command line, its output and why it failed. A zero deadline means
// none.
func run(ctx context.Context, goBin, dir, pattern string, deadline time.Time, flags []string) (cmdline string, out []byte, err error) {
	timeout := "0" // no deadline: none for the run either
	if !deadline.IsZero() {
		// The run's test binaries time out a minute before the deadline,
		// and the run is killed 15 seconds before it.
		left := time.Until(deadline)
		if left < 2*time.Minute {
			return "go test " + pattern, nil, fmt.Errorf("%v left before the test's deadline: too little to run the examples' tests", left.Round(time.Second))
		}
		timeout = (left - time.Minute).Round(time.Second).String()
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-15*time.Second))
		defer cancel()
	}
	args := append([]string{"test", "-timeout=" + timeout}, flags...)
	args = append(args, pattern)
	cmdline = "go " + strings.Join(args, " ") + " (in " + dir + ")"
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	group, err := procgroup.Start(cmd)
	if err != nil {
		return cmdline, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		group.Kill()
		err = fmt.Errorf("%w, killed: %w", context.Cause(ctx), <-done)
	}
	group.Kill() // what the run left behind, if anything
	return cmdline, buf.Bytes(), err
}

// Repo returns the repository's root: the directory of this module's
// go.mod, as the go command finds it from t's directory.
func Repo(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %q: not in a module", gomod)
	}
	return filepath.Dir(gomod)
}

// flags returns the flags of this test binary that the run takes.
func flags() []string {
	var fs []string
	if race {
		fs = append(fs, "-race")
	}
	if testing.Short() {
		fs = append(fs, "-short")
	}
	if testing.Verbose() {
		fs = append(fs, "-v")
	}
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.count" {
			fs = append(fs, "-count="+f.Value.String())
		}
	})
	return fs
}

// readInputs reads every directory under repo but .git and node_modules,
// and its Go files, and looks up every variable of the environment, those
// the go command reads (goEnv) and those the Go files name in a call of
// os.Getenv or os.LookupEnv, set or not (one set since the last run must
// make it run again), so that go test's cache keys the result of the test
// that calls it to them (see Run).
func readInputs(repo string) error {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		os.Getenv(name)
	}
	for _, name := range goEnv {
		os.Getenv(name)
	}
	return filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.Type().IsRegular() && strings.HasSuffix(path, ".go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range envCall.FindAllSubmatch(src, -1) {
				os.Getenv(string(m[1]))
			}
		}
		return nil
	})
}

// goEnv are variables the go command reads that change what a run
// builds or where from.
var goEnv = []string{"PATH", "GOFLAGS", "GOWORK", "GOPROXY", "GOTOOLCHAIN", "GOMODCACHE", "GOENV", "GOEXPERIMENT", "CGO_ENABLED"}

// envCall is a call of os.Getenv or os.LookupEnv with a literal name.
var envCall = regexp.MustCompile(`(?:Getenv|LookupEnv)\("([A-Za-z_][A-Za-z0-9_]*)"\)`)
