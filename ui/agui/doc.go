// Package agui serves planround turns to AG-UI clients (the protocol of
// @ag-ui/core and @ag-ui/client 1.0): a [Handler] takes a POSTed
// RunAgentInput and answers with the run's events as server-sent events, one
// "data: <json>" line per event, flushed one by one; an [Encoder] writes those
// events for a host with a transport of its own.
//
// # Runs, threads and turns
//
// An AG-UI thread is a planround session (threadId is the session id), and an
// AG-UI run is one request: it follows a turn from where the request found it
// until the turn ends, or until it waits for a person. A RunAgentInput
// without resume entries starts a turn with its last message, which must be
// the user's (its text, or the text parts of its content); one with resume
// entries answers the interrupts they name, then follows the turn on. Every
// request goes through ui.Config.Authorize with its thread id before anything
// is done: nobody starts, answers or stops a run for someone else.
//
// Human in the loop is AG-UI's interrupt: a run whose turn waits for an
// approval or a form finishes with the outcome {"type":"interrupt"}, listing
// the Interrupt; the client continues with a new run whose resume entry
// answers it by its id:
//
//   - an approval (reason [ReasonToolApproval], id: the approval id,
//     toolCallId: the call) is answered with {"approved": bool, "reason":
//     string}; a cancelled entry rejects the call. The decision is bound to
//     the call the client holds in the input's messages with that id: its
//     name and arguments are what the person saw, and when they are not the
//     approval's the request is refused with 409 and nothing is decided;
//   - a form (reason [ReasonInputRequired], id: the form id) is answered
//     with the answers by question id ({"city": "Lima"}; an array for a
//     multiple choice), or, for an MCP server's elicitation, with the
//     content its schema describes (or {"action": "decline"}); a cancelled
//     entry cancels an elicitation, and is refused for an ask_user_question
//     form, which only an answer or a stop ends.
//
// An approval's answer binds to the call the client holds as it holds it:
// arguments whose numbers the client wrote its own way (2.5 for 2.50, a big
// integer rounded to a double) are the same call, other values never are.
//
// An entry whose interrupt is no longer pending (answered already, timed
// out) is skipped. When no entry answered anything, the run finishes at once
// with the interrupts of what waits in the thread now (a turn's second
// approval, say; the cancelled outcome when nothing waits and no turn runs),
// else the turn is followed on. A call waiting for approval that the
// client's messages do not hold (its events went to another tab) is shown
// first (TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END in the message of
// its round), so that the client can answer or cancel it.
//
// An input with resume entries whose messages end with a new user message
// (one after the assistant's: the person wrote instead of answering, and
// the client cancels what waits, as @ag-ui/client requires) gives its
// entries (a cancelled entry also ends an ask_user_question form), follows
// the turn they answered to its end, stops it if it waits for a person
// again, then starts a turn with the new message, all in the same run: the
// message is answered, or the run ends with RUN_ERROR (code
// "not_started") saying why it could not start. A client that goes away
// while its run streams (AG-UI's abortRun closes the request) interrupts the
// turn, unless ui.Config.KeepRunningOnDisconnect; a run it starts right after
// waits for that turn to wind down instead of being refused with 409.
//
// AG-UI 1.0's HttpAgent has no way to reconnect to a run in progress (its
// connect is not implemented): a client that lost its stream sees the turn's
// result in its next run, not the rest of the stream.
//
// # Mapping
//
// Ids: a round's assistant message is "<thread>.<turn>.<round>" (turn: the
// Seq of the turn's turn_started); a sub-agent's is prefixed with its
// subagentRunId and "/". A call's toolCallId is the model's call id; a
// sub-agent's call carries the ids of the calls above it
// ("call_r/call_q"), as agent.Chunk.Parent does. A sub-agent run's
// subagentRunId is the path of the call that started it ("call_r"), the
// same in every run that continues it.
//
//	planround                              AG-UI
//	-------------------------------------  ---------------------------------------------
//	the request                            RUN_STARTED {threadId, runId} first
//	first chunk of a round                 STEP_STARTED {stepName: "round <n>"}
//	round_end                              TEXT_MESSAGE_END / REASONING_END of the round,
//	                                       CUSTOM "planround.round_end" {round, intent,
//	                                       finishReason, usage}, STEP_FINISHED
//	text                                   TEXT_MESSAGE_START {messageId, role: assistant}
//	                                       once per round, TEXT_MESSAGE_CONTENT {delta}
//	reasoning                              REASONING_START + REASONING_MESSAGE_START once,
//	                                       REASONING_MESSAGE_CONTENT; both END before text
//	tool_call start                        nothing: the call opens with its arguments
//	tool_input (streamed arguments)        TOOL_CALL_START {toolCallId, toolCallName,
//	                                       parentMessageId: the round's message}, then
//	                                       TOOL_CALL_ARGS {delta} per fragment;
//	                                       TOOL_CALL_END at the next chunk of another kind
//	first chunk with whole arguments       TOOL_CALL_START, TOOL_CALL_ARGS (the whole
//	(approval_required, executing, ...)    arguments), TOOL_CALL_END; not for a call the
//	                                       client holds already (input messages)
//	approval_required                      Interrupt {id: approval id, reason:
//	                                       "tool_approval", toolCallId, message,
//	                                       responseSchema: {approved, reason?}, metadata:
//	                                       {tool, arguments, argumentsDigest, hints,
//	                                       mustAsk, details, agent}}; the run ends
//	executing with a partial result        CUSTOM "planround.tool_progress"
//	result                                 TOOL_CALL_RESULT {messageId, toolCallId,
//	                                       content: the result, role: tool}
//	tool_rejected                          CUSTOM "planround.tool_rejected" {toolCallId,
//	                                       cause, reason, partialResult}, then
//	                                       TOOL_CALL_RESULT {content: the reason}
//	side: a form (ask_user_question,       Interrupt {id: form id, reason:
//	MCP elicitation)                       "input_required", toolCallId, message,
//	                                       responseSchema: built from the questions
//	                                       (single: string enum, multiple: array of
//	                                       enum, text: string; all required) or the
//	                                       elicitation's schema}; the run ends
//	side: any other JSON object (a card)   ACTIVITY_SNAPSHOT {messageId, activityType:
//	                                       "planround.<its type>", content: the payload}
//	side: anything else                    CUSTOM "planround.side" {toolCallId, side}
//	warning                                CUSTOM "planround.warning" {code, text}
//	a sub-agent's first chunk              SUBAGENT_STARTED {subagentRunId, name,
//	(Depth > 0)                            parentToolCallId, parentSubagentRunId}; its
//	                                       events carry its subagentRunId
//	the sub-agent's call: result           SUBAGENT_FINISHED {outcome: success}
//	the sub-agent's call: rejected         SUBAGENT_ERROR {message: reason, code: cause}
//	a run that stops inside a sub-agent    SUBAGENT_FINISHED {outcome: suspended,
//	                                       interruptIds}
//	the run waits for a person             RUN_FINISHED {outcome: interrupt, interrupts}
//	turn_ended finished                    RUN_FINISHED {outcome: success, usage}
//	turn_ended rejected, suspended         CUSTOM "planround.turn_ended" {status, reason,
//	                                       cause}, RUN_FINISHED {outcome: success}
//	a turn that ends (not finished nor     CUSTOM "planround.turn_ended" before the next
//	suspended) before another one starts   turn's events (a run that answers a new
//	in the same run                        message)
//	turn_ended interrupted                 CUSTOM "planround.turn_ended", RUN_FINISHED
//	                                       {outcome: cancelled}
//	turn_ended error                       CUSTOM "planround.turn_ended", RUN_ERROR
//	                                       {message, code: "error"}
//	the events could not be followed       RUN_ERROR {message, code: "events_lost" or
//	(runner.ErrEventsLost, a closing       "error"}
//	runner)
//	interrupted, suspended chunks          nothing: the turn's end says it
//
// Before RUN_FINISHED every open message, reasoning, call, step and sub-agent
// is closed, as AG-UI's verifier requires. RUN_FINISHED's usage sums the
// token usage of the rounds the run streamed.
//
// What AG-UI cannot say goes to the CUSTOM events above: a round's intent
// and finish reason, a warning, a rejection's cause, a tool's progress, and a
// turn that ended otherwise than finished. A run's state (STATE_*), the
// client's tools (RunAgentInput.tools, the agent's tools are the server's)
// and MESSAGES_SNAPSHOT are not used.
package agui
