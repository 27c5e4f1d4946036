// Package mcpclient offers the tools of MCP (Model Context Protocol)
// servers to an agent: each tool a server lists becomes an [agent.Tool], so
// it goes through approval, shows its progress and can be interrupted like
// any other.
//
// # Servers
//
// A [ServerConfig] describes a server on one of three transports: stdio (a
// subprocess speaking on its standard input and output), sse (the HTTP+SSE
// transport of older servers) and http (streamable HTTP). [LoadConfig] and
// [ParseConfig] read the JSON file format MCP clients share
// ({"mcpServers": {...}}), with a few fields of this package's own.
// References to environment variables such as ${GITHUB_TOKEN} are expanded
// when the servers start, and secrets never show in errors, logs, tool
// definitions, results, resources, prompts, requests for input or chunks
// (see [ServerConfig] and [Client.Tools]).
//
// [New] starts the servers and reads their tools (all pages of the list);
// [Client.Register] adds them to an [agent.ToolRegistry], after the host's
// own tools, and [Client.Tools] returns them. A tool keeps its MCP name
// unless two servers have a tool of that name: then each is named
// <server>__<tool>. The server's input schema becomes the tool's
// parameters, so the agent checks a call's arguments before anyone is asked
// to approve it. A server or some of its tools may skip approval (for
// servers that only read), and tools may be disabled, in the configuration.
// [Client.Servers] reports each server's state and tools, for a host to
// show; [Client.Close] ends everything.
//
// # Shared and per-conversation servers
//
// A shared server (the default) has one connection for everybody, opened by
// New. When it is lost (the process crashed, the HTTP server went away) the
// next call opens it again; while that fails, calls fail at once with the
// reason, and the next attempt waits a pause that doubles with each
// failure, up to 30 seconds. A call never waits on a dead server.
//
// A per_conversation server runs one instance for each conversation, so
// that what it keeps (a browser, a shell, a working directory) is never
// seen by another. New starts it once to read its tools and closes it
// again; a conversation's first call starts its own instance, which later
// calls of the conversation reuse. The conversation is the session of the
// run the call belongs to ([agent.CallFromContext]), so a run needs an
// [agent.Input.SessionID] to use such a server. A sub-agent's run
// ([agent.NewSubAgent]) is a conversation of its own
// ([agent.CallInfo.Conversation]): its calls get a fresh instance, never the
// user's, which ends when the sub-agent's run ends. Instances are ended when
// they go unused for [Options.SandboxIdle], to make room for another
// beyond [Options.MaxSandboxes] (the least recently used idle one goes),
// by [Client.CloseConversation], and by Close.
//
// A stdio server runs in a process group of its own, and ending it ends the
// whole group: a server started through a wrapper (sh, npx, uvx) leaves no
// process behind. On Linux the group also dies with the host process when
// that ends without cleaning up (killed with SIGKILL, say): a small guard
// shell that leads the group, started just before the server, kills the
// group when the host is gone. Where the host may make cgroups (root, or a
// cgroup v2 delegated to its user), the server also runs in a cgroup of its
// own, which ending the server and the guard kill whole and remove: a
// process the server started that left the group (setsid, a daemon's
// double fork) ends too. Without a cgroup it survives; with one, a process
// of the same user can still leave by moving itself to another cgroup, and
// one that kills the guard survives the host's SIGKILL. The server itself
// is started as it would be without the guard (same pid, arguments,
// streams and exit status). A server
// that writes a message larger than 32 MiB is ended, so that it cannot grow
// the client's memory without bound; what it writes to its standard error
// goes to [Options.Logger].
//
// # Calls
//
// Text in a result passes through. Images and audio become a placeholder
// such as "[image captured, mimeType=image/png]", so that base64 does not
// flood the model's context; resource links and embedded resources become
// a short text; a result with structured content only gives its JSON. An
// error result is the tool's error: the model reads "error: " and the
// server's text.
//
// Progress notifications become the tool's partial output, a line each:
// the notification's message, or "step 3/10" without one. The agent shows
// them as executing chunks and keeps them when the run is interrupted
// during the call. Secrets are redacted in them as in the text of one
// message, also one split between two notifications: it shows as one
// "[redacted]", with the line break after it. So the end of a message that
// may be the beginning of a secret is held back until the next message
// tells, or until the call ends (with its result, an error, or the
// interruption, whose partial output has it).
//
// A call ends when its context does (the run was interrupted), and within
// [ServerConfig.CallTimeout]; it returns at once, whatever the server does,
// and the server is told with a notifications/cancelled (over streamable
// HTTP at protocol 2026-07-28 the end of the request is the cancellation).
//
// # Resources and prompts
//
// Beside tools, a server may offer resources (texts and files a host reads
// to give the model, named by URI, some filled in from URI templates) and
// prompts (messages the server renders from arguments). [Client.ListResources],
// [Client.ListResourceTemplates], [Client.ReadResource], [Client.ListPrompts]
// and [Client.GetPrompt] reach them on a server named by its configured
// name. They take the session id of the conversation they are for: a
// per_conversation server answers from that conversation's instance (and
// starts it when there is none), as the conversation's tool calls do; a
// shared server ignores it. They return this package's own types
// ([Resource], [ResourceContent], [Prompt], [PromptResult]), follow every
// page of a list (at most 100 pages and [MaxListItems] entries), and are
// bounded by the server's [ServerConfig.CallTimeout].
//
// A read or a rendered prompt is bounded as a whole: [MaxResourceText]
// (1 MiB) of text and [MaxResourceBlob] (4 MiB) of binary data (decoded
// from base64); beyond, it fails with [ErrTooLarge] rather than give a
// part. Every field a server sends (URIs, names, titles, descriptions,
// MIME types, texts; of resources, templates, prompts and their
// arguments, reads and rendered prompts) has the server's secrets
// redacted, like tool results, and errors never hold them. A resource or a
// prompt listed with a redacted URI or name is read or rendered by the
// URI or name as listed (the one the server listed that reads so; a filled
// template cannot be told back). A name that is no server's fails with
// [ErrUnknownServer], and a server that did not declare the resources (or
// prompts) capability in its handshake with [ErrUnsupported]. A server
// that declared no tools capability offers no tools (its tools are not
// listed).
//
// # Tasks
//
// A tool whose server may run it as a task (its execution.taskSupport is
// "optional" or "required", and the server declares task-augmented
// tools/call in its tasks capability) is called as one on a session of a
// protocol version whose base protocol has tasks (2025-11-25; the tasks
// extension of 2026-07-28 is not supported, so on such a session the call
// is an ordinary one, and a task-only tool fails). The server answers with
// a task; the client saves the task's id with the call's open-call record
// ([agent.SaveCallState]) and polls the task (tasks/get, at the interval
// the server suggests, else every second) until it ends, each new status
// message becoming a line of partial output, then reads its result
// (tasks/result), which goes to the model as a call's result does. An
// interrupted call cancels its task (tasks/cancel); a call whose run is
// suspended (its host shuts down, see [agent.ErrSuspended]) leaves the task
// running. [ServerConfig.CallTimeout] bounds the whole call, waiting
// included, and [ServerConfig.DisableTasks] makes every call an ordinary
// one.
//
// With a durable run (a Config.Store that implements memory.CallLog) a
// turn resumed after the process stopped ([agent.Agent.Resume]) finds the
// call with its task and re-attaches to it: it polls the same task and
// gets its result, and never sends the call again. A process that stops
// after sending the call but before the task's id was saved leaves a call
// without a state, which the resumed turn reports as stopped
// ([agent.CauseStopped]): the call may have run, and is not sent twice.
// Re-attaching needs a server that still knows the task and lets the new
// connection see it: a stdio server ends with the process that started it,
// and a server that binds tasks to their session (mcp-go's does, unless it
// is stateless) refuses a new session's tasks/get; the call then ends with
// the server's error, for the model to read.
//
// # Authorization
//
// A remote (http) server with an "oauth" entry ([ServerConfig.OAuth]) is
// used by each person with their own token: the client opens a connection
// per user ([Options.UserOf] names the user from a call's context), bounded
// by [Options.MaxSandboxes] and closed after [Options.SandboxIdle] like a
// per_conversation server's instances, and every request of it carries
// that user's token. The client finds the authorization server from the
// server's protected resource metadata (RFC 9728, RFC 8414), registers
// itself there once (dynamic client registration, RFC 7591) unless
// [OAuthConfig.ClientID] names a client registered beforehand, and uses
// the authorization code flow with PKCE (mcp-go's OAuth handler does the
// protocol).
//
// A call for a user without a token shows a [ConnectRequest] side card
// ([agent.ShowSide]) with the authorization URL and its host, and waits:
// for at most [Options.OAuthWait] and the call's own timeout. The state of
// the authorization and its PKCE verifier are kept in [Options.KV], so the
// authorization server's redirect to [Options.OAuthRedirectURL] may reach
// any replica sharing the store: the host passes that request's query and
// the person asking to [Client.OAuthCallback], which refuses a state that
// is unknown, used, expired or another user's, exchanges the code and
// stores the token. The waiting call, on whatever replica, sees the token
// (it reads the store every half second; a callback on its own replica
// wakes it at once) and goes on.
//
// When the server refuses a token (401), the client refreshes it with the
// refresh token and tries again, without a card; of two replicas that
// refresh at once, the first to store its token wins and the other uses
// it. When the refresh fails the person is asked to connect again. A call
// the server refuses for want of a scope (403 with error
// "insufficient_scope") shows a new card asking for the configured scopes
// and those the server named (step-up), and runs again once connected.
//
// A server that lists its tools only to authorized users is offered, until
// someone connected, as one tool, connect_<server>, whose call connects
// the person; each user's connection lists the tools, and the list is kept
// in the store for the replicas and restarts that follow. A host that
// wants the new tools offered calls [Client.Tools] or [Client.Register]
// again.
//
// Tokens, verifiers and a registered client's secret are sealed with
// AES-256-GCM under [Options.OAuthKey] before they are stored, bound to
// the key they are stored under (a value copied to another user's key does
// not open); New refuses an OAuth server without a key unless
// [Options.InsecureOAuthPlaintext] is set. No token is ever put in a log
// record, an error, a chunk or a span.
//
// # Annotations and trust
//
// A tool's annotations (readOnlyHint, destructiveHint, idempotentHint,
// openWorldHint) become its hints, agent.ToolDefinition.Hints, on every
// call's approval request and chunks. A tool is read-only, idempotent or
// open-world only when it says so, and destructive unless it says it is
// read-only or not destructive. A
// server is untrusted unless its configuration says [ServerConfig.Trusted]
// ("trusted": true in a file): its hints are shown on the approval card
// and decide nothing. The hints of a trusted server are trusted, and a host
// that opts in with approval.ReadOnlyHints runs its read-only (not open-world)
// tools (readOnlyHint true, without openWorldHint true) without asking;
// a destructive tool always asks.
//
// # Pinned tool definitions
//
// The first tool list the client reads of a server is pinned in
// [Options.KV]: each tool's description, input schema (as the model reads
// them, secrets redacted) and annotations, under the server's name; the
// first process to pin it wins, so replicas that share the store pin the
// same list, and a restart keeps it. Each user ([Options.UserOf]) runs the
// definitions pinned for them: the first list, until they approve a change.
//
// A call of a tool whose definition the server changed since (after it
// said its list changed, or on a reconnection), or of a tool the pinned list
// does not have, must be approved by a person, whatever the tool's
// SkipApproval and the host's policies say (agent.ToolCall.MustAsk); the
// approval card lists the differences (agent.ToolCall.Details: the
// description before and after, the properties of the input schema added,
// removed and changed, the annotations; for a new tool, its description,
// properties and annotations). Approving the call approves the definition
// the card was asked about, and only that one: when the call runs, that
// definition is pinned for the call's user, whose later calls run as
// before; other users are still asked. When the server changed the tool
// again while the card waited (or, for a card that showed no change, since
// it was asked), the approved call does not run (the model reads why) and
// nothing is pinned: the next call asks, showing the change. (A card shown
// before a restart of the host and decided after it is bound to the
// definition the resumed turn asks about.) A tool the server no longer
// lists is no longer offered by [Client.Tools]; its pin stays. When the
// pins cannot be read, every call asks.
//
// The model never reads a definition nobody approved: [Client.Tools] and
// the registries [Client.Register] fills offer each tool as the pin of
// everybody has it (the first list, and the changes approved by calls of a
// client without [Options.UserOf], whose users are all one). A tool the
// server changed since is offered as it was pinned, its calls checked
// against the pinned schema, until a person approves the change for
// everybody; a tool that pin does not have (one the server added since)
// is offered under its name with a description of this package's and
// open parameters, none of the server's text. So a change one user
// approved runs for that user, while the model goes on reading the
// definition everybody approved. [ServerStatus.Unapproved] names the tools
// so offered.
//
// # Protocol versions
//
// The client offers the newest protocol version it knows, 2026-07-28,
// whose handshake starts with a discovery request, and falls back to the
// initialize handshake of earlier versions when a server refuses it or does
// not answer it within a second. [ServerConfig.ProtocolVersion] pins a
// version instead; SSE servers are spoken to at 2025-11-25 unless pinned
// otherwise. When a shared server says its tool list changed, the list is
// read again, and Tools and Servers show the new one. At 2026-07-28 the
// client subscribes to these notifications while it reads the list on
// connecting; once the server acknowledged the subscription, the list is
// read once more, so that a change made in between is not missed.
// Over streamable HTTP at earlier versions the client opens no standing
// stream: a change notified outside a request is lost, and the next
// connection reads the list.
//
// # Requests for input (elicitation)
//
// The client declares the elicitation capability, in form and URL mode: a
// server may ask the user something in the middle of a call. The request
// goes to the interact.Asker of the call's context (a runner.Runner puts
// its own in every run's; a host that runs agent.Run itself sets one with
// interact.WithAsker), so it reaches the person of that call's
// conversation only. It becomes a durable form of the conversation
// (the runner's interact.Asker, Elicit): an elicitation_request side chunk beside
// the call's card, kept in the runner's store, answerable on any replica by
// the session's owner, its content checked against the requested schema
// before it is taken. The answer (accept with the content, decline, or
// cancel, which is also what a form nobody answers in time gets) goes back
// to the server:
//
//   - At protocol 2026-07-28 the request is an input_required result of
//     the call (a multi round-trip request) and the call is re-issued with
//     the answer and the server's requestState. Before the form waits, the
//     call saves with its open-call record that it waits for input
//     ([agent.SaveCallState]): when the run suspends meanwhile
//     (runner.Config.SuspendAfter, or a runner shutting down), or its process
//     dies, the resumed turn, in any process, sends the call again, the
//     server asks the same again, and the answer given meanwhile is taken
//     instead of asking anew (the protocol's re-issued request, which a
//     server written for it expects). Only such a call is sent again: a call
//     that stopped before its server asked anything is reported as stopped,
//     never sent twice.
//   - Before that version the server sends an elicitation/create request
//     of its own, which names no call: it goes to the connection's only
//     call in flight (always the case for a per_conversation server called
//     once at a time), and is declined when there is none or more than
//     one. That request lives on the connection, so its form does not
//     outlive the process; a run that suspends meanwhile answers it cancel.
//
// The request is shown with the server's secrets redacted in every field:
// the message, the URL, and in the requested schema every title,
// description, default, option and option's name and every property's
// name. An answer naming a property or choosing an option as shown goes
// back to the server as the server wrote it. A form is declined without
// being shown when it asks for what looks like a secret (a password, a
// token, a PIN, a key; see interact.ErrSecretField; the specification
// says those go through URL mode), when its schema is beyond the
// primitive properties the specification allows or two of its property
// names read the same once redacted, when a URL is not http or https,
// longer than interact.MaxURLBytes or has a host with a character a
// person cannot see, and when the run has no session, so nobody could
// answer; the call's result says why, after what the server answered,
// and the client logs it. A URL is only shown, with its host in ASCII
// (punycode): the front end opens it after the user consents. A call whose context has
// no asker declines every request for input at once: the server is told
// decline, and the call's result says that no person can answer.
package mcpclient
