// Package memory keeps conversations and builds the messages of the next
// request from them.
//
// # Stores
//
// A [Store] holds sessions, their messages and their long-term summaries.
// Three ship: [MemStore], in memory (its zero value is ready); the embedded
// default in package memory/sqlitestore, one SQLite file through a pure-Go
// driver, for one process (or a few on one machine); and
// memory/pgstore, on PostgreSQL, for any number of processes on any number
// of machines. The last two live in their own packages so that programs
// that do not use them do not carry their drivers (the SQLite one is about
// 20 MB of binary). Every store is safe for concurrent use, appends
// atomically, and returns copies. Other stores implement the same interface
// with the functions of this package for store authors (see below) and
// check themselves with the conformance suite in memory/storetest.
//
// A user message may carry images ([Image]: a URL, or bytes with their MIME
// type, at most [MaxImageSize] each). Stores keep them whole, so a session
// that holds many grows by their size, and loading it reads them all;
// requests send only the current turn's images by default ([Truncate]).
//
// A tool message says how its call ended ([Message.Outcome]: the tool ran,
// or the call was rejected, with the typed cause in [Message.Cause]), so a
// host that redraws a conversation shows each call as it ended; a tool
// message stored before outcomes were kept has none, and is shown as
// unknown, never as done. Stores keep both.
//
// Messages are never deleted one by one: a session's old messages are
// archived into a [Summary]. Archived messages leave the model's context
// and later summaries but stay readable with Messages(ctx, id, true), for
// history display and [Export].
//
// # Durable runs
//
// Beside [Store], a store may implement optional interfaces that keep what
// a run needs to go on after its process stopped, on this process or
// another one; package runner uses them all, and package agent and
// approval the first two:
//
//   - [CallLog]: the tool calls of a round that has not ended
//     ([OpenCall]: waiting for approval, or running, with what the tool
//     saved to take the call up again), so that a call found running after
//     a crash is never run twice, and a turn that waits for a person can be
//     resumed (agent.Agent.Resume);
//   - [ApprovalStore]: the approvals and their decisions, the first
//     decision winning across processes (the runner's approvals and
//     forms);
//   - [Leaser]: one driver per session among the processes that share the
//     store;
//   - [Notifier]: notes between those processes (a decision, an
//     interrupt, new events), so that the one that waits hears at once;
//   - [EventLog]: sessions' numbered event logs, from which a client that
//     reconnects, on any process, replays a turn and follows it;
//   - [KV]: namespaced values a tool keeps per user (pinned MCP tool
//     definitions, sealed OAuth tokens);
//   - [APILog]: a bounded log of model calls, what each sent and got
//     ([APICall]), for a person to read (agent.Config.APILog).
//
// The three stores here implement them all. MemStore does so within one
// process; the SQLite store for every process of one machine that shares
// its file (its notes travel through the file: another process hears one
// within about a quarter of a second); the PostgreSQL store across
// machines. A [CallLog] also keeps the history true to what ran: an
// approver's edit of a call's arguments, saved with the call's record
// ([OpenCall.Arguments]), replaces the arguments in the stored assistant
// message.
//
// # The pieces of the next request
//
// The agent (package agent) assembles each request; this package gives it
// the pieces, each usable on its own: [Repair] makes a stored history valid
// for the API, [Truncate] shortens old tool traffic, a [Layer] adds system
// blocks before the history (a [SummaryLayer] brings the summaries back, a
// [TextLayer] adds fixed text, a [LayerFunc] anything else), and [Strict]
// lays messages out for strict chat templates (one leading system message,
// alternating user and assistant turns). agent.Agent.Preview shows the
// result: the messages the model will receive.
//
// The package imports only the standard library: a Store implementation
// pulls in no provider SDK. The conversion to and from openai-go's request
// messages lives in its own package, agent/openaiparams (ToParams,
// FromParams), which the agent sends every request through.
//
// # For store authors
//
// A program that only uses a store never needs this section; whoever writes
// a [Store] calls, inside it, the functions below: the checks every store
// makes before it writes, the id of a session created without one, and
// deep copies of messages. Every store shipped with planround ([MemStore],
// memory/sqlitestore, memory/pgstore) calls these same functions, so every
// store refuses the same input with the same error, and a program that
// moves from one store to another sees no new error.
//
// A Store is safe for concurrent use. Every method returns an error when
// its ctx is already done, and an error wrapping [ErrNotFound] for a
// session that does not exist. What it returns are copies: changing them
// never changes what is stored. Times come back in UTC. Each method that
// writes checks its input first, with the function named below, and changes
// nothing when the check fails:
//
//   - [Store.CreateSession]: call [ValidateSession]; give a session without
//     an id [NewSessionID]; a zero CreatedAt is now, a zero UpdatedAt the
//     CreatedAt; an existing id is an error wrapping [ErrExists].
//   - [Store.Append]: call [ValidateMessages] before writing anything, then
//     write all the messages or none. A store that keeps messages in memory
//     stores [CloneMessages] of them and returns CloneMessages of what it
//     keeps, so that neither its caller nor it sees the other's changes.
//   - [Store.Summarize]: call [ValidateSummary].
//
// A store that keeps durable runs implements the optional interfaces, each
// with its check:
//
//   - [CallLog]: [ValidateOpenCall] in SaveCall, [ValidateAppendCalls] in
//     AppendCalls (it checks the messages with ValidateMessages too);
//   - [ApprovalStore]: [ValidateApproval] in CreateApproval;
//   - [Notifier]: [ValidateNote] in Notify;
//   - [EventLog]: [ValidateEvents] in AppendEvents, before the store checks
//     that the events continue the log ([ErrEventSeq]);
//   - [KV]: [ValidateKV] in every method, with a nil value for GetValue and
//     DeleteValue;
//   - [APILog]: [ValidateAPICall] in AppendAPICall.
//
// [Leaser] has nothing to check beyond its arguments. [ValidateImage],
// [ValidArguments] and [IsObject] serve hosts and the agent too:
// ValidateMessages applies the first to every image and the last to every
// tool call's arguments.
//
// A store author runs storetest.Run from an ordinary test and, for the
// optional interfaces the store implements, storetest.RunDurable,
// storetest.RunKV, storetest.RunAPILog and, when several processes share
// the store, storetest.RunNotifierPair, storetest.RunEventLogPair and
// storetest.RunKVPair (see package memory/storetest).
//
// # Summarisation
//
// A [Summarizer] watches the number of active messages of a session. At
// its threshold (20 by default) it asks a [SummaryModel] to summarise the
// oldest half, stores the summary and archives the originals, never
// splitting a tool call from its results and never touching the current
// turn.
//
// # Export and import
//
// [Export] writes a session (messages, archived ones included, with how
// their tool calls ended, and summaries) as a versioned JSON document
// ([ExportFormat]); [Import] reads it back into any
// store, checking the whole document before it writes anything, and
// [ImportFrom] does so as it reads the document from an [io.Reader] (a
// request body), without holding its text. Their time grows as n log n at
// most with the document, whatever ranges its summaries name.
package memory
