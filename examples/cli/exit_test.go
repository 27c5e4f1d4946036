package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// Each way a run ends has its exit status (the binary's Ctrl-C tests check
// 130 for a real SIGINT).
func TestExitStatuses(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(agenttest.HTTPError(500, "the model is on fire"))
	failing := []string{"-retries", "0", "-base-url", srv.URL(), "-model", "m"}

	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  int
		last  string // the last entry of the -json trace, when -json
	}{
		{"finished", "y\n", []string{"-json", weatherPrompt}, exitOK, "round_end:2"},
		{"model error", "", append(failing, "-json", helloPrompt), exitError, ""},
		{"bad flags", "", []string{"-max-rounds", "0", "hi"}, exitUsage, ""},
		{"rejected at the terminal", "n\n", []string{weatherPrompt}, exitRejected, ""},
		{"rejected, with -json", "n not now\n", []string{"-json", weatherPrompt}, exitRejected, "interrupted"},
		{"rejected, then a turn that finished", weatherPrompt + "\nn\n" + helloPrompt + "\n", []string{"-json"}, exitRejected, "round_end:1"},
		{"the input ended at the question", "", []string{"-json", weatherPrompt}, exitError, "interrupted"},
		{"a sub-agent's call rejected: the run goes on", "n\n", []string{"-json", researchPrompt}, exitOK, "round_end:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.stdin, tc.args...)
			assert.Equal(t, tc.want, r.code, "stderr: %s", r.stderr)
			if tc.last != "" {
				tr := trace(parseChunks(t, r.stdout))
				require.NotEmpty(t, tr)
				assert.Equal(t, tc.last, tr[len(tr)-1], "trace: %v", tr)
			}
		})
	}

	t.Run("interrupted", func(t *testing.T) {
		// The run's context ends while the command runs, as Ctrl-C ends
		// the turn's.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		out := &signalWriter{marker: `"state":"executing"`, fn: cancel}
		var errb strings.Builder
		flag := filepath.Join(t.TempDir(), "never")
		cmd := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", flag)
		code := run(ctx, []string{"-yes", "-json", commandPrompt(cmd)}, strings.NewReader(""), out, &errb)
		assert.Equal(t, exitInterrupted, code, "stderr: %s", errb.String())
		tr := trace(parseChunks(t, out.String()))
		require.GreaterOrEqual(t, len(tr), 2)
		assert.Equal(t, []string{"rejected:run_command:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	})

	t.Run("-h lists them", func(t *testing.T) {
		r := runCLI(t, "", "-h")
		assert.Equal(t, exitOK, r.code)
		for _, s := range []string{
			"exit status:\n  0         the run finished\n",
			"\n  2         bad flags\n",
			"\n  3         a tool call was rejected, which ended the run\n",
			"\n  130       Ctrl-C interrupted the run",
		} {
			assert.Contains(t, r.stderr, s)
		}
	})
}
