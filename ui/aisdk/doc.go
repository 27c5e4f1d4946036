// Package aisdk serves planround's turns to front ends built on the Vercel
// AI SDK's UI layer (useChat, AI Elements, assistant-ui; the ai npm
// package; tested with ai 7.0.173, and tool approvals need version 6 or
// later): the UI message stream its
// DefaultChatTransport reads, and the requests it sends, approvals
// included.
//
// NewHandler is the endpoint (see it for the requests it serves); Writer
// writes a session's runner events as the stream for a host that serves
// it itself. The handler drives the turns on a runner.Runner, so that
// every guarantee of the runner holds: a turn does not depend on the
// request that started it (with ui.Config.KeepRunningOnDisconnect), a
// decision taken on any process resumes it, a reconnecting client misses
// nothing.
//
// # A turn in the stream
//
// A turn is one assistant message. Its response streams until the turn
// ends, or until it waits for a person: at an approval the message
// finishes with the finish reason "tool-calls" and the status "waiting",
// and the client's next request, with the person's approval response on
// the tool part (addToolApprovalResponse), continues the same message.
// A client sends that request by itself with
//
//	sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses
//
// when the approval is of the host's run. For an approval inside a
// sub-agent, whose own call (the research tool, say) is still running,
// that function waits for the outer call's output, which waits for the
// approval: use a test that sends once an approval is answered and none is
// left to answer:
//
//	sendAutomaticallyWhen: ({messages}) => {
//	  const m = messages.at(-1);
//	  return m?.role === 'assistant' &&
//	    m.parts.some(p => p.state === 'approval-responded') &&
//	    !m.parts.some(p => p.state === 'approval-requested');
//	}
//
// The same holds when the agent streams tool arguments
// (agent.Config.StreamToolArguments) and the model calls several tools at
// once: the calls after the one asked about show before their turn.
//
// # Mapping
//
// Every chunk of the agent (agent.Chunk) becomes stream chunks as the
// table says. A tool part is a dynamic tool part executed by the server
// (dynamic and providerExecuted true); its id is the call's, prefixed for
// a sub-agent's call with the ids of the calls above it ("call_1/call_7").
// What the protocol cannot say goes into data parts named
// data-planround-<what>, and into the planround key of the message's
// metadata and of providerMetadata and toolMetadata.
//
//	planround                          UI message stream
//	---------------------------------  ---------------------------------------------
//	turn (new message)                 start {messageId "turn-<seq>"}
//	a round of the run (planning = 0)  start-step ... finish-step
//	text                               text-start, text-delta, text-end (a part per round)
//	reasoning                          reasoning-start, reasoning-delta, reasoning-end
//	tool_input (argument fragments)    tool-input-start, tool-input-delta
//	tool_call approval_required        tool-input-start, tool-input-available
//	                                   {toolMetadata.planround: arguments_digest,
//	                                   hints, details, must_ask}, tool-approval-request
//	                                   {approvalId, reason: the details}; the response
//	                                   finishes ("tool-calls", status "waiting")
//	a decision taken by another        tool-approval-response {approvalId, approved,
//	  request (another tab)            reason}, first in the continuation of a client
//	                                   that answered otherwise
//	tool_call executing                tool-input-start, tool-input-available (once)
//	tool_call result                   tool-output-available {output: the result text}
//	tool_rejected, by a person or      tool-output-denied, data-planround-rejection
//	  a policy                         {toolCallId, cause, reason, partial_result}
//	tool_rejected otherwise            tool-output-error {errorText: the reason},
//	  (timeout, interrupt, failure)    data-planround-rejection
//	side: a card                       data-planround-card {toolCallId, payload}
//	side: a form, an elicitation       data-planround-form / -elicitation, id the form id;
//	                                   the response finishes ("tool-calls", "waiting")
//	side: anything else                data-planround-side {toolCallId, payload}
//	round_end                          data-planround-round {round, intent,
//	                                   finish_reason, usage}, then finish-step
//	warning                            data-planround-warning {code, text}
//	suspended                          data-planround-suspended
//	interrupted (a sub-agent's)        data-planround-interrupted {agent, depth, parent}
//	a sub-agent's chunks               as above, marked: providerMetadata.planround or
//	                                   toolMetadata.planround or the data's
//	                                   {agent, depth, parent}; no steps of their own
//	turn ended                         finish {finishReason: stop | interrupted |
//	                                   other (rejected, suspended) | error,
//	                                   messageMetadata.planround: status, reason, cause,
//	                                   error, usage (the run's tokens), seq}; a failed
//	                                   turn writes error {errorText} first
//	end of the response                [DONE]
//
// A part of a call shows at the call's first state after the model's
// response (its approval, or its execution), not when the model begins
// it: a client that waits for every call of a step to be answered sees no
// call the run has not come to yet.
//
// # Requests
//
// The messages a client sends are not its history: the session's history
// is the Store's, and the handler reads the last message only (the user's
// text, or the approval responses on the assistant's tool parts). File
// parts, regenerating a message and client-side tools are not supported.
// A form is answered with the body field planround.form, which a page
// sends with chat.sendMessage(undefined, {body: {planround: {form: {id,
// answers}}}}).
//
// # Request bodies
//
// What DefaultChatTransport sends, for a client without the AI SDK; the
// examples Example_userMessage, Example_approvalResponse,
// Example_formAnswer, Example_stop, Example_reconnect and Example_history
// send each to a running handler, with the curl command and the answer.
//
// A user's message (POST {api}):
//
//	{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hi"}]}],
//	 "trigger":"submit-message"}
//
// An approval response (POST {api}): the messages again, the last one the
// assistant's with its tool part answered, and messageId naming it:
//
//	{"id":"chat-1","messages":[...,{"id":"turn-1","role":"assistant","parts":[
//	  {"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1",
//	   "state":"approval-responded","input":{"city":"Lima"},
//	   "approval":{"id":"<approvalId>","approved":true,"reason":"optional"}}]}],
//	 "trigger":"submit-message","messageId":"turn-1"}
//
// A form's answer (POST {api}): the messages again and planround.form:
//
//	{"planround":{"form":{"id":"<form id>","answers":{"city":["Quito"]}}},
//	 "id":"chat-1","messages":[...],"trigger":"submit-message"}
//
// Stop: POST {api}/{id}/stop, no body; it answers
// {"success":true,"was_active":true}. Reconnect: GET {api}/{id}/stream
// (the turn in progress, or 204). History: GET {api}/{id}/messages (the
// chat's messages as the client keeps them, see Handler.Messages).
package aisdk
