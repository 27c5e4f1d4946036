// Package agenttest provides a fake model for testing code built on package
// agent: an OpenAI-compatible chat-completions server that answers from a
// script, in the spirit of net/http/httptest.
//
// A test starts a [Server], enqueues the answers the model should stream,
// points an agent at it (Config.BaseURL and Config.HTTPClient) and checks
// what the agent did and what it sent; the package example shows a whole
// turn.
//
// A [Server] listens on 127.0.0.1 and serves POST /v1/chat/completions. Each
// request takes the next [Response] from a FIFO filled with
// [Server.Enqueue]. When the queue is empty the function set with
// [Server.Respond] answers instead. With neither, the server replies HTTP 500
// with an OpenAI-style error saying the script is exhausted, so a test that
// makes one request too many fails clearly.
//
// A [RespondFunc] answers in process instead, without a listening port: it
// is an [http.RoundTripper] for the HTTPClient of an agent's configuration.
//
// # Responses
//
// [Reply] starts a [Builder] for a streamed answer in OpenAI's chunk shape:
// text and reasoning deltas, tool-call fragments, usage, finish reason, and
// switches for the shapes other providers use (whole calls in one delta, no
// index, an id on every fragment, finish_reason on the last content chunk,
// usage on the finish chunk, an Azure-style first chunk with empty choices).
// [Raw], [ReplayFile] and [Frames] replay recorded or literal bodies,
// [HTTPError] answers with an error status, and [Body] with any status,
// content type and body (an HTML page from a proxy, JSON where a stream
// was expected). [Response.IgnoreStream] answers a streaming request with
// the whole chat.completion object, like a server that ignores "stream".
//
// The frames of a Response are rendered once, when it is built, so serving
// it costs one write and one flush per frame; a Response may be enqueued
// many times.
//
// # Faults
//
// Methods on Response add delays ([Response.Delay]), keep-alive comments
// ([Response.KeepAlive]), a missing [DONE] ([Response.NoDone]), a cut TCP
// connection ([Response.CutAfter]), a reset one ([Response.ResetAfter]),
// an in-stream error frame
// ([Response.ErrorAfter]) and a stream that waits for the client to go
// away ([Response.HoldAfter]). [Response.OnFlush] tells a test that a frame
// has reached the wire, so it can cancel mid-stream deterministically.
//
// # Checks
//
// Some providers refuse requests that OpenAI accepts. [Server.Enforce]
// makes the server refuse them too, with HTTP 400 and a message naming the
// message at fault: [CheckArguments] refuses tool-call arguments in the
// history that are not a JSON object (vLLM, llama.cpp),
// [CheckEmptyAssistant] an assistant message without content or tool calls
// (Mistral), and [CheckTemplate] what a strict chat template refuses: a
// system message that is not first, or user and assistant turns that do
// not alternate (Mistral-family models, Gemma, some vLLM templates).
//
// # Requests
//
// Every request the server decodes is recorded as a [Request]
// ([Server.Requests]): model, messages, tools, stream options, the raw body
// and the headers. [Server.Conns] counts the TCP connections the server
// accepted, so a test can see whether a client reuses its connections.
package agenttest
