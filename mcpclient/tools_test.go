package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// entryWith is a server entry holding tools with an empty schema.
func entryWith(name string, tools ...string) *serverEntry {
	e := &serverEntry{cfg: &expanded{ServerConfig: ServerConfig{Name: name}}, log: slog.New(slog.DiscardHandler)}
	var ts []mcp.Tool
	for _, n := range tools {
		ts = append(ts, mcp.NewTool(n))
	}
	e.setTools(ts)
	return e
}

func names(c *Client) []string {
	var out []string
	for _, t := range c.Tools() {
		out = append(out, t.Definition().Name)
	}
	return out
}

func TestToolNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	for _, tc := range []struct {
		name    string
		entries []*serverEntry
		want    []string
	}{
		{"as they are", []*serverEntry{entryWith("a", "search", "read"), entryWith("b", "write")},
			[]string{"search", "read", "write"}},
		{"collisions prefixed on both sides", []*serverEntry{entryWith("a", "search", "read"), entryWith("my server", "search", "write")},
			[]string{"a__search", "read", "my_server__search", "write"}},
		{"invalid characters", []*serverEntry{entryWith("a", "files.read", "ünïcode", "")},
			[]string{"files_read", "_n_code", "tool"}},
		{"same after replacing", []*serverEntry{entryWith("a", "read.file", "read_file", "read/file")},
			[]string{"read_file", "read_file_2", "read_file_3"}},
		{"collision after replacing", []*serverEntry{entryWith("a", "read.file"), entryWith("b", "read_file")},
			[]string{"a__read_file", "b__read_file"}},
		{"long", []*serverEntry{entryWith("a", long+"_one", long+"_two")},
			[]string{fitName(long + "_one"), fitName(long + "_two")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(&Client{entries: tc.entries})
			if !slices.Equal(got, tc.want) {
				t.Errorf("names %q, want %q", got, tc.want)
			}
			for _, n := range got {
				if _, err := agent.NewToolRegistry(agent.FuncTool{Def: agent.ToolDefinition{Name: n}}); err != nil {
					t.Errorf("the agent refuses %q: %v", n, err)
				}
			}
		})
	}
	if a, b := fitName(long+"_one"), fitName(long+"_two"); len(a) != maxName || a == b {
		t.Errorf("long names %q and %q: want %d characters and different", a, b, maxName)
	}
}

// A host's own tools win: an MCP tool of the same name is registered with
// its server's prefix.
func TestRegisterBesideHostTools(t *testing.T) {
	c := &Client{entries: []*serverEntry{entryWith("files", "read", "write")}}
	host := agent.FuncTool{Def: agent.ToolDefinition{Name: "write"}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "", nil }}
	reg, err := agent.NewToolRegistry(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !slices.Equal(got, []string{"files__write", "read", "write"}) {
		t.Errorf("registered %v", got)
	}
	if tl, _, _ := reg.Lookup("write"); func() bool { _, ok := tl.(*mcpTool); return ok }() {
		t.Error("the host's tool was replaced")
	}

	taken, _ := agent.NewToolRegistry(host, agent.FuncTool{Def: agent.ToolDefinition{Name: "files__write"}})
	if err := c.Register(taken); err == nil || !strings.Contains(err.Error(), "both taken") {
		t.Errorf("err = %v, want both names taken", err)
	}
}

// Servers reports the names Register gave the tools, prefixed where the
// host had the name; a tool listed since Register has its name in Tools.
func TestServersReportRegisteredNames(t *testing.T) {
	files := entryWith("my files", "read", "write")
	files.shared = &sharedServer{e: files}
	c := &Client{entries: []*serverEntry{files}}
	status := func() []string { return c.Servers()[0].Tools }
	if got := status(); !slices.Equal(got, []string{"read", "write"}) {
		t.Errorf("before Register: %v", got)
	}

	host := agent.FuncTool{Def: agent.ToolDefinition{Name: "write"}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "", nil }}
	reg, err := agent.NewToolRegistry(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	want := []string{"read", "my_files__write"}
	if got := status(); !slices.Equal(got, want) {
		t.Errorf("after Register: %v, want %v", got, want)
	}
	for _, name := range want {
		if tl, _, _ := reg.Lookup(name); tl == nil {
			t.Errorf("%q is not in the registry", name)
		}
	}

	// The server lists a new tool: it is not registered.
	files.setTools([]mcp.Tool{mcp.NewTool("read"), mcp.NewTool("write"), mcp.NewTool("delete")})
	if got := status(); !slices.Equal(got, []string{"read", "my_files__write", "delete"}) {
		t.Errorf("after a list change: %v", got)
	}
}

