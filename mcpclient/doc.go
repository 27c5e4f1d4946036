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
// definitions, results or chunks (see [ServerConfig] and [Client.Tools]).
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
// # Annotations and trust
//
// A tool's annotations (readOnlyHint, destructiveHint, idempotentHint,
// openWorldHint) become its hints, agent.ToolDefinition.Hints, on every
// call's approval request and chunks; a hint the server leaves out is the
// cautious one (destructive, open world), as MCP's defaults have it. A
// server is untrusted unless its configuration says [ServerConfig.Trusted]
// ("trusted": true in a file): its hints are shown on the approval card
// and decide nothing. The hints of a trusted server are trusted, and a host
// that opts in with approval.ReadOnlyHints runs its read-only, closed-world
// tools (readOnlyHint true, openWorldHint false) without asking; a
// destructive tool always asks.
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
// removed and changed, the annotations). A call that runs was approved:
// the tool's definition, as the server lists it then, is pinned for the
// call's user, whose later calls run as before; other users are still
// asked. A tool the server no longer lists is no longer offered by
// [Client.Tools]; its pin stays. When the pins cannot be read, every call
// asks.
//
// # Protocol versions
//
// The client offers the newest protocol version it knows, 2026-07-28,
// whose handshake starts with a discovery request, and falls back to the
// initialize handshake of earlier versions when a server refuses it or does
// not answer it within a second. [ServerConfig.ProtocolVersion] pins a
// version instead; SSE servers are spoken to at 2025-11-25 unless pinned
// otherwise. When a shared server says its tool list changed, the list is
// read again, and Tools and Servers show the new one.
package mcpclient
