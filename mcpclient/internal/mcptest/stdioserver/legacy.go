package main

import (
	"encoding/json"
	"io"
	"strings"
)

// legacy serves -mode=legacy on in and out until in ends: a server of
// protocol 2025-11-25 that ignores requests it does not know instead of
// refusing them.
func legacy(in io.Reader, out io.Writer) {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	var ignored []string
	for {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := dec.Decode(&req); err != nil {
			return
		}
		if req.ID == nil {
			continue // a notification
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{
				"protocolVersion": "2025-11-25",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "legacy", "version": "1"},
			}
		case "tools/list":
			result = map[string]any{"tools": []any{
				map[string]any{"name": "hello", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "ignored", "inputSchema": map[string]any{"type": "object"}},
			}}
		case "tools/call":
			text := "hi from legacy"
			if req.Params.Name == "ignored" {
				text = "none"
				if len(ignored) > 0 {
					text = strings.Join(ignored, ",")
				}
			}
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
		default:
			ignored = append(ignored, req.Method)
			continue
		}
		if err := enc.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}); err != nil {
			return
		}
	}
}
