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
	// Outcome says, on a tool message, how its call ended: the tool ran
	// ([OutcomeResult]) or the call was refused or stopped
	// ([OutcomeRejected], with its Cause). Empty is unknown: a tool
	// message stored before outcomes were kept, or by a writer that does
	// not say. Only tool messages have one.
	Outcome Outcome `json:"outcome,omitempty"`
	// Cause is, on a tool message of [OutcomeRejected], the kind of the
	// rejection: the string of an agent.Cause ("user", "policy",
	// "timeout", "interrupted", "approval_interrupted", "stopped",
	// "moved_on", "not_run", "invalid_arguments", "unknown_tool",
	// "approval_failed", ...). It may be empty (not known), and values
	// this version does not list are kept as they are. Only a rejected
	// call has one.
	Cause string `json:"cause,omitempty"`
	// CreatedAt is when the message was made; a Store fills a zero value.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Hook marks a message injected by a hook: it is sent to the model but
	// a host does not show it.
	Hook bool `json:"hook,omitempty"`
	// SummaryID is non-zero when the message was archived into the summary
	// with that id: it stays readable but leaves the model's context.
	SummaryID int64 `json:"summary_id,omitempty"`
}

// Outcome is how a tool call ended, on the tool message that answers it
// ([Message.Outcome]). Its values are the names of the final states of a
// call in the chunks of package agent (agent.StateResult and
// agent.StateRejected), so a host that draws calls from chunks and from
// the history branches on one vocabulary.
//
// The zero Outcome is unknown: a host redrawing a conversation shows such
// a call as ended in a way nobody recorded, never as done.
type Outcome string

// The outcomes of a tool call.
const (
	// OutcomeResult: the tool ran and returned; the tool message's content
	// is its result. A tool that returned an error ran too: the content
	// says the error ("error: ..."), which the model reads as the result.
	OutcomeResult Outcome = "result"
	// OutcomeRejected: the call did not run to its end. A person or a
	// policy refused it, its approval timed out or failed, the run was
	// interrupted or its process stopped, its arguments or its tool were
	// invalid; [Message.Cause] says which. The content is the reason,
	// after the output the tool wrote before it was stopped, if any.
	OutcomeRejected Outcome = "rejected"
)

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
