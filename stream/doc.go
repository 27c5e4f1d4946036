// Package stream turns the pieces of a streamed model reply into what an
// agent shows and runs: visible text without control tags, and tool calls
// assembled from their fragments.
//
// # Vocabulary
//
// A wire decoder (the OpenAI-compatible one lives in internal/wire) turns
// each chunk of a streamed chat completion into a [Delta]: content,
// reasoning, tool-call fragments ([ToolCallDelta]), a finish reason and
// token [Usage]. Nothing in this package depends on a provider SDK.
//
// # Text
//
// A [Parser] consumes Delta.Content. Its raw text keeps the control tags
// (by default <voice>, <no_tool> and <need_tool>; see [Config]); the visible
// text of each [Piece] has them stripped. A tag split across deltas, even
// one byte at a time, never shows in the visible text, nor does a tag that
// closes up when another inside it is removed ("<no_<need_tool>tool>") or a
// tag cut short at the end of the reply ("<need_" when the stream broke),
// while text that only resembles a tag ("a < b", "<div>") is released as
// soon as it cannot become one. A reply that begins with <voice> is flagged
// for speech on every piece. In [ModeSentences] the text comes in whole
// sentences.
//
// # Tool calls
//
// An [Accumulator] consumes Delta.ToolCalls and assembles [Call]s. It
// tolerates the quirks of real providers: indexes that start at 1 or are
// missing, ids sent once, on every fragment or as "" on continuations,
// names repeated empty, arguments split anywhere or sent whole.
//
// Neither type is safe for concurrent use; both are meant to be reused,
// one reply (round) after another, with Reset.
package stream
