package stream

// Delta is one decoded chunk of a streamed chat completion, in the SDK's own
// small vocabulary. Wire decoders (internal/wire for the OpenAI-compatible
// protocol) produce it; the [Parser] and the [Accumulator] consume it, so the
// decoder can change without touching them.
//
// A decoder may reuse a Delta (and its ToolCalls slice) between chunks: a
// consumer that keeps a Delta after asking for the next one must copy it.
type Delta struct {
	// Content is the next piece of the visible reply (raw, tags included).
	Content string
	// Reasoning is text a provider streams separately from the reply
	// (reasoning_content, reasoning). It is never part of Content.
	Reasoning string
	// ToolCalls are the tool-call fragments of this chunk, in wire order.
	ToolCalls []ToolCallDelta
	// FinishReason is the provider's finish_reason ("stop", "tool_calls",
	// "length", ...), empty until the provider sends one.
	FinishReason string
	// Usage is set on the chunk that reports token usage, nil otherwise.
	Usage *Usage
}

// ToolCallDelta is one fragment of a tool call.
type ToolCallDelta struct {
	// Index is the provider's index of the call in the response, or
	// NoIndex when the provider omitted it.
	Index int
	// ID, Name and Arguments are the fragment's parts; any of them may be
	// empty. Arguments is JSON text split anywhere.
	ID        string
	Name      string
	Arguments string
}

// NoIndex is the [ToolCallDelta.Index] of a fragment without an index.
const NoIndex = -1

// Usage is the token usage a provider reports for one response.
//
// The detail counts are parts of the main ones, not additions to them, as
// OpenAI and the OpenTelemetry GenAI conventions count them: CacheReadTokens
// and CacheWriteTokens are included in PromptTokens, ReasoningTokens in
// CompletionTokens. A provider that does not report a detail leaves it 0.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens,omitempty"`
	// CacheReadTokens are the prompt tokens the provider served from its
	// prompt cache (chat completions: usage.prompt_tokens_details.cached_tokens).
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens are the prompt tokens the provider wrote to its prompt
	// cache for later requests (OpenRouter's
	// usage.prompt_tokens_details.cache_write_tokens; OpenAI reports none, as
	// it caches without a separate charge).
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens are the completion tokens the model spent reasoning
	// (chat completions: usage.completion_tokens_details.reasoning_tokens),
	// whether or not the reasoning itself was streamed.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		TotalTokens:      u.TotalTokens + v.TotalTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}
