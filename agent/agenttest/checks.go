package agenttest

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
	// CheckTemplate enforces a strict chat template (Mistral-family
	// models, Gemma, some vLLM templates): at most one system message, and
	// only first; then a user message; a user message followed by an
	// assistant message; an assistant message followed by a user message,
	// or by tool messages when it has tool calls; a tool message followed
	// by a tool or an assistant message; and a user or tool message last.
	CheckTemplate

	// CheckAll is every check.
	CheckAll = CheckArguments | CheckEmptyAssistant | CheckTemplate
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
					return fmt.Errorf("agenttest: messages[%d]: tool call %q: arguments are not a JSON object (vLLM and llama.cpp parse them): %.80q", i, tc.ID, tc.Arguments)
				}
			}
		}
	}
	if c&CheckEmptyAssistant != 0 {
		for i, m := range req.Messages {
			if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) == 0 && len(m.Parts) == 0 {
				return fmt.Errorf("agenttest: messages[%d]: Assistant message must have either content or tool_calls", i)
			}
		}
	}
	if c&CheckTemplate != 0 {
		if err := checkTemplate(req.Messages); err != nil {
			return fmt.Errorf("agenttest: strict chat template: %w", err)
		}
	}
	return nil
}

// checkTemplate returns the first place where msgs break a strict chat
// template, with the words such templates use.
func checkTemplate(msgs []Message) error {
	prev := Message{Role: "system"} // what came before the first message
	for i, m := range msgs {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		ok := false
		switch role {
		case "system":
			if i > 0 {
				//lint:ignore ST1005 the text is vLLM's own, which hosts match on
				return fmt.Errorf("messages[%d]: System message must be at the beginning.", i)
			}
			ok = true
		case "user":
			ok = prev.Role == "system" || (prev.Role == "assistant" && len(prev.ToolCalls) == 0)
		case "assistant":
			ok = prev.Role == "user" || prev.Role == "tool"
		case "tool":
			ok = prev.Role == "tool" || (prev.Role == "assistant" && len(prev.ToolCalls) > 0)
		}
		if !ok {
			after := prev.Role
			if i == 0 || (i == 1 && msgs[0].Role == "system") {
				after = "the start"
			} else if prev.Role == "assistant" && len(prev.ToolCalls) > 0 {
				after = "assistant with tool calls"
			}
			return fmt.Errorf("messages[%d]: Conversation roles must alternate user/assistant/user/assistant/... (%s after %s)", i, m.Role, after)
		}
		prev = m
		prev.Role = role
	}
	if last := msgs[len(msgs)-1].Role; last != "user" && last != "tool" {
		//lint:ignore ST1005 the text is vLLM's own, which hosts match on
		return fmt.Errorf("Expected last role User or Tool (or Assistant with prefix True) for serving but got %s", last)
	}
	return nil
}

// isObject reports whether s is a JSON object.
func isObject(s string) bool {
	b := bytes.TrimSpace([]byte(s))
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
