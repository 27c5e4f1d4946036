package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// An MCP server's question is asked on the terminal: its server and
// message, then each field; a value the server's schema refuses (a
// negative age) is asked again, and the answer reaches the server. A URL
// is shown with its host, never opened, and declined on "n".
func TestMCPElicitationOnTheTerminal(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	file := mcpFile(t, map[string]any{"asker": testServer(t, map[string]any{"args": []string{"-elicit"}, "skipApproval": true})})

	// The form's fields come by name: age, then name. Yes, age -1, name
	// Ada (refused by the schema: asked again), then yes, 36, Ada.
	r := runCLI(t, "y\n-1\nAda\ny\n36\nAda\n", append(modelArgs(toolModel(t, toolCall{"ask", `{}`})), "-json", "-mcp", file, "who am I?")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "accept name=Ada age=36 state=state-1", toolResult(t, parseChunks(t, r.stdout), "ask"), "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "The MCP server asker asks: Who are you?")
	assert.Contains(t, r.stderr, "does not fit the requested schema")

	r = runCLI(t, "n\n", append(modelArgs(toolModel(t, toolCall{"ask_url", `{}`})), "-json", "-mcp", file, "link me")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "decline", toolResult(t, parseChunks(t, r.stdout), "ask_url"))
	assert.Contains(t, r.stderr, "It asks you to open a link on auth.example.com:\n  https://auth.example.com/link?code=7")
}