// Input schemas as servers write them become parameters the agent checks
// arguments against: references into definitions work, and a schema the
// agent cannot use goes to the model in the description.
func TestInputSchemas(t *testing.T) {
	leaktest.Check(t)
	srv := server.NewMCPServer("schemas", "1.0.0", server.WithToolCapabilities(false))
	ok := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	// Draft-07 style: definitions, $schema and a top-level description,
	// which mcp-go drops or renames on the way.
	srv.AddTool(mcp.NewToolWithRawSchema("draft7", "definitions and $ref", json.RawMessage(`{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"type": "object",
		"description": "a person",
		"definitions": {"Name": {"type": "string", "minLength": 2}, "Pet": {"type": "object", "properties": {"name": {"$ref": "#/definitions/Name"}}, "required": ["name"]}},
		"properties": {"name": {"$ref": "#/definitions/Name"}, "pets": {"type": "array", "items": {"$ref": "#/definitions/Pet"}}},
		"required": ["name"],
		"additionalProperties": false
	}`)), ok)
	srv.AddTool(mcp.NewToolWithRawSchema("defs", "$defs", json.RawMessage(`{
		"type": "object",
		"$defs": {"Level": {"enum": ["low", "high"]}},
		"properties": {"level": {"$ref": "#/$defs/Level"}}
	}`)), ok)
	srv.AddTool(mcp.NewToolWithRawSchema("untyped", "no type", json.RawMessage(`{"properties": {"n": {"type": "integer"}}}`)), ok)
	srv.AddTool(mcp.NewToolWithRawSchema("elsewhere", "refers to another document", json.RawMessage(`{
		"type": "object", "properties": {"cfg": {"$ref": "https://example.com/config.schema.json"}}
	}`)), ok)
	ts := servertest.NewTestStreamableHTTPServer(srv)
	t.Cleanup(ts.Close)
	c := newClient(t, Options{}, ServerConfig{Name: "schemas", URL: ts.URL + "/mcp"})

	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatalf("the agent refused a converted schema: %v", err)
	}
	_, def, _ := reg.Lookup("elsewhere")
	if !strings.Contains(def.Description, "Arguments (JSON schema):") || !strings.Contains(def.Description, "config.schema.json") {
		t.Errorf("elsewhere: description %q, want the schema in it", def.Description)
	}
	if p := def.Parameters; p["type"] != "object" || p["$ref"] != nil {
		t.Errorf("elsewhere: parameters %v, want an open object", p)
	}
	_, def, _ = reg.Lookup("untyped")
	if def.Parameters["type"] != "object" {
		t.Errorf("untyped: parameters %v, want an object", def.Parameters)
	}

	for _, tc := range []struct {
		tool, args string
		valid      bool
	}{
		{"draft7", `{"name":"Ann","pets":[{"name":"Rex"}]}`, true},
		{"draft7", `{"name":"A"}`, false},                         // minLength through $ref
		{"draft7", `{"name":"Ann","pets":[{"name":"R"}]}`, false}, // nested $ref in a definition
		{"draft7", `{"name":"Ann","age":3}`, false},               // additionalProperties
		{"draft7", `{}`, false},                                   // required
		{"defs", `{"level":"high"}`, true},
		{"defs", `{"level":"medium"}`, false},
		{"untyped", `{"n":1}`, true},
		{"untyped", `{"n":"one"}`, false},
		{"elsewhere", `{"cfg":{"anything":true}}`, true},
	} {
		got := callAs(t, c, "s", tc.tool, tc.args)
		valid := got.State == agent.StateResult && got.Result == "ok"
		if valid != tc.valid {
			t.Errorf("%s %s: %+v, want valid=%v", tc.tool, tc.args, got, tc.valid)
		}
		if !tc.valid && got.Cause != agent.CauseInvalidArguments {
			t.Errorf("%s %s: cause %q, want invalid_arguments", tc.tool, tc.args, got.Cause)
		}
	}
}

// SkipApproval covers a server's tools, SkipApprovalTools some of them;
// DisabledTools are left out.
func TestToolConfig(t *testing.T) {
	readOnly := entryWith("docs")
	readOnly.cfg.SkipApproval = true
	readOnly.setTools([]mcp.Tool{mcp.NewTool("search"), mcp.NewTool("fetch")})
	mixed := entryWith("files")
	mixed.cfg.SkipApprovalTools = []string{"read"}
	mixed.cfg.DisabledTools = []string{"delete"}
	mixed.setTools([]mcp.Tool{mcp.NewTool("read"), mcp.NewTool("write"), mcp.NewTool("delete")})

	var got []string
	for _, tl := range (&Client{entries: []*serverEntry{readOnly, mixed}}).Tools() {
		d := tl.Definition()
		got = append(got, fmt.Sprintf("%s skip=%v", d.Name, d.SkipApproval))
	}
	want := []string{"search skip=true", "fetch skip=true", "read skip=true", "write skip=false"}
	if !slices.Equal(got, want) {
		t.Errorf("tools %q, want %q", got, want)
	}
}
