package testserver

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TaskOptions adds the job tool, which the server may run as a task (MCP
// 2025-11-25), and declares task-augmented tools/call.
type TaskOptions struct {
	// Hold, when not nil, makes each call of job with "hold": true wait
	// until it is closed. (Not until the call's context ends: mcp-go's
	// server v1.2.1 ends the context of a task when the request that
	// created it has been answered; tasks/cancel still marks the task
	// cancelled.)
	Hold <-chan struct{}
	// Started, when not nil, is called as each call of job starts.
	Started func(text string)
}

// taskServerOptions are the options of a server with tasks.
func taskServerOptions() []server.ServerOption {
	return []server.ServerOption{server.WithTaskCapabilities(true, true, true)}
}

// addTaskTools adds the job tool: it answers "job done: <text>", at once
// or, with "hold", once TaskOptions.Hold is closed.
func addTaskTools(srv *server.MCPServer, o *TaskOptions) {
	srv.AddTool(mcp.NewTool("job",
		mcp.WithDescription("A long job the server runs as a task"),
		mcp.WithString("text", mcp.Required()),
		mcp.WithBoolean("hold"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text := req.GetString("text", "")
		if o.Started != nil {
			o.Started(text)
		}
		if req.GetBool("hold", false) && o.Hold != nil {
			<-o.Hold
		}
		return mcp.NewToolResultText("job done: " + text), nil
	})
}
