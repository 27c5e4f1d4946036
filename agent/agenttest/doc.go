// Package agenttest provides a fake model for testing code built on package
// agent: an OpenAI-compatible server that answers from a script, in the
// spirit of net/http/httptest. It speaks both chat completions and the
// Responses API (Open Responses), and one script serves either.
//
// A test starts a [Server] with [Start], enqueues the answers the model
// should stream, points an agent at it (Config.BaseURL: [Server.URL],
// Config.HTTPClient: [Server.Client]) and checks what the agent did and
// what it sent; the package example shows a whole turn.
//
// # A run's requests
//
// An agent's run sends more than one request, and the script answers
// each of them:
//
//  1. The planning round (round 0) offers no tools, and ends with a
//     temporary planning prompt. Its reply is words that end with an
//     intent tag: <need_tool> ([Plan] writes such a reply) goes on to
//     the tool loop, and so does a reply without a tag; <no_tool> is
//     followed by one continuation round, without tools, and the run
//     ends. The planning reply's text streams to the user as round 0's.
//  2. Each round of the tool loop offers the tools. After a planning
//     reply with text, the messages end with that reply and a user
//     message "[continue]" ([Request.UserMessage] finds the user's own).
//     A reply that calls tools ([CallTool], or [Reply] with
//     [Builder.Call]) makes the agent run them and ask again, with their
//     results last; a reply without tool calls ends the run.
//
// So the script of a turn that calls one tool has three replies: [Plan],
// [CallTool] and the answer, as in the package example. With
// agent.Config.DisablePlanning the run starts with the tool loop, and its
// first reply may call a tool.
//
// The agent does not run the tool calls of a planning reply: served to
// the planning round, a reply that calls a tool would leave the tool
// silently unrun. So a reply that calls a tool its request does not offer
// (none, or not that one) is not served: the server answers HTTP 500 with
// a message that says so and what to do instead, and the run fails with
// it ([Response.Unsolicited] serves such a reply, for a test of what a
// client does with a model that calls tools it was not given). A request
// that finds the script exhausted is answered HTTP 500 too. Both answers
// tell the client not to send the request again (x-should-retry: false).
// A scripted [HTTPError] 408, 409, 429 or 5xx does not: the agent sends
// its request again (Config.MaxRetries), and each attempt takes the next
// response of the script.
//
// A Server made by [Start] also fails its test, with the same words, for
// each of these, and for each response still in the script when the test
// ends; one made by [NewServer] answers alike but has no test to fail.
//
// # Servers and functions
//
// A [Server] listens on 127.0.0.1 and serves POST /v1/chat/completions
// ([Path]) and POST /v1/responses ([ResponsesPath]). Each request, to
// either path, takes the next [Response] from a FIFO filled with
// [Server.Enqueue]. When the queue is empty the function set with
// [Server.Respond] answers instead.
//
// A [RespondFunc] answers in process instead, without a listening port: it
// is an [http.RoundTripper], and [RespondFunc.URL] and [RespondFunc.Client]
// configure an agent for it as a Server's do. Its documentation says how
// the function tells a run's requests apart.
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
// # The Responses API
//
// A reply built with [Reply] also has the Responses API's form, which the
// server sends to a request to [ResponsesPath] (openai-go's
// client.Responses.NewStreaming): an Open Responses event stream, each
// event an "event: <type>" line and a "data:" line with its
// sequence_number. It starts with response.created and
// response.in_progress; consecutive Reasoning pieces make a reasoning item
// (response.reasoning_summary_text.delta), consecutive Text pieces a
// message item (response.output_text.delta), each tool call a
// function_call item with its call_id and name
// (response.function_call_arguments.delta per argument piece); each item
// is announced (response.output_item.added) and ended (.done, with the
// text-part and summary-part events around them). The stream ends with
// response.completed, or response.incomplete for the finish reasons
// "length" (incomplete_details.reason max_output_tokens) and
// "content_filter", its response holding the output items and the usage
// (input_tokens with input_tokens_details.cached_tokens, output_tokens
// with output_tokens_details.reasoning_tokens, total_tokens). An empty
// finish reason sends no final event. A request with "stream": false, or
// a Response with [Response.IgnoreStream], gets the final response object.
//
// The chat-completions quirks of a Builder (WholeCalls, OmitIndex,
// IDOnEveryFragment, FinishWithLast, UsageInFinish, EmptyFirstChunk) and
// [Response.NoDone] do not apply to the Responses form, which has no
// [DONE]. The faults do: their positions count its events (not
// [Response.NumFrames], which counts chat chunks), and [Response.ErrorAfter]
// sends an "error" event. [HTTPError] and [Body] answer either path alike.
// [Raw], [ReplayFile] and [Frames] have no Responses form: a Responses
// request they would answer gets HTTP 500 saying so. The [Check]s of
// [Server.Enforce] apply to chat-completions requests only.
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
// and the headers. A Responses API request is recorded as a Request too,
// with [Request.Responses] set and its instructions and input items as
// messages. [Server.Conns] counts the TCP connections the server
// accepted, so a test can see whether a client reuses its connections.
package agenttest
