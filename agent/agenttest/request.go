package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/planround/planround/intent"
)

// Request is a chat-completions request as the server received it.
// A recorded Request is shared with the server's record and must not be
// modified.
type Request struct {
	// Seq is the request's position among the requests the server
	// decoded, starting at 1.
	Seq int
	// Model is the requested model id.
	Model string
	// Messages are the request's messages, in order.
	Messages []Message
	// Tools are the function tools offered to the model.
	Tools []Tool
	// ToolChoice is the raw tool_choice value, nil when absent.
	ToolChoice json.RawMessage
	// Stream reports whether the client asked for a stream.
	Stream bool
	// StreamOptions is nil when the request had no stream_options.
	StreamOptions *StreamOptions
	// ParallelToolCalls is nil when the request did not set it.
	ParallelToolCalls *bool
	// Raw is the request body as received.
	Raw json.RawMessage
	// Header holds the request's HTTP headers.
	Header http.Header
}

// StreamOptions is the stream_options object of a request.
type StreamOptions struct {
	// IncludeUsage asks for a final chunk with the token usage.
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	// Role is "system", "developer", "user", "assistant" or "tool".
	Role string
	// Content is the message text. When the content was an array of parts,
	// Content is the text of its text parts joined by newlines.
	Content string
	// Parts holds the content parts when the content was an array.
	Parts []ContentPart
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall
	// ToolCallID names the call a tool message answers.
	ToolCallID string
	// Name is the optional participant name.
	Name string
}

// ContentPart is one part of an array content.
type ContentPart struct {
	// Type is "text", "image_url", ...
	Type string
	// Text is set on text parts.
	Text string
	// ImageURL is the url of an image_url part.
	ImageURL string
}

// ToolCall is one call of an assistant message.
type ToolCall struct {
	// ID names the call; the tool message that answers it repeats it.
	ID string
	// Type is "function" for function calls.
	Type string
	// Name is the function's name.
	Name string
	// Arguments is the arguments' JSON text as the client sent it.
	Arguments string
}

// Tool is one tool of a request.
type Tool struct {
	// Type is "function" for function tools.
	Type string
	// Name is the function's name.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the raw JSON schema, nil when absent.
	Parameters json.RawMessage
}

// HasTools reports whether the request offers any tool.
func (r *Request) HasTools() bool { return len(r.Tools) > 0 }

// ToolNames returns the names of the request's tools, in order.
func (r *Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// HasTool reports whether the request offers a tool with that name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// LastMessage returns the request's last message, or a zero Message when
// the request has none.
func (r *Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastMessageWithRole returns the last message with that role and true, or
// a zero Message and false when there is none.
func (r *Request) LastMessageWithRole(role string) (Message, bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == role {
			return r.Messages[i], true
		}
	}
	return Message{}, false
}

// UserMessage returns the user's own message that the request answers and
// true, or a zero Message and false when there is none: the last user
// message that is not the "[continue]" an agent adds after its planning
// reply ([intent.ContinueMessage]). In the rounds after planning, that
// "[continue]" is the request's last user message, so
// LastMessageWithRole("user") does not find the user's words.
//
// With agent.ShapeStrict, the agent adds its temporary prompts to the last
// user message, after a blank line: the planning round's user message ends
// with the planning prompt then, and the "[continue]" of a continuation
// round with the continuation prompt (it is not returned either).
func (r *Request) UserMessage() (Message, bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == "user" && !isContinue(m.Content) {
			return m, true
		}
	}
	return Message{}, false
}

// isContinue reports whether content is the agent's transition message,
// alone or with a temporary prompt added after a blank line.
func isContinue(content string) bool {
	rest, ok := strings.CutPrefix(content, intent.ContinueMessage)
	return ok && (rest == "" || strings.HasPrefix(rest, "\n\n"))
}

// wireRequest is the JSON shape of a request body.
type wireRequest struct {
	Model             string          `json:"model"`
	Messages          []Message       `json:"messages"`
	Tools             []Tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Stream            bool            `json:"stream"`
	StreamOptions     *StreamOptions  `json:"stream_options"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// decodeRequest decodes a chat-completions request body.
func decodeRequest(body []byte, h http.Header) (*Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("invalid request body: %w", err)
	}
	if len(w.Messages) == 0 {
		return nil, fmt.Errorf("invalid request body: no messages")
	}
	return &Request{
		Model:             w.Model,
		Messages:          w.Messages,
		Tools:             w.Tools,
		ToolChoice:        w.ToolChoice,
		Stream:            w.Stream,
		StreamOptions:     w.StreamOptions,
		ParallelToolCalls: w.ParallelToolCalls,
		Raw:               json.RawMessage(body),
		Header:            h,
	}, nil
}

// UnmarshalJSON decodes a message whose content is a string, an array of
// parts or null.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []ToolCall      `json:"tool_calls"`
		ID        string          `json:"tool_call_id"`
		Name      string          `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message{Role: w.Role, ToolCalls: w.ToolCalls, ToolCallID: w.ID, Name: w.Name}
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("message content: %w", err)
		}
		var texts []string
		for _, p := range parts {
			m.Parts = append(m.Parts, ContentPart{Type: p.Type, Text: p.Text, ImageURL: p.ImageURL.URL})
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		m.Content = strings.Join(texts, "\n")
	default:
		return fmt.Errorf("message content: want a string, an array or null, got %.20s", c)
	}
	return nil
}

// UnmarshalJSON decodes an OpenAI tool call ({id, type, function{name,
// arguments}}).
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var w struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = ToolCall{ID: w.ID, Type: w.Type, Name: w.Function.Name, Arguments: w.Function.Arguments}
	return nil
}

// UnmarshalJSON decodes an OpenAI tool ({type, function{name, description,
// parameters}}).
func (t *Tool) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = Tool{Type: w.Type, Name: w.Function.Name, Description: w.Function.Description, Parameters: w.Function.Parameters}
	return nil
}
