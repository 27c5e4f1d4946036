// Package agent runs planning-round turns against an OpenAI-compatible
// chat-completions API and reports everything that happens as typed chunks.
//
// # A turn
//
// [Agent.Run] answers one user message. It returns an iterator; nothing
// happens until the caller ranges over it, and the model's stream is read in
// the caller's goroutine, so the host's own transport (SSE, WebSocket, a
// terminal) sets the pace:
//
//	for c, err := range a.Run(ctx, agent.Input{SessionID: id, Message: text}) {
//		if err != nil {
//			return err
//		}
//		send(c) // json.Marshal(c) is the stable wire schema
//	}
//
// [Input.Images] go beside the text of the user's message (URLs, or bytes
// sent as data: URLs) for models that read images.
//
// Round 0 is the planning round: the request carries no tools, and a
// temporary planning prompt asks the model to answer in words and end with
// an intent tag (see package intent). The tag never reaches [Chunk.Text],
// not even in part when the stream breaks inside it (it stays in
// [Chunk.Raw] and in the stored history; later requests of the run get the
// text without it, and no request carries an assistant message left empty
// by stripping). With <no_tool> one
// continuation round follows, without tools; otherwise the tool loop runs
// until the model answers without calling a tool, or until
// [Config.MaxToolRounds]. The rounds after round 0 count from 1.
// [Config.DisablePlanning] turns the planning round off: the run starts
// with the tool loop at round 1, and no round_end carries an intent.
//
// Each round ends with a round_end chunk that carries the provider's
// [FinishReason]. A response cut short by the token limit or the content
// filter is followed by a warning chunk ([WarnLength],
// [WarnContentFilter]) right before its round_end; the run goes on. A
// host acts on a warning by its [Chunk.Code].
//
// The temporary prompts are system messages after the conversation by
// default. Models whose chat template refuses that, or refuses two
// assistant messages in a row as the stored history has them, get requests
// they accept with [Config.RequestShape] set to [ShapeStrict].
//
// # Model settings
//
// [Config.Settings] sets the sampling and output settings of the requests
// (temperature, top_p, token limits, stop sequences, seed, reasoning
// effort, parallel tool calls, provider-specific fields), and
// [Input.Settings] overrides them for one run, field by field. A
// [ResponseFormat] asks for a JSON answer that follows a schema;
// [JSONSchema] makes one from a Go type. It shapes the answer, so the
// planning round goes without it: an agent whose answer is the JSON alone
// also sets [Config.DisablePlanning].
//
// # Tool calls
//
// Each call is a [ToolCall] that moves through the states start (as soon as
// its name streams in), approval_required, executing (repeated with
// [ToolCall.PartialResult] while the tool writes to its [Progress]) and
// result, or ends rejected, with a [Cause] that says why beside the reason
// in words. Tools registered with [ToolDefinition.SkipApproval] go from
// start to executing. Arguments that are not a JSON object, or do not match
// the tool's schema, and unknown tools never reach the [Approver] or a tool:
// the call is rejected ([CauseInvalidArguments], [CauseUnknownTool]), the
// model reads why, and the loop goes on. Arguments that are not a JSON
// object are kept in the history wrapped in one (see
// [memory.ValidArguments]), because some providers refuse a conversation
// whose earlier arguments they cannot parse; the chunks show the raw text
// in [ToolCall.ArgumentsRaw]. A tool that fails
// or panics is an error result for the model, not a failed run.
//
// [NewTool] makes a tool of a Go function whose arguments are a Go value:
// the schema the model sees is inferred from the type, and the arguments
// arrive decoded. A running tool finds its session, call and round with
// [CallFromContext].
//
// An [Approver] decides on each call. Its Request registers the call before
// anything is shown and returns a [Ticket]: a decision taken at once by a
// policy ([Decided]; no approval_required chunk, a rejection has
// [CausePolicy]), or a pending approval ([Pending]) that the agent shows as
// approval_required, with the ticket's approval id, and then waits for. A
// decision can therefore never arrive too early, and the agent waits for
// every pending ticket, also when the run ended first, so none is left
// pending. Package approval has ready, composable approvers and policies;
// a runner (package runner) keeps the approvals a person answers from
// elsewhere, such as a browser.
//
// A call carries what its tool says about itself, [ToolHints] (read-only,
// destructive, idempotent, open world, and whether the host trusts whoever
// said so: [WithHints], or an MCP server's annotations), for approvers to
// decide on and cards to show. A tool that implements [ApprovalNoter] adds
// to each call's approval: details for the person, and MustAsk, which
// makes even a tool that skips approval ask, and which no policy of package
// approval approves (an MCP tool whose definition changed since the user
// approved it).
//
// # Sub-agents
//
// [NewSubAgent] makes a tool that runs a nested agent on a task, with its
// own prompt, model and tools ([ToolRegistry.Subset] picks some of the
// host's), and returns its answer as the call's result. The nested run's
// chunks come through the calling run's iterator while the call executes,
// marked with [Chunk.Agent], [Chunk.Depth] and [Chunk.Parent], so a host
// shows them nested under the call's card; its calls that need approval go
// to the calling run's Approver, in the calling run's session; cancelling
// the calling run cancels it; sub-agents nest down to [WithMaxDepth]. Only
// the call and its result are history. A tool that keeps state per
// conversation keys it by [CallInfo.Conversation] and releases a
// sub-agent's with [AfterSubAgent].
//
// # Stopping
//
// Cancelling ctx interrupts the run wherever it is: a pending approval ends
// as rejected ([CauseApprovalInterrupted]), a running tool as rejected
// ([CauseInterrupted]) with the output it wrote so far, then an
// interrupted chunk ends the run and the iterator returns nil. Breaking out
// of the loop ends the run too: running tools are cancelled and waited for,
// nothing is yielded again. No goroutine started by a run outlives it.
//
// # History
//
// [Turn.Messages] is what the turn adds to the conversation: the user
// message, assistant messages with their raw text and tool calls, and one
// tool message per call, also after an interrupt, a rejection, a cut stream
// or a panicking tool, so it is always valid input for the next request.
// Each tool message says how its call ended, in the vocabulary of the
// chunks: memory.Message.Outcome is "result" when the tool ran (a tool that
// returned an error too: the chunk is a result) and "rejected" otherwise,
// with memory.Message.Cause the [Cause] of the tool_rejected chunk, so a
// host that redraws a stored conversation shows each call as it ended. The
// stored arguments are those the tool ran with: an approver's edit
// (Decision.Arguments) replaces the model's, also with a durable Store,
// which stored the call before it was asked about (memory.OpenCall's
// Arguments). [History] rebuilds the same messages from a log of chunks.
// With [Config.Store] and [Input.SessionID] the agent loads and saves the
// conversation itself (package memory).
//
// # Durable runs
//
// With a Store that also implements memory.CallLog (MemStore, the SQLite
// and the PostgreSQL stores do), a turn persists as it goes: the user
// message when it starts, each round when it ends, a round's tool calls as
// open records before the first approval_required chunk (each call's
// approval id once the Approver registered it, before its card is shown), a
// call as executing before its tool starts (with an approver's edit of its
// arguments, written into the stored assistant message), and each tool
// message as soon as it is known. A process that dies loses
// nothing it had shown. Each call has a durable key, the same in every turn
// that takes it up (ApprovalRequest.Key, CallInfo.Key: "<stored message
// id>/<call id>"), by which a durable Approver keeps one approval per call.
//
// Agent.Resume continues a turn left with open calls: after a crash, a
// restart, or a suspension. An Approver suspends a run by answering "not
// now" (ErrSuspended from a ticket's Wait; a runner's approvals do it after
// runner.Config.SuspendAfter), and a host suspends its runs when it shuts
// down by cancelling their contexts with the cause ErrSuspended: the run
// ends with a suspended chunk instead of holding a goroutine for hours, and
// its approvals stay answerable. A resumed call asks the Approver again
// with the same key, and gets the approval asked before, decided meanwhile
// or not; a call found executing is never run again (CauseStopped), unless
// its tool is resumable (ToolDefinition.Resumable, such as
// ask_user_question): then it runs again, and takes up what it waited for
// by its key. A resumable tool suspends the run while its call waits for a
// person (it returns ErrSuspended, see [Suspend]): the call stays open,
// executing, and its record names what it waits for. A running tool may
// also save a small state with its call's record ([SaveCallState]), such
// as the id of the task an MCP server runs the call as: a call found
// executing with a state runs again with it ([CallInfo.State]), its tool
// resumable or not, and takes up what it started instead of starting it
// again. A new user message on
// a session with open calls closes them first (CauseMovedOn for the
// undecided ones, CauseStopped for those found executing), so the history
// stays valid, and cancels what they waited for through the Approver
// ([ApprovalCanceler]).
//
// An Agent drives a session with one run at a time: a run or a resumed
// turn on a session that a run of the same Agent drives ends at once with
// ErrBusy. Across processes that share a Store, the runner package drives
// sessions: it holds each session's lease while a run drives it, so that
// one process at a time does, and a tool never runs twice.
//
// # Errors
//
// A run ends with an error only when the model, the transport or the store
// fails: an error the provider reported, as an HTTP error status (after
// the retries of [Config.MaxRetries]) or inside the response
// ([*ProviderError], whose text carries the provider's message), a
// request that got no response ([*ConnectionError], which says whether it
// may have reached the provider: only one that provably did not is
// retried), a response cut before its end
// ([ErrTruncated], wrapping the connection's error when there was one), a
// response that is not an event stream (the error says what arrived), or a
// store failure. The chunks that arrived before are delivered first, and the
// turn's messages stay valid.
//
// A connection cut after the response's finish reason loses nothing: the
// run goes on with the whole response. A server that ignores "stream": true
// and answers with one chat.completion object works too. The body of each
// response is read to its end before it is closed, so that the HTTP client
// can reuse the connection for the next round.
//
// # Hooks
//
// [Config.Hooks] inject prompts into the requests at the checkpoints of a
// run ([Checkpoint]: before planning, after planning, before each tool
// round, after tool results, before the final answer). A temporary
// injection goes into the next request only; a persistent one stays in the
// conversation as a message with memory.Message.Hook set, which a host
// does not show. Package agent/hooks loads hooks from a folder (hooks.json
// and Markdown bodies).
//
// # Telemetry
//
// An Agent emits OpenTelemetry spans and metrics named by the GenAI
// semantic conventions, through the providers of Config.TracerProvider and
// Config.MeterProvider (otel's global ones when nil: no-op unless the host
// set them). The library uses the OpenTelemetry API only; the host brings
// the SDK and the exporter. Each run (and each [Agent.Resume]) is an
// invoke_agent span, with gen_ai.conversation.id, planround.resumed and
// planround.outcome (answered, interrupted, rejected, error, max_rounds,
// suspended, or abandoned when the consumer stopped ranging); an error
// sets its status. Its children are one "chat {model}" span per model
// call (gen_ai.request.model, gen_ai.provider.name when Config.BaseURL
// names a known provider, gen_ai.response.finish_reasons, token usage,
// planround.round, planround.intent on the planning round, and a
// first_token event; the summary request of Config.SummarizeAt is one
// too, with planround.summary instead of planround.round), one
// "await_approval {tool}" span per call asked about (planround.outcome
// approved, rejected, timed_out, interrupted or suspended; planround.approval.waited when a person was waited for; and,
// when the Approver decided, a planround.approval.decision event with
// planround.approval.approved, planround.cause, planround.approval.by and
// planround.approval.via (Decision.By and Via: who decided and through
// what), planround.approval.edited and planround.approval.id) and
// one "execute_tool {tool}" span per call run (gen_ai.tool.name,
// gen_ai.tool.call.id, planround.outcome result, error, interrupted,
// suspended for a resumable call that waits, or stopped for a call a
// resumed turn found cut by a crash). A tool's
// context carries its span, so a sub-agent's run nests under its call and
// an MCP call (package mcpclient) sends the trace context to its server.
// A sub-agent whose Config leaves TracerProvider, MeterProvider or Logger
// nil records with the calling run's: its spans, its metrics (with its own
// gen_ai.request.model) and its log records go where the host's do; what
// its Config sets, it keeps (see [NewSubAgent]).
//
// The metrics are gen_ai.client.token.usage and
// gen_ai.client.operation.duration (per model call, the summary's
// included), planround.tool.duration, planround.approval.wait,
// planround.runs (by outcome) and, with a Config.RequestLimit,
// planround.model.queue.length and planround.model.queue.wait. Config.Logger gets a "model call" record
// per model call (session, round, model, latency, outcome, finish reason,
// token usage, the error), the summary's with summary set instead of the
// round: a run's chat spans and records are as many as its requests.
// Prompts, replies, tool arguments and results are recorded only with
// Config.TelemetryContent, each cut at Config.TelemetryContentLimit bytes.
// gen_ai.response.model is not recorded: the stream decoder does not read
// the model field of the chunks.
//
// # API log
//
// For a person rather than a trace backend, [Config.APILog] (a store that
// implements [memory.APILog]; the three stores of package memory do)
// gets one [memory.APICall] per model call, the summary's included, when
// the call has ended: its purpose (planning, continuation, tool_round,
// summary, sub_agent), session, round, the request's body as sent, the
// reply, usage, error, time to first token and latency.
// [Config.APILogMetadataOnly] leaves the request and the reply out. The
// API key and Config's headers are never in a record: they travel as
// headers. Nothing is recorded, and nothing allocated, without an APILog.
//
// # Model APIs
//
// The agent speaks to its model through one seam, internal to the package
// for now: everything above it (the planning round, intent tags, tool
// calls, approvals, interrupts, history, telemetry) builds a request in its
// own vocabulary (the messages as [memory.Message], the tools as
// [ToolDefinition], the [ModelSettings]) and reads the response as a
// stream of [stream.Delta] values: text, reasoning, tool-call fragments,
// finish reason, usage, and the provider's errors as [*ProviderError].
// Behind it an API's own code builds and sends the request, retries it,
// decodes the stream and translates its errors. Chat completions is the one
// implementation and the default: [Config.RequestOptions] are its
// openai-go options. The seam is where other model APIs (OpenAI's
// Responses, Anthropic's Messages) are to come, with the history in the
// Store staying the same for all of them.
//
// # Testing
//
// Package agent/agenttest has a fake model for a host's tests: a server on
// 127.0.0.1 that streams scripted replies and records the requests, or a
// function that answers in process as the Transport of [Config.HTTPClient].
// A run's first request is the planning round's, without tools, so the
// script of a turn that calls a tool starts with a planning reply
// (agenttest.Plan) unless [Config.DisablePlanning] is set; the kit refuses
// a reply that calls a tool its request does not offer.
// Package demo has the built-in demo model and tools the examples run on.
package agent
