package agenttest

import (
	"net/http"
	"testing"
)

// FuzzDecodeRequest feeds request bodies to the decoder: an error or a
// Request, never a panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`))
	f.Add([]byte(`{"messages":[{"content":7}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body, http.Header{})
		if err == nil {
			_ = req.LastMessage()
			_ = req.ToolNames()
			_, _ = req.LastMessageWithRole("user")
		}
	})
}
