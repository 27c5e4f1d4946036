package agent_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/planround/planround/agent/agenttest"
)

// strict is set for the second pass of the suite: every test runs again
// against servers that enforce a strict chat template (agenttest.CheckAll),
// with agents configured to satisfy it (see newServer and newAgent).
var strict bool

// TestMain runs the package's tests twice: as written, then in the strict
// pass (unless the first failed). Benchmarks run once.
func TestMain(m *testing.M) {
	code := m.Run()
	if code != 0 || flag.Lookup("test.bench").Value.String() != "" || flag.Lookup("test.list").Value.String() != "" {
		os.Exit(code)
	}
	if testing.Verbose() {
		fmt.Println("=== strict chat templates: every test again against servers that enforce them")
	}
	strict = true
	os.Exit(m.Run())
}

// serverChecks are the checks a test server enforces: what every request
// must satisfy whatever the shape, and in the strict pass a strict chat
// template too.
func serverChecks() agenttest.Check {
	if strict {
		return agenttest.CheckAll
	}
	return agenttest.CheckArguments | agenttest.CheckEmptyAssistant
}
