package agent

import (
	"encoding/json"
	"fmt"

	"github.com/planround/planround/stream"
)

// Kind says what a [Chunk] carries. The zero Kind is invalid, so a zero
// Chunk (as returned with an error) never looks like a real one.
type Kind uint8

const (
	// KindInvalid is the zero Kind; no valid chunk has it.
	KindInvalid Kind = iota
	// KindText is visible reply text (Text, Raw, Voice).
	KindText
	// KindReasoning is reasoning a provider streams beside the reply
	// (Text). It is never persisted.
	KindReasoning
	// KindToolCall is a tool call changing state (Tool).
	KindToolCall
	// KindToolRejected is a tool call that was rejected, timed out,
	// interrupted or could not run (Tool, with Tool.State ==
	// StateRejected; Tool.Cause says which).
	KindToolRejected
	// KindSide is a side message of a tool, right after its executing
	// chunk (Tool, Side).
	KindSide
	// KindRoundEnd ends a round (FinishReason, Intent on round 0, Usage).
	KindRoundEnd
	// KindWarning is something a host may want to act on (Code, Text): a
	// response cut short (right before its round's round_end; the run goes
	// on), the maximum number of tool rounds (the run's last chunk), a
	// failed summary.
	KindWarning
	// KindInterrupted is the last chunk of an interrupted run. One with
	// a Depth ends a sub-agent's nested run, not the run it came through.
	KindInterrupted
	// KindSuspended is the last chunk of a run that stopped at a pending
	// approval, or at the call of a resumable tool that waits (its last
	// chunk was executing), to be resumed later (see [Agent.Resume] and
	// [ErrSuspended]): its calls that wait stay open in the Store, and the
	// turn is not over.
	KindSuspended
	// KindToolInput is a fragment of a call's arguments as the model
	// streams them (Tool with ID, Name and State StateStart; Text is the
	// fragment, JSON text cut anywhere), yielded only with
	// Config.StreamToolArguments. The fragments of a call, in order, are
	// its arguments as the model wrote them; the executing chunk carries
	// them whole. The chunks of one call share their Tool value, which no
	// one changes. Never persisted in the history.
	KindToolInput
)

var kindNames = [...]string{
	KindInvalid:      "invalid",
	KindText:         "text",
	KindReasoning:    "reasoning",
	KindToolCall:     "tool_call",
	KindToolRejected: "tool_rejected",
	KindSide:         "side",
	KindRoundEnd:     "round_end",
	KindWarning:      "warning",
	KindInterrupted:  "interrupted",
	KindSuspended:    "suspended",
	KindToolInput:    "tool_input",
}

// String returns the wire name of k ("text", "tool_call", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) {
	if k == KindInvalid || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("agent: cannot marshal %v chunk kind", k)
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if i != 0 && n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("agent: unknown chunk kind %q", b)
}

// Intent is the outcome of the planning round: the intent of the tag the
// planning reply ended with. With a custom intent.Dictionary it may be any
// intent of that dictionary, not only the three below.
type Intent string

// The intents of a planning round's round_end.
const (
	IntentNoTool   Intent = "no_tool"   // the model said no tool is needed
	IntentNeedTool Intent = "need_tool" // the model asked for the tool loop
	IntentNone     Intent = "none"      // no tag: treated as need_tool
)

// FinishReason is why the model's response to one request ended, as the
// provider said it. Providers may send reasons other than these.
type FinishReason string

// The finish reasons of OpenAI's API.
const (
	// FinishStop: the model ended its reply, or a stop sequence did.
	FinishStop FinishReason = "stop"
	// FinishToolCalls: the model called tools.
	FinishToolCalls FinishReason = "tool_calls"
	// FinishLength: the token limit (the request's or the model's) cut the
	// reply; a WarnLength warning says so.
	FinishLength FinishReason = "length"
	// FinishContentFilter: the provider's content filter cut the reply; a
	// WarnContentFilter warning says so.
	FinishContentFilter FinishReason = "content_filter"
)

// WarningCode says which warning a warning chunk is, so that a host can act
// on a warning without reading its text, which is for people.
type WarningCode string

// The warnings of a run.
const (
	// WarnLength: the token limit cut the model's response short (finish
	// reason "length"): the text ends mid-sentence, a tool call's arguments
	// may be incomplete (the model is told, as for any arguments that are
	// not a JSON object). A host may raise ModelSettings.MaxCompletionTokens
	// or say that the answer is incomplete.
	WarnLength WarningCode = "length"
	// WarnContentFilter: the provider's content filter cut the model's
	// response short (finish reason "content_filter").
	WarnContentFilter WarningCode = "content_filter"
	// WarnMaxToolRounds: the tool loop reached Config.MaxToolRounds; the
	// run ends with this warning.
	WarnMaxToolRounds WarningCode = "max_tool_rounds"
	// WarnSummaryFailed: summarising the session failed (see
	// Config.SummarizeAt); the session was left as it was.
	WarnSummaryFailed WarningCode = "summary_failed"
)

// ToolState is the state of one tool call.
type ToolState string

