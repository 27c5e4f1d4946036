package mcpclient

import (
	"net/http"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestServersDropsRemovedTool: a tool the server took out of its list
// (it sends notifications/tools/list_changed) leaves Servers, as it leaves
// Tools and the registry Register filled: Servers lists what the agent can
// call.
func TestServersDropsRemovedTool(t *testing.T) {
	for _, tr := range []Transport{TransportSSE, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) { testServersDropsRemovedTool(t, tr) })
	}
}

func testServersDropsRemovedTool(t *testing.T, tr Transport) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	files := newChangingServer(t, mcp.NewTool("wipe", mcp.WithString("key")), mcp.NewTool("read", mcp.WithString("key")))
	cfg := files.config("files")
	if tr == TransportHTTP {
		ts := servertest.NewTestStreamableHTTPServer(files.srv)
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		cfg.Transport, cfg.URL = TransportHTTP, ts.URL+"/mcp"
	}
	c := newClient(t, Options{KV: new(memory.MemStore)}, cfg)
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	if got := c.Servers()[0].Tools; !slices.Contains(got, "wipe") || !slices.Contains(got, "read") {
		t.Fatalf("Servers lists %v, want read and wipe", got)
	}

	files.srv.DeleteTools("wipe")
	// Right after connecting: at protocol 2026-07-28 the client may not
	// have its subscription to list changes yet, and reads the list again
	// once the server acknowledged it (TestToolRemovedBeforeSubscription).
	waitFor(t, "wipe is out of the registry", func() bool { _, _, ok := reg.Lookup("wipe"); return !ok })
	for _, tl := range c.Tools() {
		if tl.Definition().Name == "wipe" {
			t.Errorf("Tools still offers wipe")
		}
	}
	st := c.Servers()[0]
	if slices.Contains(st.Tools, "wipe") || !slices.Contains(st.Tools, "read") {
		t.Errorf("after the server removed wipe, Servers lists %v, want [read]", st.Tools)
	}
	if slices.Contains(st.Unapproved, "wipe") {
		t.Errorf("after the server removed wipe, Servers has it unapproved: %v", st.Unapproved)
	}
}
