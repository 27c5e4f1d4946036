package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/planround/planround/intent"
)

// Request is a chat-completions or Responses API request as the server
// received it. A recorded Request is shared with the server's record and
// must not be modified.
//
// A Responses API request ([ResponsesPath]; Responses is true) is decoded
// into the same fields: its "instructions" become a first message with
// role "system", its input (a string, or message, function_call and
// function_call_output items) the other messages: a string input is one
// user message, a function_call an assistant message with that tool call
// (consecutive calls share one), a function_call_output a tool message
// (ToolCallID is its call_id); other items (reasoning, ...) are skipped,
// and Raw holds them all. Its function tools are Tools. StreamOptions is
// nil.
type Request struct {
	// Responses reports whether the request came to the Responses API
	// ([ResponsesPath]) rather than to chat completions ([Path]).
	Responses bool
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

// wireResponsesRequest is the JSON shape of a Responses API request body.
type wireResponsesRequest struct {
	Model             string          `json:"model"`
	Instructions      string          `json:"instructions"`
	Input             json.RawMessage `json:"input"`
	Tools             []responsesTool `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Stream            bool            `json:"stream"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// responsesTool is a tool of a Responses API request: a function tool's
// fields are not nested under "function".
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// responsesItem is an input item of a Responses API request.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// decodeResponsesRequest decodes a Responses API request body.
func decodeResponsesRequest(body []byte, h http.Header) (*Request, error) {
	var w wireResponsesRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("invalid request body: %w", err)
	}
	req := &Request{
		Responses:         true,
		Model:             w.Model,
		ToolChoice:        w.ToolChoice,
		Stream:            w.Stream,
		ParallelToolCalls: w.ParallelToolCalls,
		Raw:               json.RawMessage(body),
		Header:            h,
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, Tool(t))
	}
	if w.Instructions != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Content: w.Instructions})
	}
	in := bytes.TrimSpace(w.Input)
	switch {
	case len(in) == 0 || bytes.Equal(in, []byte("null")):
	case in[0] == '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return nil, fmt.Errorf("invalid request body: input: %w", err)
		}
		req.Messages = append(req.Messages, Message{Role: "user", Content: s})
	default:
		var items []responsesItem
		if err := json.Unmarshal(in, &items); err != nil {
			return nil, fmt.Errorf("invalid request body: input: want a string or an array of items: %w", err)
		}
		for i, it := range items {
			m, ok, err := it.message()
			if err != nil {
				return nil, fmt.Errorf("invalid request body: input[%d]: %w", i, err)
			}
			if !ok {
				continue
			}
			if n := len(req.Messages); n > 0 && len(m.ToolCalls) > 0 && m.Content == "" {
				if prev := &req.Messages[n-1]; prev.Role == "assistant" && len(prev.ToolCalls) > 0 {
					prev.ToolCalls = append(prev.ToolCalls, m.ToolCalls...)
					continue
				}
			}
			req.Messages = append(req.Messages, m)
		}
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("invalid request body: no input")
	}
	return req, nil
}

// message maps an input item to a Message; false for an item that has
// none.
func (it responsesItem) message() (Message, bool, error) {
	switch it.Type {
	case "", "message":
		m := Message{Role: it.Role}
		err := m.responsesContent(it.Content)
		return m, err == nil, err
	case "function_call":
		return Message{Role: "assistant", ToolCalls: []ToolCall{{ID: it.CallID, Type: "function", Name: it.Name, Arguments: it.Arguments}}}, true, nil
	case "function_call_output":
		m := Message{Role: "tool", ToolCallID: it.CallID}
		err := m.responsesContent(it.Output)
		return m, err == nil, err
	}
	return Message{}, false, nil
}

// responsesContent decodes a Responses API content (or output): a string,
// an array of parts (input_text, output_text, input_image, ...) or null.
func (m *Message) responsesContent(raw json.RawMessage) error {
	c := bytes.TrimSpace(raw)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL string `json:"image_url"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("content: %w", err)
		}
		var texts []string
		for _, p := range parts {
			m.Parts = append(m.Parts, ContentPart{Type: p.Type, Text: p.Text, ImageURL: p.ImageURL})
			if p.Type == "input_text" || p.Type == "output_text" {
				texts = append(texts, p.Text)
			}
		}
		m.Content = strings.Join(texts, "\n")
	default:
		return fmt.Errorf("content: want a string, an array or null, got %.20s", c)
	}
	return nil
}
