package main

import "net/http"

// mcpServer is one MCP server as GET /api/mcp/servers shows it.
type mcpServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio, sse or http
	Isolation string `json:"isolation"` // shared or per_conversation
	// State is connected, connecting or down (a shared server), on_demand
	// (a per_conversation server: each session starts its own instance on
	// its first call) or closed.
	State string `json:"state"`
	// Tools are the names the model knows the server's tools by.
	Tools []string `json:"tools"`
	// Error says why a shared server is down.
	Error string `json:"error,omitempty"`
}

// handleMCPServers answers GET /api/mcp/servers with the MCP servers, in
// the order of the configuration, their state and their tools:
//
//	200 [{"name","transport","isolation","state","tools":[...],"error"?}]
//	401 no owner cookie
//
// The list is empty without MCP servers. Every browser sees the same list,
// and it holds nothing of anybody's conversations: no process ids, no count
// of the instances sessions run. Nor does it hold the configuration's
// secrets (headers, environment variables): an error is shown as the MCP
// client gives it, with them redacted. Names come without format
// characters (dropFormat): a server's name is the configuration's, and
// could otherwise pass for another's.
func (s *Server) handleMCPServers(w http.ResponseWriter, r *http.Request) {
	if _, ok := ownerTag(r); !ok {
		writeJSON(w, http.StatusUnauthorized, apiResponse{Error: errNoOwner.Error()})
		return
	}
	out := []mcpServer{}
	if s.mcp != nil {
		for _, st := range s.mcp.Servers() {
			tools := make([]string, len(st.Tools))
			for i, t := range st.Tools {
				tools[i] = dropFormat(t)
			}
			out = append(out, mcpServer{
				Name:      dropFormat(st.Name),
				Transport: string(st.Transport),
				Isolation: string(st.Isolation),
				State:     string(st.State),
				Tools:     tools,
				Error:     st.Error,
			})
		}
	}
	writeJSONValue(w, http.StatusOK, out)
}
