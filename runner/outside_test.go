package runner_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/planround/planround/internal/outside"
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
	ctx, cancel := outside.Context(t)
	defer cancel()
	m := outside.New(ctx, t)
	src, err := os.ReadFile(filepath.Join("testdata", "outside", "durable", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	m.Write(t, "main.go", string(src))
	dir := m.Dir
	bin := filepath.Join(dir, "durable")
	m.Build(ctx, t, bin, ".")

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
