package mcpclient

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/internal/leaktest"
)

// TestStructuredOutput: a tool that declares an output schema gives the
// model its structured content as JSON, checked against the schema; a
// result that does not match it, or has none, is an error the model reads.
// A tool without an output schema, and an error result, are as before.
func TestStructuredOutput(t *testing.T) {
	leaktest.Check(t)
	srv := server.NewMCPServer("structured", "1.0.0", server.WithToolCapabilities(false))
	schema := json.RawMessage(`{"type":"object","properties":{"temp":{"type":"number"},"city":{"type":"string"}},"required":["temp","city"],"additionalProperties":false}`)
	result := func(structured any, isErr bool) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a text copy")}, StructuredContent: structured, IsError: isErr}, nil
		}
	}
	add := func(name string, h server.ToolHandlerFunc) {
		srv.AddTool(mcp.NewTool(name, mcp.WithDescription(name), mcp.WithRawOutputSchema(schema)), h)
	}
	add("good", result(map[string]any{"city": "Oslo", "temp": 4.5}, false))
	add("wrong_type", result(map[string]any{"city": "Oslo", "temp": "warm"}, false))
	add("extra", result(map[string]any{"city": "Oslo", "temp": 1, "wind": 3}, false))
	add("none", result(nil, false))
	add("failed", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("the sensor is down"), nil
	})
	srv.AddTool(mcp.NewTool("plain", mcp.WithDescription("no output schema")), result(map[string]any{"temp": "anything"}, false))
	ts := servertest.NewTestStreamableHTTPServer(srv)
	t.Cleanup(ts.Close)
	c := newClient(t, Options{}, ServerConfig{Name: "structured", URL: ts.URL + "/mcp"})
	ctx := t.Context()

	got, err := tool(t, c, "good").Execute(ctx, json.RawMessage(`{}`), nil)
	if err != nil || got != `{"city":"Oslo","temp":4.5}` {
		t.Errorf("good: %q, %v; want the structured content as compact JSON", got, err)
	}
	for name, want := range map[string]string{
		"wrong_type": "does not match its output schema",
		"extra":      "does not match its output schema",
		"none":       "has no structured content",
		"failed":     "the sensor is down",
	} {
		got, err := tool(t, c, name).Execute(ctx, json.RawMessage(`{}`), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q, %v; want an error saying %q", name, got, err, want)
		}
	}
	got, err = tool(t, c, "plain").Execute(ctx, json.RawMessage(`{}`), nil)
	if err != nil || got != "a text copy" {
		t.Errorf("plain: %q, %v; want its text as before", got, err)
	}
}
