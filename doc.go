// Package planround is a Go SDK for planning-round agents on any
// OpenAI-compatible chat-completions API.
//
// A host application (a web service, a CLI, a bot) builds an
// [github.com/planround/planround/agent.Agent] with tools, an Approver and
// optionally a Store, calls Run, and ranges over typed chunks that it
// forwards to its own transport and UI. The SDK owns the agent loop, the
// stream parsing, the approval protocol and the memory; the host owns the
// wire and the pixels.
//
// # The planning round
//
// Every run begins with a planning round: the model answers in words first,
// without tools, and ends its reply with an intent tag, <no_tool> or
// <need_tool>. The tag is never shown. A continuation round without tools,
// or the tool loop, follows. An agent may turn the planning round off and
// start with the tool loop. In the tool loop each call goes through the
// states start, approval_required, executing and result (or rejected), each a
// chunk, so a UI can show every call as it happens and ask a person before
// anything risky runs. Cancelling the run's context stops it cleanly at any
// point, and the history stays valid for the next request.
//
// # Packages
//
// One entry each; the README's table links them, and docs/packages.md says
// more.
//
//   - agent: Agent, Run, Chunk, Tool, ToolRegistry and the Approver
//     interface; hooks, sub-agents (NewSubAgent), durable runs (Resume) and
//     OpenTelemetry spans and metrics.
//   - agent/agenttest: a fake model for tests, an OpenAI-compatible server
//     (or an in-process RoundTripper) that streams scripted replies and
//     records the requests.
//   - agent/skills: skills (folders holding a SKILL.md) as a context layer
//     and the get_skill tool.
//   - agent/hooks: prompt hooks loaded from a folder for Config.Hooks.
//   - agent/openaiparams: the conversion between the SDK's messages and
//     openai-go's request messages.
//   - approval: ready-made approvers and policies that decide without a
//     person, and the approval Manager the runner keeps its approvals with
//     (durable across processes; the decisions' audit).
//   - approval/approvaltest: the conformance suite of an Approver.
//   - interact: the user's interaction as tools: ask_user_question (asked
//     through the run's Asker: a runner's forms) and show_card.
//   - memory: the Store interface and MemStore, the pieces of each request
//     (history repair, truncation, context layers), summarisation and
//     export; for store authors, the checks every store makes and copies of
//     messages.
//   - memory/sqlitestore: the embedded SQLite store.
//   - memory/pgstore: the PostgreSQL store, for several processes.
//   - memory/storetest: the conformance suite of a Store.
//   - mcpclient: the tools of MCP servers (stdio, SSE, streamable HTTP) as
//     agent tools, shared or one server instance per conversation.
//   - runner: the session runner: one driver per session across crashes and
//     replicas, turns in the background, events replayed from a cursor, and
//     the person's door: what a session waits for, decisions, answers,
//     stops and the audit.
//   - stream: the incremental parser of model text (control tags, voice flag,
//     sentences) and the tool-call delta accumulator.
//   - intent: intent tags, the default planning and continuation prompts and
//     tag clean-up of text.
//   - ui: what the protocol handlers share: ui.Config (the runner, who is
//     asking, the limits) and the authorization vocabulary.
//   - ui/aisdk: the Vercel AI SDK's UI message stream, and the endpoint its
//     useChat client talks to, on the runner.
//   - ui/agui: the AG-UI protocol's events, and a handler for its
//     RunAgentInput, on the runner.
//   - ui/jsonapi: the web chat's own JSON and Server-Sent Events protocol
//     (send, events from a cursor, history with open calls, decide, answer,
//     stop, sessions) as a handler on the runner.
//   - demo: the built-in demo model, plugged in through an HTTP client
//     without a listening port, and the demo tools.
//
// The examples directory holds runnable programs: examples/webchat, a web
// chat that shows every chunk, approval and interrupt; examples/cli, a
// terminal agent; examples/aisdk, a page on the AI SDK's own client. Each
// works without an API key on the built-in demo model. test/durable kills
// and restarts replicas to test durable runs end to end; the load harness
// (loadharness, a module of its own) measures many conversations at once.
package planround
