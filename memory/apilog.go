package memory

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// APICall is one record of an [APILog]: one model call of an agent, what
// was sent and what came back, for a person to read.
type APICall struct {
	// ID numbers the records of the log, growing; the store gives it.
	ID int64 `json:"id"`
	// SessionID is the session the call was made for; "" when the agent
	// did not know it (a summary asked through Agent.SummaryModel).
	SessionID string `json:"session_id,omitempty"`
	// Round is the run's round the call belongs to (0: the planning
	// round); a summary's is the round of the run that asked for it.
	Round int `json:"round"`
	// Model is the model name the request named.
	Model string `json:"model"`
	// Purpose says what the call was for.
	Purpose APICallPurpose `json:"purpose"`
	// Request is the request's body as the agent sent it (messages, tools
	// offered, settings), JSON; nil when the log keeps metadata only. It
	// never holds the API key, which travels in a header.
	Request json.RawMessage `json:"request,omitempty"`
	// Reply is what the model answered, as far as it came; nil when the
	// log keeps metadata only.
	Reply *APIReply `json:"reply,omitempty"`
	// FinishReason is the reason the provider gave for the end of the
	// reply ("stop", "tool_calls", "length"…); "" when none came.
	FinishReason string `json:"finish_reason,omitempty"`
	// Usage is the token usage the provider reported; zero when it
	// reported none.
	Usage APIUsage `json:"usage"`
	// Status is [APICallOK] or [APICallError].
	Status APICallStatus `json:"status"`
	// Error is the error's text when Status is APICallError: the
	// provider's message, a transport failure, or the context's error of
	// an interrupted call.
	Error string `json:"error,omitempty"`
	// FirstToken is the time from the request to the first token of the
	// reply; 0 when none came.
	FirstToken time.Duration `json:"first_token"`
	// Latency is the time from the request to the end of the reply.
	Latency time.Duration `json:"latency"`
	// Started is when the request was sent; the store sets it when zero.
	Started time.Time `json:"started,omitzero"`
}

// APIReply is the reply of an [APICall]: its text and the tool calls the
// model wrote.
type APIReply struct {
	Text      string        `json:"text,omitempty"`
	ToolCalls []APIToolCall `json:"tool_calls,omitempty"`
}

// APIToolCall is a tool call of an [APIReply], as the model wrote it: its
// arguments are the text streamed, JSON or not.
type APIToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// APIUsage is the token usage of an [APICall].
type APIUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// APICallPurpose says what an [APICall] was for.
type APICallPurpose string

// The purposes of model calls.
const (
	// PurposePlanning is a run's planning round (round 0, no tools).
	PurposePlanning APICallPurpose = "planning"
	// PurposeContinuation is a round without tools that continues a run
	// (the continuation prompt).
	PurposeContinuation APICallPurpose = "continuation"
	// PurposeToolRound is a round that offered the model its tools.
	PurposeToolRound APICallPurpose = "tool_round"
	// PurposeSummary is a summary request (long-term memory).
	PurposeSummary APICallPurpose = "summary"
	// PurposeSubAgent is any round of a sub-agent's run (an agent run as a
	// tool of another run).
	PurposeSubAgent APICallPurpose = "sub_agent"
)

// APICallStatus says how an [APICall] ended.
type APICallStatus string

// The statuses of model calls.
const (
	APICallOK    APICallStatus = "ok"
	APICallError APICallStatus = "error"
)

// APICallQuery selects records of an [APILog]. Its zero value selects
// every record.
type APICallQuery struct {
	// SessionIDs, when not empty, keeps the records of these sessions.
	SessionIDs []string
	// Since, when not zero, keeps the records Started at or after it.
	Since time.Time
	// Limit, when positive, is the most records [APILog.APICalls]
	// returns; [APILog.DeleteAPICalls] ignores it.
	Limit int
}

// APILogLimits bound an [APILog]: the store keeps at most MaxRows records
// and none Started more than MaxAge ago, dropping the oldest as it appends
// (so the log may briefly hold a record older than MaxAge until the next
// append). Zero means the default ([DefaultAPILogMaxRows],
// [DefaultAPILogMaxAge]); a negative value lifts the bound. The stores
// shipped take them through their SetAPILogLimits method.
type APILogLimits struct {
	MaxRows int
	MaxAge  time.Duration
}

// The bounds of an [APILog] whose [APILogLimits] are zero.
const (
	DefaultAPILogMaxRows = 10_000
	DefaultAPILogMaxAge  = 7 * 24 * time.Hour
)

// Rows returns the most records kept, 0 for no bound.
func (l APILogLimits) Rows() int {
	switch {
	case l.MaxRows == 0:
		return DefaultAPILogMaxRows
	case l.MaxRows < 0:
		return 0
	}
	return l.MaxRows
}

// Age returns the oldest a record may be, 0 for no bound.
func (l APILogLimits) Age() time.Duration {
	switch {
	case l.MaxAge == 0:
		return DefaultAPILogMaxAge
	case l.MaxAge < 0:
		return 0
	}
	return l.MaxAge
}

// APILog is implemented by stores that keep a log of model calls (see
// Config.APILog of package agent): a record per call, newest first, for a
// person to read. [MemStore] implements it, and so do the SQLite and
// PostgreSQL stores.
//
// The log is bounded (see [APILogLimits]): an append drops the records
// beyond the bounds. A store that is also the [Store] of the sessions
// deletes a session's records with the session (DeleteSession): a deleted
// conversation leaves none of its content in the log. Records are not part
// of an [Export]. Like a [Store]'s, the
// methods are safe for concurrent use, return an error when ctx is already
// done, and return copies.
type APILog interface {
	// AppendAPICall adds c (its ID ignored; Started set to now when zero)
	// and returns the id it got. c must pass [ValidateAPICall].
	AppendAPICall(ctx context.Context, c APICall) (id int64, err error)
	// APICalls returns the records q selects, newest (highest ID) first,
	// at most q.Limit of them when it is positive.
	APICalls(ctx context.Context, q APICallQuery) ([]APICall, error)
	// APICall returns the record id, or an error wrapping [ErrNotFound].
	APICall(ctx context.Context, id int64) (APICall, error)
	// DeleteAPICalls removes the records q selects (q.Limit aside): the
	// zero query removes them all.
	DeleteAPICalls(ctx context.Context, q APICallQuery) error
}

// cloneAPICall returns a copy of c that shares no memory with it.
func cloneAPICall(c APICall) APICall {
	if c.Request != nil {
		c.Request = slices.Clone(c.Request)
	}
	if c.Reply != nil {
		r := *c.Reply
		r.ToolCalls = slices.Clone(r.ToolCalls)
		c.Reply = &r
	}
	return c
}

// match reports whether q selects c, Limit aside.
func (q APICallQuery) match(c APICall) bool {
	if len(q.SessionIDs) > 0 && !slices.Contains(q.SessionIDs, c.SessionID) {
		return false
	}
	return q.Since.IsZero() || !c.Started.Before(q.Since)
}
