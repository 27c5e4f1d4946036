package mcpclient

import (
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// The errors of a per_conversation server's sandboxes reach the model
// with the server's name once and no package prefix in the middle.
func TestConversationErrorsText(t *testing.T) {
	leaktest.Check(t)
	e := entryWith("slow", "echo")
	e.cfg.CallTimeout = 100 * time.Millisecond
	f := &fakeStarter{gate: make(chan struct{})} // starts never end
	e.sb = newSandboxes(f.start, 1, 0)
	c := &Client{entries: []*serverEntry{e}}

	got := callAs(t, c, "a", "echo", `{}`)
	want := `error: mcp server "slow": waiting for the conversation's server to start: no result within the call timeout of 100ms`
	if got.State != agent.StateResult || got.Result != want {
		t.Errorf("a start beyond the call timeout: %s %q, want %q", got.State, got.Result, want)
	}

	if err := e.sb.close(); err != nil {
		t.Fatal(err)
	}
	got = callAs(t, c, "a", "echo", `{}`)
	want = `error: mcp server "slow": the per-conversation servers are shut down`
	if got.State != agent.StateResult || got.Result != want {
		t.Errorf("after close: %s %q, want %q", got.State, got.Result, want)
	}
}
