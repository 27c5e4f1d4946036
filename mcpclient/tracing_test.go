package mcpclient_test

import (
	"context"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/oteltest"
	"github.com/planround/planround/mcpclient"
)

// TestTraceContextReachesTheServer: a tool call made by a traced run
// carries the W3C trace context of its execute_tool span in the request's
// _meta, where an MCP server reads it; an untraced call carries none.
func TestTraceContextReachesTheServer(t *testing.T) {
	leaktest.Check(t)
	var mu sync.Mutex
	var seen []map[string]any // the _meta fields of each call
	srv := server.NewMCPServer("echo", "1.0.0")
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fields := map[string]any{}
		if req.Params.Meta != nil {
			fields = req.Params.Meta.AdditionalFields
		}
		mu.Lock()
		seen = append(seen, fields)
		mu.Unlock()
		return mcp.NewToolResultText("ok"), nil
	})
	ts := servertest.NewTestStreamableHTTPServer(srv)
	defer ts.Close()

	ctx := context.Background()
	servers, err := mcpclient.New(ctx, []mcpclient.ServerConfig{{Name: "echo", URL: ts.URL + "/mcp"}}, mcpclient.Options{})
	require.NoError(t, err)
	defer servers.Close()
	tools, _ := agent.NewToolRegistry()
	require.NoError(t, servers.Register(tools))

	tp := &oteltest.TracerProvider{}
	model := agenttest.NewServer()
	defer model.Close()
	run := func(tp *oteltest.TracerProvider) {
		t.Helper()
		model.Enqueue(
			agenttest.Reply().Call(0, "call_1", "echo", `{"text":"hi"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Done.").Finish("stop"),
		)
		cfg := agent.Config{
			BaseURL: model.URL(), HTTPClient: model.Client(), Model: "m", Tools: tools, DisablePlanning: true,
			Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Approved: true}, nil
			}),
		}
		if tp != nil {
			cfg.TracerProvider = tp
		}
		a, err := agent.New(cfg)
		require.NoError(t, err)
		for _, err := range a.Run(ctx, agent.Input{Message: "echo hi"}) {
			require.NoError(t, err)
		}
	}
	run(tp)
	run(nil) // otel's global provider: no-op here

	var exec *oteltest.Ended
	for _, s := range tp.Ended() {
		if s.Name == "execute_tool echo" {
			exec = &s
		}
	}
	require.NotNil(t, exec, "the traced run recorded the call's span")
	sc := exec.SpanContext
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	assert.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", seen[0]["traceparent"],
		"the server sees the execute_tool span as its parent")
	assert.NotContains(t, seen[1], "traceparent", "an untraced run sends no trace context")
}
