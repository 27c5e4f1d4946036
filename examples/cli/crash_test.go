package main

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
)

// TestBinaryKilledLeavesNoCommand: when the CLI is killed with SIGKILL (no
// chance to clean up) while run_command runs, the command and the children
// it started die with it instead of living on as orphans.
func TestBinaryKilledLeavesNoCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only; looks for the children in /proc")
	}
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	secs := sleepSecs(t) // kills survivors at the end, so a failure leaks nothing
	// A background child and a foreground one: the shell forks both.
	p := startCLI(ctx, t, "-yes", "-json", commandPrompt("sleep "+secs+" & sleep "+secs+"; echo done"))
	p.await(ctx, t, "executing chunk", isState("run_command", agent.StateExecuting))
	for len(sleepers(t, secs)) < 2 {
		require.NoError(t, ctx.Err(), "the command's children never started; stderr: %s", p.stderr.String())
		time.Sleep(10 * time.Millisecond)
	}

	require.NoError(t, p.cmd.Process.Kill()) // SIGKILL
	for range p.chunks {
	}
	_ = p.cmd.Wait()
	assert.Eventually(t, func() bool { return len(sleepers(t, secs)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"the command's processes outlived the killed CLI: %v", sleepers(t, secs))
}
