// Command webchat is a web chat built on planround: a server and a browser
// page that show the whole protocol — streamed text per round, reasoning,
// tool cards with approval, live tool output, side messages, interruption —
// beside the browser's conversations (open, rename, delete, export as JSON,
// import) and a picker of skills. Tools may ask the user questions in forms,
// show cards, or hand a task to a sub-agent whose run is drawn under their
// card. The page follows the system's light or dark theme, and can read the
// replies the model flags for voice aloud (a toggle in the header, off until
// turned on).
//
//	go run ./examples/webchat                 # http://127.0.0.1:8080
//	go run ./examples/webchat -addr 127.0.0.1:9000 -db chat.db   # another SQLite file
//	go run ./examples/webchat -memory            # keeps nothing
//	go run ./examples/webchat -postgres postgres://app@db/app   # one replica of many
//	go run ./examples/webchat -mcp mcp.json      # with the tools of MCP servers
//	go run ./examples/webchat -skills skills/ -hooks hooks/
//	go run ./examples/webchat -api-log metadata   # log the calls without their content
//	WEBCHAT_TOKEN=$(openssl rand -hex 16) go run ./examples/webchat -addr :8080 -allow-remote
//
// With neither OPENAI_BASE_URL nor OPENAI_API_KEY set it runs on the
// built-in demo model, so it works on a fresh machine without a network;
// OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL select a real model. The
// tools are the demo tools (get_weather, get_time, run_command, show_card):
// run_command runs real shell commands on this machine once you approve
// them.
//
// # Conversations drawn again
//
// A conversation opened again (a reload, a switch in the sidebar, an
// import) is drawn from the store's history: each tool card in the state
// its call ended in, as its tool message says (memory.Message.Outcome and
// Cause), with the run's end as the live page showed it. A result is done;
// a call interrupted, stopped by a crash or left when the user moved on is
// invalidated (grey), its output kept; a call rejected by a person, a
// policy, a timeout or a failure is rejected (red); and a turn that a
// rejection or an interrupt ended gets its system message (run ended
// by a rejection, approval timed out, interrupted by the user). A call
// whose tool message does not say how it ended (stored by an older
// version, or imported from a version 2 export) is drawn "outcome not
// recorded", never done. An approver's edit of the arguments (POST
// /api/tool-approve with arguments) is what the history shows: the
// arguments the tool ran with.
//
// A card draws a call's arguments from the JSON text they came in (the
// event stream's, the history's), not from what JSON.parse makes of them:
// numbers as the model wrote them (12345678901234567890, 1e400, 2.50),
// every member, and a character that does not show for what it is (a bidi
// control that makes a command read as another, a zero-width or tag
// character) as its escape, marked. Messages and results show such
// characters as their code points. An import keeps only what the page
// shows, so that a person sees everything the model will read of an
// imported file: its hook injections, system messages and summaries are
// left out (the messages a summary archived come back active).
//
// # Skills, hooks, forms, cards and a sub-agent
//
// -skills names a folder of skills (folders holding a SKILL.md, see package
// agent/skills; a malformed one is skipped, and logged). The sidebar lists
// them with a tick each, kept in the browser, and each message enables the
// ticked ones: their descriptions reach the model in a system block right
// after the system prompt, their text through the get_skill tool.
//
// -hooks names a folder whose hooks.json lists prompt hooks (package
// agent/hooks) for every run. Their persistent messages are stored with the
// conversation and sent to the model in later turns, but never shown.
//
// The model may always call ask_user_question (package interact): its form
// is drawn in the call's card, a text box, radio buttons or check boxes per
// question, and the answers go back to the model. A form that nobody
// answers within -form-timeout, or whose run is interrupted, closes. Forms
// are kept in the store like approvals: a form outlives a restart, and may
// be answered on any replica. It may also call show_card, whose card the page draws as text, with an image
// from a data: URL, or from an http(s) URL once the user asks for it.
//
// And it may hand a task to "researcher", a sub-agent with get_weather and
// get_time and no planning round (demo.Researcher, built with
// agent.NewSubAgent). Its call needs no approval; its own calls do, on cards
// drawn under the researcher's card, in a block that folds, with the rest of
// its run. The demo model asks questions when asked to ("ask me a few
// questions") and delegates when asked for research.
//
// # MCP servers
//
// -mcp names a file of MCP servers in the format MCP clients share
// ({"mcpServers": {...}}, see package mcpclient). Their tools join the demo
// tools (a demo tool keeps a name both have: the MCP tool is then offered as
// <server>__<tool>) and go through the same approval cards; a tool's progress
// shows as the card's live output. The servers start with the web chat, which
// refuses to start when one cannot, and end with it (SIGINT, SIGTERM), with
// every process they started. What happens to them is logged on stderr.
//
// A per_conversation server runs one instance for each session, started on
// the session's first call. A session has no moment when it ends (its page
// may come back to it at any time, after a reload or a restart), so an
// instance ends when it has been unused for 10 minutes, or when 16 of the
// server's instances run and another session needs one.
//
// A server with an "oauth" entry is used by each browser's owner with their
// own token (see package mcpclient, "Authorization"). A call to it before
// its owner connected shows a "Connect <server>" card, with the host the
// button leads to; the authorization server sends the person back to
// /oauth/callback (-mcp-oauth-redirect, by default http://ADDR/oauth/callback),
// whose page has a button that completes the authorization for the
// browser's owner (a POST, so that a prefetch of the link does nothing, and
// carrying the owner cookie the cross-site redirect lacks), and the call
// goes on, on whatever replica it waits. The tokens are kept in the store
// (SQLite or PostgreSQL; in memory with -memory), sealed with
// -mcp-oauth-key: 64 hex digits or a file holding them, the same for every
// replica.
//
// An approval card shows what an MCP tool says about itself (its
// annotations: read-only, destructive, idempotent, open or closed world),
// marked "untrusted hints" unless the server's entry says "trusted": true.
// With -trust-hints the calls of a trusted server's read-only (not open-world)
// tools run without a card; every other call asks. The first tool list of
// each server is pinned in the store (-db, -postgres; in memory with
// -memory): a call of a tool whose definition changed since, or that the
// list did not have, always shows a card, listing what changed, and is
// never auto-approved; approving it pins the new definition for the
// session's owner (the browser), whose later calls run as before.
//
// # The log of model calls
//
// Every model call of a run (planning, tool_round, continuation, summary,
// and the researcher's, sub_agent) is kept in the store's API log (see
// memory.APILog): the request as sent, the reply, the finish reason, the
// tokens, the status and error, the time to the first token and the
// latency. The Log button under the message box opens a panel listing the
// calls of this browser's conversations, newest first, with a filter by
// conversation, a Delete button, and each call's request and reply on a
// click. -api-log metadata keeps no request or reply, -api-log off
// nothing. The API key travels in a header and is never recorded, nor are
// the MCP servers' secrets; but the messages are, as the model saw them.
// The log is bounded (10,000 calls, 7 days), and deleting a conversation
// deletes its calls. -summarize-at N has the model summarise the oldest
// half of a conversation once it holds N messages (a summary call in the
// log).
//
// # Who can use it
//
// The server listens on 127.0.0.1 unless -addr says otherwise, and it
// refuses an address that is not a loopback one unless it is given both
// -allow-remote and an access token (-token, or WEBCHAT_TOKEN in the
// environment, at least 16 characters). With a token, which may also be
// set on a loopback address (on a machine shared with other users), the
// server answers only requests that carry it: the address it prints ends in
// ?token=..., and opening it once sets a cookie; other clients send
// Authorization: Bearer <token>.
//
// Each conversation belongs to the browser that opened it: the page gets
// an owner secret in an HttpOnly, SameSite=Strict cookie, session ids begin
// with a hash of that secret, and every endpoint that names a session
// answers 401 without the cookie and 403 with another browser's. The
// session list shows a browser its own sessions only, and an import always
// becomes a new session of the importing browser. At most 32 runs are
// active at once (503 beyond; -max-runs), at most 4 of one browser (429),
// at most 1024 event streams are open at once (503 beyond; -max-streams),
// at most 16 of one browser (429), at most 8 imports are in flight at once
// (503 beyond; -max-imports), at most 2 of one browser (429), holding at
// most 128 MiB of bodies (503 beyond; -max-import-bytes), at most 32 MiB of
// one browser (429), and a request body must arrive within 10 s (408).
//
// # HTTP API
//
//	GET  /                         the page (sets the owner cookie)
//	POST /api/sessions             {} gives a new session id: {session_id}
//	GET  /api/sessions             this browser's stored sessions, most
//	                               recent first: [{id, title?, created_at,
//	                               updated_at, busy?}]
//	POST /api/sessions/rename      {session_id, title}
//	POST /api/sessions/delete      {session_id}; 409 while a run is active
//	GET  /api/sessions/export?session_id=
//	                               the session as a memory.Export document,
//	                               a download
//	POST /api/sessions/import      a session export as the body (at most
//	                               32 MiB, decoded as it arrives): a new
//	                               session of this browser, {session_id,
//	                               title, left_out_messages?,
//	                               left_out_summaries?} (what it left out:
//	                               hook injections, system messages,
//	                               summaries); 429 or 503 beyond the limits
//	                               of imports in flight
//	GET  /api/events?session_id=[&after=N]
//	                               Server-Sent Events: hello, then every chunk
//	                               (data: the chunk's JSON) between run_started
//	                               {message?, resumed?, history} and run_done
//	                               {status, reason?, cause?, error?, turn};
//	                               session_deleted when it is deleted. These
//	                               carry their number in the session's turn
//	                               log as SSE id: with after (or
//	                               Last-Event-ID) the stream first sends the
//	                               events after N, or a reload event when it
//	                               no longer has them all; without, the
//	                               pending approvals and forms
//	POST /api/chat                 {session_id, message, skills?, resources?}
//	                               starts a run: 202, 409 if busy; the first one
//	                               stores the session, titled after it. skills
//	                               names the skills the run enables (absent: all;
//	                               an unknown one: 400); resources [{server, uri}]
//	                               are MCP resources whose text is added to the
//	                               message (at most 8; 413 when too large, 502
//	                               when one cannot be read)
//	POST /api/tool-approve         {session_id, approval_id, call_id, tool,
//	                               arguments_digest, approved, reason?,
//	                               arguments?, scope?}: the call as the
//	                               approval_required chunk shows it (409 when
//	                               the approval shows another)
//	POST /api/form-answer          {session_id, form_id, answers: {id: "x" or
//	                               ["x", ...]}}: 200 {success}, success false for
//	                               a form no longer open; 400 for answers that do
//	                               not fit (the form stays open)
//	POST /api/interrupt            {session_id}; also closes its forms: 200
//	                               {success, was_active, cancelled}; an idle
//	                               session answers was_active false
//	GET  /api/history?session_id=  the stored messages (memory.Message: a tool
//	                               message with its outcome and cause), hook
//	                               messages left out, open calls with their
//	                               state and approval id;
//	                               while a run is active, up to its start
//	                               (X-Session-Running: true). X-Session-Seq:
//	                               the number of the last event included
//	GET  /api/audit?session_id=    the session's decisions, oldest first:
//	                               {you, decisions: [approval.DecisionRecord]};
//	                               you is this browser's principal, as a
//	                               decision's decision.by names it
//	GET  /api/apilog[?session_id=][&limit=]
//	                               the model calls of this browser's sessions
//	                               (of the one named), newest first, at most
//	                               limit (default 200, at most 1000), without
//	                               their request and reply: {mode, calls:
//	                               [memory.APICall], more?, sessions: [{id,
//	                               title?}]}; 404 with -api-log off
//	GET  /api/apilog/call?id=      one record in full (memory.APICall: the
//	                               request as sent, the reply); 404 for
//	                               another browser's
//	POST /api/apilog/delete        {session_id?}: deletes the session's
//	                               records, or all of this browser's
//	GET  /api/skills               the skills: [{name, description}]
//	GET  /api/mcp/servers          the MCP servers: [{name, transport,
//	                               isolation, state, tools, error?}]
//	GET  /api/mcp/resources?session_id=
//	                               the resources of the MCP servers that offer
//	                               some, for the session (a per_conversation
//	                               server lists its instance's): [{server,
//	                               resources: [{uri, name, title?,
//	                               description?, mime_type?, size}], error?}]
//	GET  /oauth/callback           an authorization server's redirect: a
//	                               page whose button POSTs it back
//	POST /oauth/callback           completes an MCP server's authorization
//	                               for the browser's owner (403 for another
//	                               owner's or a used one)
//
// POST bodies are JSON (Content-Type: application/json, 415 otherwise). A
// decision's scope "always" counts for its session only.
//
// A run's events are numbered in the session's turn log (the store's event
// log), so a page that reloads or reconnects in the middle of a run, on any
// replica, gets what it missed: the text streamed so far is not lost.
//
// # Durable turns
//
// The conversations, their waiting tool calls, approvals and forms, the
// decisions taken on them (the audit: the Audit button of the page's
// header lists a conversation's, and each decided card says who decided
// and when), and the turns' events are kept in SQLite: webchat.db in the user's data folder
// ($XDG_DATA_HOME/planround-webchat, ~/.local/share/planround-webchat, the
// application support folder on macOS; created 0700, printed at start), or
// the file -db names. -memory keeps nothing: after a restart a page's
// pending cards are stale, approving one answers success:false, and the
// page marks them all invalidated.
//
// The runner (package runner) drives the runs. SIGINT or SIGTERM suspends
// the runs that wait for a decision or a form (their pages say so, and keep
// the cards answerable) and interrupts the others; a crash or kill -9 leaves the turn
// as it was, and the next process ends it (suspended when cards wait).
// After a restart the history shows the waiting cards with their approval
// ids and open forms, and answering one resumes the turn (agent.Resume) on the page's event
// stream; a decision taken while no process ran the turn, or a call cut
// while its tool ran (reported as stopped, never run again), is resumed by
// the runner's sweeper at start-up and every -sweep-interval. A new message
// on a session whose turn waits closes its open calls first, by their state
// (an undecided one: "the user moved on"). With -suspend-after a run that
// waits longer for a decision or a form is suspended too, freeing its goroutine; the decision resumes
// it. Each run holds its session's lease (-lease-ttl: how long a dead
// process keeps it).
//
// With -postgres the process is one replica of many: conversations,
// approvals, open calls, leases and the turns' events are shared through
// PostgreSQL, a browser may reach any replica, and a replica that dies
// leaves its turns to the others (see durable.go and "Running several
// replicas" in docs/durable.md).
//
// Cross-site POSTs are refused (CSRF), and so are Host names other than
// localhost (DNS rebinding); IP addresses are fine.
//
// SIGINT or SIGTERM ends the runs as above (their pages are told) and
// stops the server.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/hooks"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/examples/tracefile"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run is the whole program; it returns the exit status. When ready is not
// nil it receives the page's URL once the server listens (for tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	fs := flag.NewFlagSet("webchat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on")
	db := fs.String("db", "", "SQLite `file` that keeps the conversations and their waiting tool calls (default: webchat.db in the user's data folder)")
	inMemory := fs.Bool("memory", false, "keep nothing: the conversations live in memory and end with the process")
	pgURL := fs.String("postgres", "", "PostgreSQL `URL` that keeps the conversations: this process is one replica of many (see docs/durable.md)")
	pgSchema := fs.String("postgres-schema", pgstore.DefaultSchema, "PostgreSQL `schema` of the tables, with -postgres")
	timeout := fs.Duration("approval-timeout", approval.DefaultTimeout, "how long a tool call waits for approval before it is rejected")
	suspendAfter := fs.Duration("suspend-after", 0, "how long a run waits for an approval or a form before it is suspended (the card stays answerable; 0: until the timeout); not with -memory")
	leaseTTL := fs.Duration("lease-ttl", runner.DefaultLeaseTTL, "how long the sessions of a process that died stay locked")
	sweep := fs.Duration("sweep-interval", DefaultSweepInterval, "how often to look for turns to resume; not with -memory")
	system := fs.String("system", "", "system `prompt`")
	allowRemote := fs.Bool("allow-remote", false, "allow an -addr that is not a loopback address (needs a token)")
	token := fs.String("token", os.Getenv("WEBCHAT_TOKEN"), "access `token` every request must carry (default $WEBCHAT_TOKEN)")
	mcpFile := fs.String("mcp", "", "`file` of MCP servers ({\"mcpServers\": ...}) whose tools join the demo tools")
	oauthKey := fs.String("mcp-oauth-key", os.Getenv("WEBCHAT_MCP_OAUTH_KEY"), "the `key` sealing the users' MCP OAuth tokens in the store: 64 hex digits, or a file holding them (default $WEBCHAT_MCP_OAUTH_KEY)")
	oauthRedirect := fs.String("mcp-oauth-redirect", "", "the `URL` of this server's /oauth/callback as the authorization servers of OAuth MCP servers send people back to (default: http://ADDR/oauth/callback)")
	trustHints := fs.Bool("trust-hints", false, "run without a card the MCP tools that say they are read-only, and not that they reach an open world, of servers configured as \"trusted\"")
	skillsDir := fs.String("skills", "", "`folder` of skills (folders holding a SKILL.md) the page's picker offers")
	hooksDir := fs.String("hooks", "", "`folder` holding a hooks.json of prompt hooks for every run")
	formTimeout := fs.Duration("form-timeout", interact.DefaultTimeout, "how long an ask_user_question form waits for the answers")
	apiLog := fs.String("api-log", string(APILogFull), "what the log of model calls (the page's Log panel) keeps: full (requests and replies), metadata (no content) or off")
	summarizeAt := fs.Int("summarize-at", 0, "summarise the oldest half of a conversation into long-term memory once it holds this many messages (0: never)")
	traceFile := fs.String("trace", "", "write the OpenTelemetry spans of each run to `file`, one JSON object per line")
	maxRuns := fs.Int("max-runs", DefaultMaxRuns, "how many runs may be active at once in the whole server (503 beyond)")
	maxStreams := fs.Int("max-streams", DefaultMaxStreams, "how many event streams (open pages) may be open at once in the whole server (503 beyond)")
	maxImports := fs.Int("max-imports", DefaultMaxImports, "how many session imports may be in flight at once in the whole server (503 beyond)")
	maxImportBytes := fs.Int64("max-import-bytes", DefaultMaxImportBytes, "how many `bytes` of session imports (their bodies) may be in flight at once in the whole server (503 beyond); at least the largest import, 32 MiB")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "webchat: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if n := btoi(*db != "") + btoi(*pgURL != "") + btoi(*inMemory); n > 1 {
		fmt.Fprintln(stderr, "webchat: -db, -postgres and -memory exclude each other")
		return 2
	}
	if *suspendAfter < 0 || *leaseTTL <= 0 || *sweep <= 0 {
		fmt.Fprintln(stderr, "webchat: -suspend-after must not be negative, -lease-ttl and -sweep-interval must be positive")
		return 2
	}
	if *maxRuns < 1 || *maxStreams < 1 || *maxImports < 1 {
		fmt.Fprintln(stderr, "webchat: -max-runs, -max-streams and -max-imports must be positive")
		return 2
	}
	apiLogMode, err := parseAPILogMode(*apiLog)
	if err != nil {
		fmt.Fprintf(stderr, "webchat: %v\n", err)
		return 2
	}
	if *summarizeAt < 0 {
		fmt.Fprintln(stderr, "webchat: -summarize-at must not be negative")
		return 2
	}
	if *maxImportBytes < DefaultMaxImportSize {
		fmt.Fprintf(stderr, "webchat: -max-import-bytes must be at least %d, the largest import\n", DefaultMaxImportSize)
		return 2
	}

	if err := checkExposure(*addr, *allowRemote, *token); err != nil {
		fmt.Fprintf(stderr, "webchat: %v\n", err)
		return 2
	}

	o := Options{
		Token:           *token,
		BaseURL:         os.Getenv("OPENAI_BASE_URL"),
		APIKey:          os.Getenv("OPENAI_API_KEY"),
		Model:           os.Getenv("OPENAI_MODEL"),
		Tools:           demo.Tools(),
		ApprovalTimeout: *timeout,
		FormTimeout:     *formTimeout,
		SystemPrompt:    *system,
		SummarizeAt:     *summarizeAt,
		APILog:          apiLogMode,
		Researcher:      true,
		TrustHints:      *trustHints,
		SuspendAfter:    *suspendAfter,
		Holder:          "webchat-" + randomID(),
		LeaseTTL:        *leaseTTL,
		SweepInterval:   *sweep,
		MaxRuns:         *maxRuns,
		MaxStreams:      *maxStreams,
		MaxImports:      *maxImports,
		MaxImportBytes:  *maxImportBytes,
		Logger:          slog.New(slog.NewTextHandler(stderr, nil)),
	}
	if *traceFile != "" {
		tp, stop, err := tracefile.Start(*traceFile, "planround-webchat")
		if err != nil {
			fmt.Fprintf(stderr, "webchat: %v\n", err)
			return 1
		}
		// Deferred first, so it runs last: after the runs have ended.
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "webchat: %v\n", err)
			}
		}()
		o.TracerProvider = tp
	}
	if *skillsDir != "" {
		logger := slog.New(slog.NewTextHandler(stderr, nil))
		set, err := skills.LoadDir(*skillsDir, skills.WithLogger(logger))
		if err != nil {
			fmt.Fprintf(stderr, "webchat: -skills %s: %v\n", *skillsDir, err)
			return 1
		}
		fmt.Fprintf(stderr, "webchat: %d skills from %s (%d skipped)\n", len(set.Skills()), *skillsDir, len(set.Skipped()))
		o.Skills = set
	}
	if *hooksDir != "" {
		hs, err := hooks.LoadDir(*hooksDir)
		if err != nil {
			fmt.Fprintf(stderr, "webchat: -hooks %s: %v\n", *hooksDir, err)
			return 1
		}
		o.Hooks = hs
	}
	if o.BaseURL == "" && o.APIKey == "" {
		// The demo model answers in process: no network, no listening port.
		o.BaseURL, o.HTTPClient = demo.BaseURL, demo.Model{Delay: demo.DefaultDelay}.Client()
		o.Model, o.ModelLabel = demo.ModelName, "built-in demo model"
		fmt.Fprintln(stderr, "webchat: no model configured (OPENAI_BASE_URL, OPENAI_API_KEY): running on the built-in demo model")
	} else if o.Model == "" {
		fmt.Fprintln(stderr, "webchat: no model: set OPENAI_MODEL")
		return 2
	} else {
		// Up to -max-runs runs send their rounds' requests at once: keep
		// as many idle connections to the provider, so that a round
		// reuses the one the last round left instead of dialing (Go's
		// default keeps 2 per host), and share an HTTP/2 provider's
		// connections when many runs resume at once, as the SDK's
		// default client does.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = *maxRuns, *maxRuns
		client := &http.Client{Transport: agent.NewPooledTransport(tr)}
		defer client.CloseIdleConnections()
		o.HTTPClient = client
	}
	if *db == "" && *pgURL == "" && !*inMemory {
		path, err := sqlitestore.UserDataPath("planround-webchat", "webchat.db")
		if err != nil {
			fmt.Fprintf(stderr, "webchat: no folder for the conversations (%v): pass -db FILE, or -memory to keep nothing\n", err)
			return 1
		}
		*db = path
		fmt.Fprintf(stderr, "webchat: keeping the conversations in %s (-db FILE picks another file, -memory keeps nothing)\n", *db)
	}
	if *db != "" {
		st, err := sqlitestore.Open(ctx, *db)
		if err != nil {
			fmt.Fprintf(stderr, "webchat: %v\n", err)
			return 1
		}
		defer st.Close()
		o.Store = st
	}
	if *pgURL != "" {
		st, err := pgstore.Open(ctx, *pgURL, pgstore.WithSchema(*pgSchema))
		if err != nil {
			fmt.Fprintf(stderr, "webchat: -postgres: %v\n", err)
			return 1
		}
		defer st.Close()
		o.Store = st
		fmt.Fprintf(stderr, "webchat: on PostgreSQL (schema %s) as replica %s\n", *pgSchema, o.Holder)
	}
	if *mcpFile != "" {
		// The MCP servers' requests for input are forms of the page, as
		// ask_user_question's: the runner's, found in each run's context.
		redirect := *oauthRedirect
		if redirect == "" {
			redirect = "http://" + *addr + "/oauth/callback"
		}
		key, err := readOAuthKey(*oauthKey)
		if err != nil {
			fmt.Fprintf(stderr, "webchat: -mcp-oauth-key: %v\n", err)
			return 2
		}
		mopts := mcpclient.Options{UserOf: mcpUser, OAuthKey: key, OAuthRedirectURL: redirect}
		if kv, ok := o.Store.(memory.KV); ok {
			mopts.KV = kv
		}
		mc, err := startMCP(ctx, *mcpFile, mopts, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "webchat: %v\n", err)
			return 1
		}
		// After srv.Close below: the runs have ended.
		defer func() {
			if err := mc.Close(); err != nil {
				fmt.Fprintf(stderr, "webchat: ending the MCP servers: %v\n", err)
			}
		}()
		o.MCP = mc
	}

	srv, err := NewServer(o)
	if err != nil {
		fmt.Fprintf(stderr, "webchat: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "webchat: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	url := "http://" + ln.Addr().String() + "/"
	if *token != "" {
		url += "?token=" + neturl.QueryEscape(*token)
	}
	fmt.Fprintf(stdout, "webchat: listening on %s\n", url)
	if ready != nil {
		ready <- url
	}

	status := 0
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "webchat: shutting down")
	case err := <-served:
		fmt.Fprintf(stderr, "webchat: %v\n", err)
		status = 1
	}
	// Runs first: they end with interrupted and their pages hear it; then
	// the event streams close and the HTTP server can drain.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if status == 0 {
		<-served // http.ErrServerClosed
	}
	return status
}

