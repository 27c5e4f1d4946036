package runner_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutsideModuleKilled: a program in a module of its own, on the public
// packages only, with no option set beyond its SQLite store (no holder, no
// lease time, no sweeper setting), starts a turn that waits for approval
// and is killed with SIGKILL; the same program started again approves the
// call: the turn resumes and finishes, and the tool has run exactly once.
func TestOutsideModuleKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and waits out a dead process's lease (15 s)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("go is not on PATH (PLANROUND_REQUIRE_ALL=1): cannot build the outside module")
		}
		t.Skip("go is not on PATH: cannot build the outside module")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	repo := filepath.Dir(strings.TrimSpace(string(out)))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/outside\n\ngo 1.26.0\n\n"+
		"require github.com/planround/planround v0.0.0-00010101000000-000000000000\n\n"+
		"replace github.com/planround/planround => "+repo+"\n")
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	src, err := os.ReadFile(filepath.Join("testdata", "outside", "durable", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "main.go"), string(src))
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	bin := filepath.Join(dir, "durable")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, goBin, append(args, ".")...)
	build.Dir, build.Env = dir, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module outside the repository: %v\n%s", err, out)
	}

	db, effects := filepath.Join(dir, "chat.db"), filepath.Join(dir, "effects")
	start := exec.CommandContext(ctx, bin, db, effects, "start", "s1")
	stdout, err := start.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	start.Stderr = &stderr
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	approvalID, ok := strings.CutPrefix(strings.TrimSpace(line), "approval ")
	if err != nil || !ok {
		start.Process.Kill()
		start.Wait()
		t.Fatalf("the first process printed %q (%v), want its approval id\n%s", line, err, stderr.String())
	}
	if err := start.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start.Wait()

	approve := exec.CommandContext(ctx, bin, db, effects, "approve", "s1", approvalID)
	got, err := approve.CombinedOutput()
	if err != nil {
		t.Fatalf("the second process: %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "decided true\n") || !strings.Contains(string(got), "turn finished") {
		t.Errorf("the second process printed\n%s\nwant the decision taken and the turn finished", got)
	}
	ran, err := os.ReadFile(effects)
	if err != nil {
		t.Fatalf("the tool never ran: %v\n%s", err, got)
	}
	if n := strings.Count(string(ran), "\n"); n != 1 {
		t.Errorf("the tool ran %d times, want once:\n%s", n, ran)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
