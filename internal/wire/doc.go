// Package wire decodes the server-sent-events body of an OpenAI-compatible
// streamed chat completion into the SDK's own [stream.Delta] values.
//
// It replaces openai-go's stream decoder on the hot path: a [Reader] reads
// the body with one buffered reader, parses the SSE framing (comments,
// event/id/retry fields, multi-line data, CRLF, LF and lone CR line ends) and
// decodes each frame with a small hand-written JSON reader that understands
// the common chunk shape and allocates little more than the strings it
// returns. Any frame the small reader does not handle exactly like
// encoding/json (error frames, unusual keys, floats in integer fields,
// invalid JSON) is decoded again with encoding/json, which is the reference
// and the source of error messages. A fuzz test holds the two equal.
//
// # Provider quirks
//
// Recorded streams of many providers live in testdata/streams at the root of
// the module; the replay test runs all of them. The Reader accepts chunks
// with empty choices (Azure's prompt-filter chunk, usage-only final chunks),
// usage on any chunk, reasoning in reasoning_content or reasoning, content
// null, tool calls without index, tool-call arguments sent as a JSON object
// instead of a string, and bodies that end after a finish_reason without
// "data: [DONE]". A body that ends with neither, or whose reading fails
// (a cut or reset connection), is reported as [ErrTruncated]; a read error
// after a finish_reason loses nothing and ends the stream like [DONE].
// Errors come as data: {"error": ...}, as an event named error, or as an
// error: field (llama.cpp); each ends the stream with a [*StreamError].
//
// # Bodies that are not a stream
//
// The first bytes of the body, not its Content-Type, say whether it is an
// event stream. A JSON body holding an error object ends with a
// [*StreamError]; a whole chat.completion object (a server that ignored
// "stream": true) is handed out as one delta with its content, reasoning,
// tool calls, finish reason and usage; anything else (an HTML page, plain
// text, other JSON) ends with a [*NotStreamError] that shows the body's
// start.
package wire