// The states of a tool call, in the order they happen.
const (
	StateStart            ToolState = "start"
	StateApprovalRequired ToolState = "approval_required"
	StateExecuting        ToolState = "executing"
	StateResult           ToolState = "result"
	StateRejected         ToolState = "rejected"
)

// ToolCall is one tool call as a chunk shows it.
type ToolCall struct {
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	State ToolState `json:"state,omitempty"`
	// Arguments is the call's arguments when they are a JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsRaw is the text the model wrote when it is not a JSON
	// object. The history keeps it wrapped by [memory.ValidArguments].
	ArgumentsRaw string `json:"arguments_raw,omitempty"`
	// ApprovalRequired is true on the approval_required chunk.
	ApprovalRequired bool `json:"approval_required,omitempty"`
	// ApprovalID is the id of the pending approval (its [Ticket]'s), on the
	// approval_required chunk; a front end answers the approval with it.
	ApprovalID string `json:"approval_id,omitempty"`
	// ArgumentsDigest is [ArgumentsDigest] of Arguments, on the
	// approval_required chunk: a front end sends it back with its decision,
	// which binds the decision to the arguments the person saw (a decision
	// for other arguments is refused).
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Hints are what the tool says about its behaviour ([ToolDefinition.Hints],
	// or its [ApprovalNote]'s), on every chunk of the call from the
	// approval on; nil when the tool says nothing.
	Hints *ToolHints `json:"hints,omitempty"`
	// MustAsk says that a person must decide on the call and no policy may
	// approve it (see [ApprovalNote]), on the [ApprovalRequest] and the
	// approval_required chunk.
	MustAsk bool `json:"must_ask,omitempty"`
	// Details are lines for the person who decides (see [ApprovalNote]),
	// on the ApprovalRequest and the approval_required chunk.
	Details []string `json:"details,omitempty"`
	// Result is the tool's result (state result).
	Result string `json:"result,omitempty"`
	// Reason says why a call was rejected (state rejected), in words for
	// people and for the model.
	Reason string `json:"reason,omitempty"`
	// Cause is the kind of the rejection (state rejected): who or what
	// rejected the call, or why it could not run.
	Cause Cause `json:"cause,omitempty"`
	// PartialResult is what the tool wrote to its Progress before it was
	// interrupted (state rejected).
	PartialResult string `json:"partial_result,omitempty"`
}

// Usage is the token usage a provider reports for a response (prompt,
// completion and total tokens, and the cached and reasoning parts of them
// when the provider reports those), on round_end chunks and summed by
// [Turn.Usage]. It is package stream's type under this package's name, so
// a host that reads usage needs no other import.
type Usage = stream.Usage

// Chunk is one event of a run. Kind says which fields are set; empty fields
// are omitted from its JSON, which is the stable wire schema of the SDK.
type Chunk struct {
	Kind Kind `json:"kind"`
	// Round is the round the chunk belongs to: 0 is the planning round,
	// and the rounds after it count from 1 (with Config.DisablePlanning the
	// first round is 1).
	Round int `json:"round"`
	// Agent, Depth and Parent are set on the chunks of a sub-agent's run
	// (see [NewSubAgent]), which reach the host through the run that
	// called it, while the call runs; they are empty on a run's own
	// chunks. Round and the other fields are those of the nested run.
	//
	// Agent is the sub-agent's name; for the run of a sub-agent called by
	// a sub-agent, the names from the outermost down, joined by "/"
	// ("research/search").
	Agent string `json:"agent,omitempty"`
	// Depth is how deep the run that yielded the chunk is nested: 1 for a
	// sub-agent called by the host's run, 2 for one called by that
	// sub-agent, and so on.
	Depth int `json:"depth,omitempty"`
	// Parent is the id of the tool call that started the nested run, in
	// the run one level up; deeper down, the ids of the calls from the
	// outermost down, joined by "/" ("call_1/call_7"). A host nests the
	// chunk under the card of that call: a nested tool call's card is
	// Parent + "/" + Tool.ID, which is unique even when two runs use the
	// same call ids.
	Parent string `json:"parent,omitempty"`
	// Code says which warning a warning chunk is.
	Code WarningCode `json:"code,omitempty"`
	// Text is visible text (tags stripped) for text, reasoning and warning
	// chunks, and the argument fragment of a tool_input chunk.
	Text string `json:"text,omitempty"`
	// Raw is the text with its control tags (text chunks).
	Raw string `json:"raw,omitempty"`
	// Voice is true on every text chunk of a reply that began with <voice>.
	Voice bool `json:"voice,omitempty"`
	// Intent is set on the planning round's round_end.
	Intent Intent `json:"intent,omitempty"`
	// FinishReason is why the model's response ended, on round_end, when
	// the provider said it.
	FinishReason FinishReason `json:"finish_reason,omitempty"`
	// Tool is the call of a tool_call, tool_rejected, side or tool_input
	// chunk.
	Tool *ToolCall `json:"tool,omitempty"`
	// Side is a side message's payload.
	Side any `json:"side,omitempty"`
	// Usage is the round's token usage on round_end, when reported.
	Usage *Usage `json:"usage,omitempty"`
}
