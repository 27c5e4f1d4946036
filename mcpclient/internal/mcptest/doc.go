// Package mcptest runs MCP servers for the tests of package mcpclient: a
// stdio server of our own whose tools and modes misbehave on request (see
// the stdioserver command's documentation for its modes and flags, and
// package testserver's for its tools, which tests also serve in process over
// HTTP), and the third-party reference
// server @modelcontextprotocol/server-everything from npm over stdio, SSE and
// streamable HTTP.
//
// What a test needs but the machine lacks (the go command, Node.js, the npm
// packages) makes the test skip with a message saying how to get it, or fail
// when the environment variable PLANROUND_REQUIRE_ALL is 1, as in CI.
package mcptest

import (
	"fmt"
	"os"
	"testing"
)

// unavailable skips t because the machine lacks something, or fails it
// under PLANROUND_REQUIRE_ALL=1.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
		t.Fatal(msg + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
	}
	t.Skip(msg)
}
