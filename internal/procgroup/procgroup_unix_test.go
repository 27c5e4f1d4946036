//go:build unix

package procgroup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// The command runs as exec would run it: its arguments as they are
// (nothing a shell would expand or split), its standard streams, its pid
// and its exit status.
func TestStartRunsAsIs(t *testing.T) {
	leaktest.Check(t)
	args := []string{"a b", "$HOME", "", "'q'", `"dq"`, "*", ";ls", "`id`", "\\n"}
	script := `printf '%s|' "$@"; echo; read line; echo "in:$line"; echo "pid:$$"; echo oops >&2; exit 7`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Stdin = strings.NewReader("hello\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Wait waits for the copy of the output, which must end when the
	// command exits (TestOutputEndsWithCommand): if it did not, this test
	// would not hang.
	cmd.WaitDelay = 10 * time.Second
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Kill()
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("Wait: %v, want exit status 7", err)
	}
	want := strings.Join(args, "|") + "|\nin:hello\npid:" + strconv.Itoa(cmd.Process.Pid) + "\n"
	if stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "oops\n" {
		t.Errorf("stderr %q", stderr.String())
	}
}

// A command that cannot start fails as cmd.Start fails.
func TestStartFailsAsExecDoes(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"planround-no-such-command", "/nonexistent/planround-server", plain, dir} {
		want := exec.Command(name).Start()
		if want == nil {
			t.Fatalf("%s starts", name)
		}
		g, err := Start(exec.Command(name))
		if err == nil {
			g.Kill()
			t.Errorf("%s: Start succeeded", name)
			continue
		}
		if err.Error() != want.Error() {
			t.Errorf("%s: Start: %v, want %v", name, err, want)
		}
	}
}

// The command's output ends when it exits: the guard, which lives on until
// the group is killed, holds none of its streams.
func TestOutputEndsWithCommand(t *testing.T) {
	leaktest.Check(t)
	cmd := exec.Command("sh", "-c", "echo hi")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Kill()
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(out)
		read <- string(b)
	}()
	select {
	case got := <-read:
		if got != "hi\n" {
			t.Errorf("output %q", got)
		}
	case <-time.After(10 * time.Second):
		g.Kill()
		<-read
		t.Fatal("the output did not end when the command exited")
	}
	if err := cmd.Wait(); err != nil {
		t.Error(err)
	}
}
