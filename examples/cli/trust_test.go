package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// With -trust-hints a trusted server's read-only, closed-world tool runs
// without a question; the same tool of an untrusted server is asked about,
// the question showing its hints.
func TestMCPTrustHints(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	model := toolModel(t, toolCall{"trusted__lookup", `{"key":"a"}`}, toolCall{"untrusted__lookup", `{"key":"b"}`})
	file := mcpFile(t, map[string]any{
		"trusted":   testServer(t, map[string]any{"args": []string{"-trust"}, "trusted": true}),
		"untrusted": testServer(t, map[string]any{"args": []string{"-trust"}}),
	})

	r := runCLI(t, "y\n", append(modelArgs(model), "-json", "-trust-hints", "-mcp", file, "look them up")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	chunks := parseChunks(t, r.stdout)
	tr := structure(trace(chunks))
	assert.Contains(t, tr, "tool:approval_required:untrusted__lookup")
	assert.NotContains(t, tr, "tool:approval_required:trusted__lookup", "trusted read-only hints")
	assert.Equal(t, 1, strings.Count(r.stderr, "approve [y] / reject [n]"), "one question: %s", r.stderr)
	assert.Contains(t, r.stderr, "hints: read-only, idempotent, closed world, untrusted hints")
	assert.Equal(t, "lookup: a", toolResult(t, chunks, "trusted__lookup"))
	assert.Equal(t, "lookup: b", toolResult(t, chunks, "untrusted__lookup"))
}
