package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// listChange makes srv add a tool, which sends
// notifications/tools/list_changed, and waits until reg has it.
func listChange(t *testing.T, srv *changingServer, reg *agent.ToolRegistry, name string) {
	t.Helper()
	srv.add(mcp.NewTool(name, mcp.WithString("key")))
	waitFor(t, "the registry has "+name, func() bool {
		_, _, ok := reg.Lookup(name)
		return ok
	})
}

// ownedBy reports whether reg's tool name is the MCP tool mcpName of
// server.
func ownedBy(reg *agent.ToolRegistry, name, server, mcpName string) bool {
	tl, _, ok := reg.Lookup(name)
	mt, mine := tl.(*mcpTool)
	return ok && mine && mt.e.cfg.Name == server && mt.mcpName == mcpName
}

// TestSkipApprovalOutlivesListChanges: a tool the configuration lets run
// without a card, which the host decided must ask
// (ToolRegistry.SetSkipApproval), goes on asking after its server's list
// changed, also after the server took the tool out of its list and put it
// back; and after another server listed a tool of the same name, the name
// goes on meaning the same tool.
func TestSkipApprovalOutlivesListChanges(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	files := newChangingServer(t, mcp.NewTool("wipe", mcp.WithString("key")), mcp.NewTool("read", mcp.WithString("key")))
	other := newChangingServer(t, mcp.NewTool("search", mcp.WithString("key")))
	cfg := files.config("files")
	cfg.SkipApprovalTools = []string{"wipe"}
	c := newClient(t, Options{KV: new(memory.MemStore)}, cfg, other.config("other"))
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	person := &recordingApprover{}
	reg, a := registered(t, c, model, person)
	if err := reg.SetSkipApproval("wipe", false); err != nil {
		t.Fatal(err)
	}
	asks := func(when string) {
		t.Helper()
		if _, def, _ := reg.Lookup("wipe"); def.SkipApproval {
			t.Errorf("%s: wipe skips approval again", when)
		}
		chunks := runCalls(t, a, model, context.Background(), [2]string{"wipe", `{"key":"k"}`})
		if got := resultsOf(chunks)["wipe"]; got != "wipe: k" {
			t.Errorf("%s: wipe = %q", when, got)
		}
		if asked := person.take(); len(asked) != 1 || asked[0].Name != "wipe" {
			t.Errorf("%s: the person was asked about %v, want wipe", when, callNames(asked))
		}
	}
	asks("before any change")

	listChange(t, files, reg, "extra")
	asks("after a list change")

	files.srv.DeleteTools("wipe")
	waitFor(t, "wipe is out of the registry", func() bool { _, _, ok := reg.Lookup("wipe"); return !ok })
	files.add(mcp.NewTool("wipe", mcp.WithString("key")))
	waitFor(t, "wipe is back", func() bool { _, _, ok := reg.Lookup("wipe"); return ok })
	asks("after the server took wipe out and put it back")

	other.add(mcp.NewTool("wipe", mcp.WithString("key")))
	waitFor(t, "the registry has the other server's wipe", func() bool {
		for _, n := range reg.Names() {
			if ownedBy(reg, n, "other", "wipe") {
				return true
			}
		}
		return false
	})
	if !ownedBy(reg, "wipe", "files", "wipe") || !ownedBy(reg, "other__wipe", "other", "wipe") {
		t.Errorf("after another server listed a wipe, the registry has %v: want wipe to stay files' wipe", reg.Names())
	}
	asks("after another server listed a tool of the same name")
}

// TestRemovedToolStaysRemoved: a tool the host took out of the registry
// (ToolRegistry.Remove), or replaced with a tool of its own, does not come
// back when its server's list changes, under its name or another.
func TestRemovedToolStaysRemoved(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	files := newChangingServer(t, mcp.NewTool("wipe", mcp.WithString("key")), mcp.NewTool("read", mcp.WithString("key")))
	c := newClient(t, Options{KV: new(memory.MemStore)}, files.config("files"))
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	reg, _ := registered(t, c, model, &recordingApprover{})
	if !reg.Remove("wipe") {
		t.Fatal("wipe was not registered")
	}
	ownRead := agent.FuncTool{Def: agent.ToolDefinition{Name: "read"}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "the host's", nil }}
	if !reg.Remove("read") {
		t.Fatal("read was not registered")
	}
	if err := reg.Add(ownRead); err != nil {
		t.Fatal(err)
	}

	for i, name := range []string{"extra", "more"} {
		listChange(t, files, reg, name)
		for _, n := range []string{"wipe", "files__wipe", "files__read"} {
			if _, _, ok := reg.Lookup(n); ok {
				t.Errorf("list change %d: %s is back: %v", i+1, n, reg.Names())
			}
		}
		if tl, _, _ := reg.Lookup("read"); tl == nil {
			t.Errorf("list change %d: the host's read is gone", i+1)
		} else if out, _ := tl.Execute(context.Background(), nil, nil); out != "the host's" {
			t.Errorf("list change %d: read is not the host's", i+1)
		}
	}

	// Registering again is a list change too.
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := reg.Lookup("wipe"); ok {
		t.Errorf("Register brought wipe back: %v", reg.Names())
	}
}