// minTokenLen is the shortest access token the server accepts.
const minTokenLen = 16

// checkExposure refuses to serve others by accident: an address that is
// not a loopback one (":8080", "0.0.0.0:8080", a LAN address, a host name
// that resolves to one) needs -allow-remote and a token.
func checkExposure(addr string, allowRemote bool, token string) error {
	if token != "" && len(token) < minTokenLen {
		return fmt.Errorf("the access token must have at least %d characters", minTokenLen)
	}
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return err
	}
	if tcp.IP != nil && tcp.IP.IsLoopback() {
		return nil
	}
	switch {
	case !allowRemote:
		return fmt.Errorf("%s is not a loopback address: anyone who reaches it could run commands on this machine; pass -allow-remote and a token (-token or WEBCHAT_TOKEN) to serve it anyway", addr)
	case token == "":
		return fmt.Errorf("-allow-remote needs an access token: -token or WEBCHAT_TOKEN, at least %d characters", minTokenLen)
	}
	return nil
}

// startMCP starts the MCP servers of the configuration file at path; their
// client logs to stderr (its requests for input are forms when opts has
// Forms). ctx ending abandons the start.
func startMCP(ctx context.Context, path string, opts mcpclient.Options, stderr io.Writer) (*mcpclient.Client, error) {
	servers, err := mcpclient.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("-mcp %s: %w", path, err)
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	mc, err := mcpclient.New(ctx, servers, opts)
	if err != nil {
		return nil, fmt.Errorf("-mcp %s: %w", path, err)
	}
	return mc, nil
}

// readOAuthKey reads -mcp-oauth-key: 64 hex digits, or the name of a file
// holding them. Empty gives no key (New refuses OAuth servers then).
func readOAuthKey(v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	text := v
	if _, err := hex.DecodeString(v); err != nil || len(v) != 64 {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, errors.New("neither 64 hex digits nor a readable file")
		}
		text = strings.TrimSpace(string(b))
	}
	key, err := hex.DecodeString(text)
	if err != nil || len(key) != 32 {
		return nil, errors.New("the key must be 64 hex digits (32 bytes)")
	}
	return key, nil
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
