package testserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ElicitationTools are the tools a server made with [Options.Elicit] has
// beside [Tools]. Each asks the user for input in the multi round-trip
// style (server.NewInputRequestBuilder), which mcp-go turns into an
// elicitation/create request for a client of a protocol before 2026-07-28;
// each answers with what it got back:
//
//   - ask: a form for a name (a string, required) and an age (an integer
//     from 0), under the request state "state-1". It answers
//     "accept name=<name> age=<age> state=<the state echoed back>",
//     "decline" or "cancel".
//   - ask_url: asks, in URL mode, to open https://auth.example.com/link?code=7,
//     and answers "accept", "decline" or "cancel".
//   - ask_secret: a form asking for a password (which a client must not
//     collect), answering as ask does with the action only.
var ElicitationTools = []string{"ask", "ask_secret", "ask_url"}

// elicitationTools returns the tools of ElicitationTools.
func elicitationTools() []server.ServerTool {
	form := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "title": "Name", "minLength": 1},
			"age":  map[string]any{"type": "integer", "title": "Age", "minimum": 0},
		},
		"required": []string{"name"},
	}
	return []server.ServerTool{
		{
			Tool: mcp.NewTool("ask", mcp.WithDescription("Asks the user for a name and an age.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if res := server.ElicitationResponse(req.Params.InputResponses, "who"); res != nil {
					if res.Action != mcp.ElicitationResponseActionAccept {
						return mcp.NewToolResultText(string(res.Action)), nil
					}
					var c struct {
						Name string      `json:"name"`
						Age  json.Number `json:"age"`
					}
					raw, _ := json.Marshal(res.Content)
					if err := json.Unmarshal(raw, &c); err != nil {
						return mcp.NewToolResultError("bad content: " + string(raw)), nil
					}
					return mcp.NewToolResultText(fmt.Sprintf("accept name=%s age=%s state=%s", c.Name, c.Age, req.Params.RequestState)), nil
				}
				return server.NewInputRequestBuilder("state-1").Elicit("who", mcp.ElicitationParams{
					Message: "Who are you?", RequestedSchema: form,
				}).ToolResult(), nil
			},
		},
		{
			Tool: mcp.NewTool("ask_url", mcp.WithDescription("Asks the user to open a link.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if res := server.ElicitationResponse(req.Params.InputResponses, "link"); res != nil {
					return mcp.NewToolResultText(string(res.Action)), nil
				}
				return server.NewInputRequestBuilder("").Elicit("link", mcp.ElicitationParams{
					Mode: mcp.ElicitationModeURL, Message: "Link your account", ElicitationID: "e7",
					URL: "https://auth.example.com/link?code=7",
				}).ToolResult(), nil
			},
		},
		{
			Tool: mcp.NewTool("ask_secret", mcp.WithDescription("Asks the user for a password in a form.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if res := server.ElicitationResponse(req.Params.InputResponses, "pw"); res != nil {
					return mcp.NewToolResultText(string(res.Action)), nil
				}
				return server.NewInputRequestBuilder("").Elicit("pw", mcp.ElicitationParams{
					Message: "Your password, please",
					RequestedSchema: map[string]any{"type": "object",
						"properties": map[string]any{"password": map[string]any{"type": "string"}}},
				}).ToolResult(), nil
			},
		},
	}
}
