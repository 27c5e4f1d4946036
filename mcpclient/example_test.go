package mcpclient_test

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/mcpclient"
)

// An MCP server's tool in an agent run. The server runs in this process,
// on 127.0.0.1 over streamable HTTP; the model is a scripted one that calls
// the tool, then answers.
func Example() {
	notes := server.NewMCPServer("notes", "1.0.0")
	notes.AddTool(mcp.NewTool("add_note",
		mcp.WithDescription("Saves a note."),
		mcp.WithString("text", mcp.Required()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("saved: " + text), nil
	})
	ts := servertest.NewTestStreamableHTTPServer(notes)
	defer ts.Close()

	ctx := context.Background()
	servers, err := mcpclient.New(ctx, []mcpclient.ServerConfig{
		{Name: "notes", URL: ts.URL + "/mcp"},
	}, mcpclient.Options{})
	if err != nil {
		panic(err)
	}
	defer servers.Close()
	tools, _ := agent.NewToolRegistry() // the host's own tools would go first
	if err := servers.Register(tools); err != nil {
		panic(err)
	}

	model := agenttest.NewServer()
	defer model.Close()
	model.Enqueue(
		agenttest.Reply().Call(0, "call_1", "add_note", `{"text":"buy milk"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Noted.").Finish("stop"),
	)
	a, err := agent.New(agent.Config{
		BaseURL:         model.URL(),
		HTTPClient:      model.Client(),
		Model:           "any",
		Tools:           tools,
		DisablePlanning: true,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(ctx, agent.Input{Message: "Remind me to buy milk."}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("%s: %s\n", c.Tool.Name, c.Tool.Result)
		case c.Kind == agent.KindToolCall:
			fmt.Println(c.Tool.Name, c.Tool.State)
		case c.Kind == agent.KindText:
			fmt.Println(c.Text)
		}
	}
	for _, s := range servers.Servers() {
		fmt.Println(s.Name, s.Transport, s.State, s.Tools)
	}
	// Output:
	// add_note start
	// add_note executing
	// add_note: saved: buy milk
	// Noted.
	// notes http connected [add_note]
}

// The configuration file format MCP clients share, with the extra fields
// of [mcpclient.ServerConfig].
func ExampleParseConfig() {
	servers, err := mcpclient.ParseConfig([]byte(`{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "skipApprovalTools": ["read_file"]},
		"github": {"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
		"browser": {"command": "browser-mcp", "isolation": "per_conversation", "callTimeout": "2m"}
	}}`))
	if err != nil {
		panic(err)
	}
	for _, s := range servers {
		isolation := s.Isolation
		if isolation == "" {
			isolation = mcpclient.IsolationShared
		}
		fmt.Printf("%s: %s%s (%s) %v\n", s.Name, s.Command, s.URL, isolation, s.Headers)
	}
	// Output:
	// browser: browser-mcp (per_conversation) map[]
	// files: npx (shared) map[]
	// github: https://api.githubcopilot.com/mcp/ (shared) map[Authorization:Bearer ${GITHUB_TOKEN}]
}
