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
//   - agent: Agent, Run, Chunk, Tool, ToolRegistry and the Approver interface;
//     hooks at the checkpoints of a run, and sub-agents (NewSubAgent).
//   - agent/skills: skills (folders holding a SKILL.md) as a context layer
//     and the get_skill tool; agent/hooks: prompt hooks loaded from a folder.
//   - interact: the user's interaction as tools: ask_user_question with its
//     form service (answered over HTTP, bound to the session) and show_card.
//   - agent/agenttest: a fake model for tests, an OpenAI-compatible server
//     that streams scripted replies and records the requests.
//   - demo: the built-in demo model, plugged in through an HTTP client
//     without a listening port, and the demo tools.
//   - approval: the approval Manager (register, wait, respond, cancel),
//     ready-made approvers and HTTP handlers for decisions.
//   - stream: the incremental parser of model text (control tags, voice flag,
//     sentences) and the tool-call delta accumulator.
//   - intent: intent tags, the default planning and continuation prompts and
//     tag clean-up of text.
//   - memory: the Store interface, in-memory, SQLite and PostgreSQL stores, the pieces
//     of each request (history repair, truncation, context layers),
//     summarisation and export.
//   - mcpclient: the tools of MCP servers (stdio, SSE, streamable HTTP) as
//     agent tools, shared or one server instance per conversation.
//
// The examples directory holds runnable programs; examples/cli is a terminal
// agent that works without an API key on a built-in demo model.
package planround
