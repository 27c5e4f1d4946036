package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Check is a rule that some providers enforce on the requests they accept,
// beyond what OpenAI itself checks. A [Server] enforces the checks set
// with [Server.Enforce]: a request that breaks one is recorded (see
// [Server.Requests]) and answered with HTTP 400 and an OpenAI-style error
// naming the message at fault, as such a provider answers, without taking
// a response from the script.
type Check uint8

const (
	// CheckArguments requires the arguments of every tool call in the
	// request's messages to be a JSON object. vLLM and llama.cpp parse the
	// arguments of earlier calls to render the chat template and refuse
	// the request when that fails.
	CheckArguments Check = 1 << iota
	// CheckEmptyAssistant refuses an assistant message that has neither
	// content nor tool calls (Mistral's API, vLLM with Mistral models).
	CheckEmptyAssistant
)

// Enforce sets the checks the server enforces; zero (the default) enforces
// none.
func (s *Server) Enforce(c Check) {
	s.mu.Lock()
	s.checks = c
	s.mu.Unlock()
}

// check returns the first rule req breaks, or nil.
func check(c Check, req *Request) error {
	if c&CheckArguments != 0 {
		for i, m := range req.Messages {
			for _, tc := range m.ToolCalls {
				if !isObject(tc.Arguments) {
					return fmt.Errorf("scripted: messages[%d]: tool call %q: arguments are not a JSON object (vLLM and llama.cpp parse them): %.80q", i, tc.ID, tc.Arguments)
				}
			}
		}
	}
	if c&CheckEmptyAssistant != 0 {
		for i, m := range req.Messages {
			if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) == 0 && len(m.Parts) == 0 {
				return fmt.Errorf("scripted: messages[%d]: Assistant message must have either content or tool_calls", i)
			}
		}
	}
	return nil
}

// isObject reports whether s is a JSON object.
func isObject(s string) bool {
	b := bytes.TrimSpace([]byte(s))
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
