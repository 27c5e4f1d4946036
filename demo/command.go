package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/procgroup"
)

// DefaultCommandTimeout is run_command's timeout when [RunCommand] is
// given none.
const DefaultCommandTimeout = 30 * time.Second

// maxOutput bounds the output run_command keeps and reports.
const maxOutput = 64 << 10

// pipeGrace is how long run_command waits, after the process group was
// killed, for the output pipe to close. A process that left the group
// (setsid) and the command's cgroup, or that left the group where there is
// no cgroup, may hold it open; the pipe is then closed under it.
const pipeGrace = 2 * time.Second

// RunCommand returns the run_command tool: it runs a command with sh -c in
// the current directory, streams its output (stdout and stderr together)
// to the call's progress line by line as it arrives, and returns it.
// The command runs in its own process group; the whole group is killed
// when the command's shell exits, when timeout passes (0 means
// [DefaultCommandTimeout]) and when the call's context ends, so no
// background child outlives the call. On Linux the group is also killed
// when the process that started it dies, even by SIGKILL. Where that
// process may make cgroups (root, or a cgroup v2 delegated to its user),
// the command also runs in a cgroup of its own, killed and removed at the
// same moments, which reaches a child that left the group (setsid, a
// double fork); without one, such a child survives. A child can still
// leave the cgroup by moving itself to another, which a process of the
// same user may do (see package internal/procgroup).
//
// A non-zero exit status and a timeout are reported in the result; an
// ended context returns the output so far and the context's error. The
// tool needs approval.
func RunCommand(timeout time.Duration) agent.Tool {
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	return agent.FuncTool{
		Def: agent.ToolDefinition{
			Name:        "run_command",
			Description: "Run a shell command (sh -c) on the user's machine and return its output (stdout and stderr).",
			Parameters:  objectSchema("command", "The shell command line, for example: ls -la"),
		},
		Fn: func(ctx context.Context, args json.RawMessage, progress agent.Progress) (string, error) {
			var a struct {
				Command string `json:"command"`
			}
			if err := decodeArgs(args, &a); err != nil {
				return "", err
			}
			if strings.TrimSpace(a.Command) == "" {
				return "", errors.New("command is required")
			}
			return runCommand(ctx, a.Command, timeout, progress)
		},
	}
}

func runCommand(ctx context.Context, command string, timeout time.Duration, progress agent.Progress) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("run_command: %w", err)
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = pw, pw
	group, err := procgroup.Start(cmd)
	if err != nil {
		pr.Close()
		pw.Close()
		return "", fmt.Errorf("run_command: %w", err)
	}
	pw.Close() // the children hold the write end now

	out := &output{progress: progress}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		out.copy(pr)
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr, ctxErr error
	timedOut := false
	select {
	case waitErr = <-waitDone:
		// The shell is done; background children it left are not
		// wanted either.
		group.Kill()
	case <-timer.C:
		group.Kill()
		waitErr = <-waitDone
		timedOut = true
	case <-ctx.Done():
		group.Kill()
		waitErr = <-waitDone
		ctxErr = ctx.Err()
	}
	grace := time.NewTimer(pipeGrace)
	defer grace.Stop()
	select {
	case <-readDone:
	case <-grace.C:
		pr.Close() // unblocks the reader
		<-readDone
	}
	pr.Close()

	result := out.String()
	switch {
	case ctxErr != nil:
		return result, ctxErr
	case timedOut:
		return result + fmt.Sprintf("\n[timed out after %s; the command was killed]", timeout), nil
	}
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) {
		return result + fmt.Sprintf("\n[exit status %d]", exitErr.ExitCode()), nil
	}
	if waitErr != nil {
		return result, fmt.Errorf("run_command: %w", waitErr)
	}
	if result == "" {
		return "(no output)", nil
	}
	return result, nil
}

// output collects a command's output up to maxOutput and forwards each
// line to the progress as it arrives.
type output struct {
	progress  agent.Progress
	buf       strings.Builder
	truncated bool
}

func (o *output) copy(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			o.write(line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (o *output) write(p []byte) {
	if o.truncated {
		return
	}
	if room := maxOutput - o.buf.Len(); len(p) > room {
		p = p[:room]
		o.truncated = true
	}
	o.buf.Write(p)
	if o.progress != nil {
		_, _ = o.progress.Write(p)
	}
	if o.truncated {
		const note = "\n[output truncated]\n"
		o.buf.WriteString(note)
		if o.progress != nil {
			_, _ = o.progress.WriteString(note)
		}
	}
}

// String returns the output. It must be called after copy returned.
func (o *output) String() string { return o.buf.String() }
