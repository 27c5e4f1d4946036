package memory

import (
	"encoding/json"
	"time"
)

// Role is the author of a [Message].
type Role string

// The roles of the chat-completions protocol.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation, in the SDK's own vocabulary,
// free of any provider's types (package agent converts it for the
// chat-completions API).
type Message struct {
	// ID is assigned by the [Store] on append; zero before.
	ID int64 `json:"id,omitempty"`
	// Role says who wrote the message.
	Role Role `json:"role"`
	// Content is the text. Assistant text keeps its raw control tags.
	Content string `json:"content,omitempty"`
	// Images go with the text of a user message (no other role has
	// them); see [Image].
	Images []Image `json:"images,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message (informational).
	Name string `json:"name,omitempty"`
	// CreatedAt is when the message was made; a Store fills a zero value.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Hook marks a message injected by a hook: it is sent to the model but
	// a host does not show it.
	Hook bool `json:"hook,omitempty"`
	// SummaryID is non-zero when the message was archived into the summary
	// with that id: it stays readable but leaves the model's context.
	SummaryID int64 `json:"summary_id,omitempty"`
}

// Archived reports whether the message was archived into a summary.
func (m Message) Archived() bool { return m.SummaryID != 0 }

// ToolCall is one call of an assistant message.
type ToolCall struct {
	// ID names the call; the tool message answering it carries the same
	// id in ToolCallID.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the JSON object the model wrote, of the same type as
	// the arguments a chunk of package agent shows, and marshalled as the
	// object itself. The agent records arguments that are not a JSON
	// object wrapped by [ValidArguments], and [Repair] wraps them in older
	// history, so that every request holds an object here; a [Store]
	// refuses anything else. Empty means no arguments ("{}"). The bytes
	// are not significant: a store or an export may reformat the object
	// (white space, escapes, a database's key order).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Session is one conversation.
type Session struct {
	// ID names the session; a Store generates one when it is empty.
	ID string `json:"id"`
	// Title is a display name; it may be empty.
	Title string `json:"title,omitempty"`
	// CreatedAt is when the session was created.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// UpdatedAt is when the session last changed (an append, a rename, a
	// summary); Store.Sessions lists the most recent first.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Summary is a long-term memory row: the model's summary of archived
// messages.
type Summary struct {
	// ID is assigned by the Store; zero before.
	ID int64 `json:"id,omitempty"`
	// Content is the summary text.
	Content string `json:"content"`
	// CreatedAt is when the summary was made; a Store fills a zero value.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// FirstID and LastID are the ids of the first and last archived message
	// the summary covers.
	FirstID int64 `json:"first_id,omitempty"`
	LastID  int64 `json:"last_id,omitempty"`
}
