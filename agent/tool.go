package agent

import (
	"context"
	"encoding/json"
)

// Tool is a function the model may call.
//
// Execute runs the call with its arguments (a valid JSON object) and returns
// the result text the model will read. It must honour ctx: when ctx ends the
// run was interrupted, and Execute should stop and return. progress receives
// partial output while the tool runs (for example the lines of a command); the
// agent keeps everything written to it, and attaches it to the rejected chunk
// and the history when the run is interrupted during execution. progress is
// safe for concurrent use and never nil.
//
// A returned error is data for the model, not a failure of the run: the tool
// message says "error: " and the error's text. A panic is recovered the same
// way.
type Tool interface {
	Definition() ToolDefinition
	Execute(ctx context.Context, args json.RawMessage, progress Progress) (string, error)
}

// Progress receives a running tool's partial output.
type Progress interface {
	// Write appends partial output. It never fails.
	Write(p []byte) (int, error)
	// WriteString appends partial output. It never fails.
	WriteString(s string) (int, error)
}

// ToolDefinition describes a tool to the model and to the agent.
type ToolDefinition struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON schema of the arguments object; nil means an
	// object without properties.
	Parameters map[string]any
	// SkipApproval lets the call run without asking the Approver. Only for
	// tools that are the user's interaction itself (ask_user_question) or a
	// silent display that changes nothing (show_card): never for anything
	// that runs commands, touches files or spends budget.
	SkipApproval bool
	// NoTruncate keeps this tool's arguments and results whole when history
	// is truncated for the next request (for example get_skill).
	NoTruncate bool
}

// SideMessenger is an optional interface for a [Tool] that shows something
// beside its card before it runs, such as a form for ask_user_question.
//
// The agent calls SideMessage synchronously right after it yields the call's
// executing chunk and before Execute; a non-nil result is yielded at once as a
// side chunk. The payload must marshal to a JSON object. An error or a panic
// in SideMessage is logged (a panic with its stack) and the call runs without
// a side message.
type SideMessenger interface {
	SideMessage(ctx context.Context, call ToolCall) (any, error)
}

// FuncTool is a [Tool] made of a definition and a function.
type FuncTool struct {
	Def ToolDefinition
	Fn  func(ctx context.Context, args json.RawMessage, progress Progress) (string, error)
}

// Definition returns t.Def.
func (t FuncTool) Definition() ToolDefinition { return t.Def }

// Execute calls t.Fn.
func (t FuncTool) Execute(ctx context.Context, args json.RawMessage, progress Progress) (string, error) {
	return t.Fn(ctx, args, progress)
}
