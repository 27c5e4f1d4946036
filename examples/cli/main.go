// Command cli is a terminal agent built on planround: it answers a prompt
// given as arguments, or runs an interactive prompt loop, with the demo tools
// (get_weather, get_time, run_command, show_card), ask_user_question, the
// researcher sub-agent and a terminal approver.
//
//	go run ./examples/cli "What's the weather in Paris?"
//	go run ./examples/cli -yes -json "run echo hello" | jq .
//	go run ./examples/cli -db chat.db -session work     # a conversation kept on disk
//	go run ./examples/cli -mcp mcp.json "list my notes"  # with the tools of MCP servers
//	go run ./examples/cli -skills skills -enable-skill pdf "use the pdf skill"
//	go run ./examples/cli -hooks hooks "hello"           # prompts injected at the run's checkpoints
//	go run ./examples/cli -db chat.db -log "hello"       # a line per model call, each recorded in chat.db
//	go run ./examples/cli logs -db chat.db show 1        # what the first call sent and got back
//
// With neither OPENAI_BASE_URL (-base-url) nor OPENAI_API_KEY set it runs on
// the built-in demo model, so it works on a fresh machine without a network.
//
// The human output streams the reply and shows each tool call's states on
// their own lines; -json writes every chunk as one JSON object per line
// (the SDK's wire schema) and nothing else on stdout.
//
// Ctrl-C interrupts the run (a tool call in progress is rejected, the run
// ends with "interrupted"); a second Ctrl-C exits at once. In the prompt loop
// Ctrl-C interrupts the current run and returns to the prompt; at the prompt
// it ends the loop, like Ctrl-D, "exit" and "quit".
//
// -mcp names a file of MCP servers in the format MCP clients share
// ({"mcpServers": {...}}, see package mcpclient): their tools join the demo
// tools, a demo tool keeping its name when both have one (the MCP tool is
// then offered as <server>__<tool>). A server that cannot be started is an
// error (exit status 1). With -v the servers, their state and their tools are
// listed at the start, and the MCP client logs what happens to them. A
// per_conversation server runs one instance for the -session conversation,
// or without -db for the process's one conversation. The servers, and every
// process they started, are ended when the CLI ends: at the end of its
// input, at Ctrl-C, and at SIGTERM or SIGHUP, which it then handles by ending
// the run (exit status 128 plus the signal's number).
//
// Tool calls are asked about on stderr (y approve, n reject, a always approve
// this tool for the session) unless -yes approves them all. A question shows
// what an MCP tool says about itself (its hints: read-only, destructive,
// open or closed world, "untrusted hints" unless its server's entry says
// "trusted": true) and, for a tool whose definition changed since it was
// first listed (pinned in the -db file; without one, for the process), what
// changed: such a call is always asked, even for a tool answered "always",
// and approving it pins the new definition. With -trust-hints the read-only
// (not open-world) tools of trusted servers run without a question. The
// questions and the prompt loop read the same stdin, one line at a time.
//
// The forms of ask_user_question are asked on stderr too, question by
// question: a single choice by the option's number (or its text), a multiple
// choice by numbers separated by commas (an empty line for none), a text
// question as one line; an answer that does not fit is asked again. The end
// of the input cancels the form (the model reads that nobody answered) and
// the CLI then exits with status 1; -yes does not answer forms. show_card's
// cards are drawn as boxes. The researcher is a sub-agent (agent.NewSubAgent)
// with get_weather and get_time, on the same model: its call is not asked
// about, its own calls are (each question after its call is shown, on lines
// of its own that nothing is drawn into before it is answered), and its
// output is shown indented under the call, each line starting with its
// name. -json writes all of these as the chunks they are (form_request and
// card side chunks, the sub-agent's chunks marked with agent, depth and
// parent).
//
// -skills names a folder of skills (package agent/skills): the model sees
// their descriptions right after the system prompt and reads one with
// get_skill. -enable-skill enables only the skills it names (it may be
// repeated; without it every skill is enabled). A skill whose SKILL.md is
// malformed is left out, and said on stderr. -hooks names a folder holding
// a hooks.json (package agent/hooks): its prompts are injected at the
// checkpoints of each run.
//
// With -db every model call is recorded in the file's API log
// (agent.Config.APILog; the last 1,000 calls of the past week): the request
// as sent (never the API key), the reply, tokens and timings. -log prints
// one line per call on stderr, owning the screen as a -v record does, so it
// never runs into streamed text or a question:
//
//	api #12 planning gpt-4o-mini 1,234→56 tok first 180ms total 1.2s ok
//
// Without -db it only prints (the calls numbered by the process). The logs
// subcommand reads the records of a -db file: "cli logs -db FILE [-session
// ID] [-n 20]" lists them newest first, one line each; "cli logs -db FILE
// show ID" prints one, its request indented and its reply; "cli logs -db
// FILE delete [-session ID]" deletes them. It never creates the file: a
// missing file and an unknown id are exit status 1, bad flags 2. The
// subcommand is recognised only as the first argument ("cli -- logs" sends
// the prompt "logs").
//
// # Exit status
//
//   - 0: the run finished.
//   - 1: a model, transport or store error; -skills, -hooks or -mcp cannot
//     be loaded; or a tool call was rejected, or a form cancelled, because
//     the input ended before its question was answered.
//   - 2: bad flags (an -enable-skill that names no skill of -skills
//     included).
//   - 3: a tool call was rejected (answered n), which ended the run. A
//     rejected call of the researcher's ends only the researcher's run: the
//     model reads why, and the run goes on.
//   - 130 (128 + SIGINT): Ctrl-C interrupted the run; a second Ctrl-C exits
//     at once with it too.
//   - 128 plus the signal's number (143, 129): SIGTERM or SIGHUP ended it.
//
// The prompt loop exits with 1 when one of its turns failed, else 3 when a
// rejection ended one, else 0: it goes on after either, and after Ctrl-C
// interrupted a turn; Ctrl-C at the prompt ends it like Ctrl-D.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/hooks"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/examples/tracefile"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/stream"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exit ends the process on a second Ctrl-C; a variable so that nothing in a
// test can reach os.Exit by accident.
var exit = os.Exit

// options are the parsed command line.
type options struct {
	baseURL, apiKey, model string
	system                 string
	json, yes, verbose     bool
	log                    bool // print a summary line per model call
	trustHints             bool
	sentences, parallel    bool
	maxRounds, retries     int
	db, session            string
	mcp                    string   // the MCP servers' configuration file
	skills                 string   // the folder of skills
	enable                 []string // the skills enabled; none: all of them
	hooks                  string   // the folder of hooks
	trace                  string   // the file the runs' spans are written to
	prompt                 string   // empty: the interactive loop
}

// nameList is a flag that may be given several times.
type nameList []string

func (l *nameList) String() string { return strings.Join(*l, ",") }

func (l *nameList) Set(s string) error {
	if s = strings.TrimSpace(s); s == "" {
		return errors.New("empty name")
	}
	*l = append(*l, s)
	return nil
}

// The exit statuses, as the package documentation and -h list them.
const (
	exitOK    = 0 // the run finished
	exitError = 1 // a failure, or a question the input ended before
	exitUsage = 2 // bad flags
	// exitRejected: the run ended because one of its tool calls was
	// rejected (the default of agent.Config.OnReject).
	exitRejected = 3
	// exitInterrupted: Ctrl-C interrupted the run, 128 plus SIGINT's
	// number as shells report a process that Ctrl-C ended.
	exitInterrupted = 130
)

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("cli", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: cli [flags] [prompt ...]

Answers the prompt, or with no prompt runs an interactive loop (exit, quit or
Ctrl-D ends it). Without OPENAI_BASE_URL and OPENAI_API_KEY it runs on a
built-in demo model.

The model may call get_weather, get_time, run_command, show_card (drawn as a
card), ask_user_question (its form is asked here: a choice by number, several
by numbers separated by commas, text as a line; Ctrl-D cancels it) and
researcher, a sub-agent with get_weather and get_time (its output is indented
under the call). Calls that need approval are asked here unless -yes; the
demo model calls the tools when asked for weather, time, run, card, "ask me",
form, question, research, delegate, sub-agent or skill.

With -db every model call is recorded in the file (the last %s of the past
week): what was sent, what came back, tokens and timings. Read them with
  cli logs -db FILE [-session ID] [-n 20]   one line per call, newest first
  cli logs -db FILE show ID                 one call: its request and reply
  cli logs -db FILE delete [-session ID]    delete the records
(cli logs -h says more; "cli -- logs" sends the prompt "logs").

flags:
`, thousands(apiLogRows))
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), `
exit status:
  0         the run finished
  1         an error (of the model, its connection, the -db file, -skills,
            -hooks or -mcp), or the input ended before a question was answered
  2         bad flags
  3         a tool call was rejected, which ended the run
  130       Ctrl-C interrupted the run (128 + SIGINT), or a second Ctrl-C
  143, 129  SIGTERM or SIGHUP ended it (128 + the signal's number)
The prompt loop exits with 1 when a turn failed, else 3 when a rejection
ended a turn, else 0: it goes on after either, and after Ctrl-C.
`)
	}
	fs.StringVar(&o.baseURL, "base-url", os.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible API `URL` (default $OPENAI_BASE_URL, else OpenAI's when a key is set)")
	fs.StringVar(&o.model, "model", os.Getenv("OPENAI_MODEL"), "model `name` (default $OPENAI_MODEL)")
	fs.StringVar(&o.system, "system", "", "system `prompt`")
	fs.BoolVar(&o.json, "json", false, "write every chunk as one JSON object per line on stdout, nothing else")
	fs.BoolVar(&o.yes, "yes", false, "approve every tool call without asking")
	fs.BoolVar(&o.trustHints, "trust-hints", false, "run without asking the MCP tools that say they are read-only, and not that they reach an open world, of servers configured as \"trusted\"")
	fs.BoolVar(&o.verbose, "v", false, "log the agent's model calls to stderr")
	fs.BoolVar(&o.log, "log", false, "print one line per model call on stderr: its record's id, purpose, model, tokens in→out, time to the first token, latency, ok or the error (with -db every call is also recorded in the file, -log or not: see cli logs)")
	fs.BoolVar(&o.sentences, "sentences", false, "stream text in whole sentences instead of deltas")
	fs.BoolVar(&o.parallel, "parallel", false, "run the approved tool calls of a round concurrently")
	fs.IntVar(&o.maxRounds, "max-rounds", agent.DefaultMaxToolRounds, "maximum number of tool rounds per run")
	fs.IntVar(&o.retries, "retries", 2, "retries of a failed model request (429, 5xx, connections that could not be made)")
	fs.StringVar(&o.db, "db", "", "SQLite `file` that keeps the conversation, and a record of each model call (see cli logs)")
	fs.StringVar(&o.session, "session", "", "conversation `id` in the -db file (default \"default\")")
	fs.StringVar(&o.mcp, "mcp", "", "`file` of MCP servers ({\"mcpServers\": ...}) whose tools join the demo tools")
	fs.StringVar(&o.skills, "skills", "", "`folder` of skills (folders holding a SKILL.md) the model may read with get_skill")
	fs.Var((*nameList)(&o.enable), "enable-skill", "enable the skill `name` of -skills (repeat for several; none given enables them all)")
	fs.StringVar(&o.hooks, "hooks", "", "`folder` holding a hooks.json of prompts injected at the checkpoints of each run")
	fs.StringVar(&o.trace, "trace", "", "write the OpenTelemetry spans of each run to `file`, one JSON object per line")
	if err := fs.Parse(args); err != nil {
		return o, err // the flag package has already said what is wrong
	}
	o.apiKey = os.Getenv("OPENAI_API_KEY")
	o.prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	switch {
	case o.maxRounds < 1:
		return o, usageError{"-max-rounds must be at least 1"}
	case o.retries < 0:
		return o, usageError{"-retries must not be negative"}
	case o.session != "" && o.db == "":
		return o, usageError{"-session needs -db (the file that keeps the conversation)"}
	case len(o.enable) > 0 && o.skills == "":
		return o, usageError{"-enable-skill needs -skills (the folder of skills)"}
	case o.model == "" && !o.demo():
		return o, usageError{"no model: set -model or OPENAI_MODEL"}
	}
	if o.db != "" && o.session == "" {
		o.session = "default"
	}
	return o, nil
}

// demo reports whether no model is configured, so the demo model answers.
func (o options) demo() bool { return o.baseURL == "" && o.apiKey == "" }

// cli is one invocation: the agent, the input and the output.
type cli struct {
	opts    options
	session string // the runs' session id: -session, or defaultSession
	agent   *agent.Agent
	forms   *terminalForms // the forms of ask_user_question and the MCP servers, asked on the terminal
	in      *lineSource
	out     renderer
	screen  *screen // orders the transcript and the questions on the terminal
	stderr  io.Writer
	intr    *interrupter
	history []memory.Message // the conversation when there is no store
}

// run is the whole program; main only wires it to the process. It returns
// the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (status int) {
	if len(args) > 0 && args[0] == "logs" {
		return runLogs(ctx, args[1:], stdout, stderr)
	}
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "cli: %s\n", ue.msg)
		return exitUsage
	}
	if err != nil {
		return exitUsage
	}

	cfg := agent.Config{
		BaseURL:       opts.baseURL,
		APIKey:        opts.apiKey,
		Model:         opts.model,
		SystemPrompt:  opts.system,
		MaxRetries:    cmp.Or(opts.retries, -1), // the agent's 0 means its default
		ParallelTools: opts.parallel,
		MaxToolRounds: opts.maxRounds,
	}
	if opts.sentences {
		cfg.TextMode = stream.ModeSentences
	}
	if opts.trace != "" {
		tp, stop, err := tracefile.Start(opts.trace, "planround-cli")
		if err != nil {
			fmt.Fprintf(stderr, "cli: %v\n", err)
			return exitError
		}
		// Deferred first, so it runs last: after the MCP servers ended.
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "cli: %v\n", err)
				status = max(status, exitError)
			}
		}()
		cfg.TracerProvider = tp
	}
	var out renderer
	if opts.json {
		out = newJSONRenderer(stdout)
	} else {
		tty := isTerminal(stdout)
		out = newHumanRenderer(stdout, tty && os.Getenv("NO_COLOR") == "", tty)
	}
	scr := newScreen(func() {})
	if h, ok := out.(*humanRenderer); ok {
		scr.settle = h.newline
	}
	if opts.verbose {
		// On a terminal stdout and stderr share the screen: a log line
		// must not run into a line of streamed text, nor into a question.
		logw := &logWriter{w: stderr, screen: scr}
		cfg.Logger = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	if opts.demo() {
		useDemo(&cfg)
		fmt.Fprintln(stderr, "cli: no model configured (OPENAI_BASE_URL, OPENAI_API_KEY): running on the built-in demo model")
	}
	forms := newTerminalForms()
	tools, err := hostTools(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "cli: %v\n", err)
		return exitError
	}
	var skillSet *skills.Set
	if opts.skills != "" {
		if skillSet, err = loadSkills(opts, stderr); err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				fmt.Fprintf(stderr, "cli: %s\n", ue.msg)
				return exitUsage
			}
			fmt.Fprintf(stderr, "cli: %v\n", err)
			return exitError
		}
		tools = append(tools, skillSet.Tool())
		// First, so that its block follows the system prompt.
		cfg.Layers = append([]memory.Layer{skillSet.Layer()}, cfg.Layers...)
	}
	if opts.hooks != "" {
		if cfg.Hooks, err = hooks.LoadDir(opts.hooks); err != nil {
			fmt.Fprintf(stderr, "cli: -hooks %s: %v\n", opts.hooks, err)
			return exitError
		}
	}
	if cfg.Tools, err = agent.NewToolRegistry(tools...); err != nil {
		fmt.Fprintf(stderr, "cli: %v\n", err)
		return exitError
	}
	// Delegating changes nothing: the researcher's own calls are asked.
	if err := cfg.Tools.SetSkipApproval(demo.ResearcherName, true); err != nil {
		fmt.Fprintf(stderr, "cli: %v\n", err)
		return exitError
	}

	session := opts.session
	if session == "" {
		session = defaultSession
	}
	if opts.db != "" {
		st, err := sqlitestore.Open(ctx, opts.db)
		if err != nil {
			fmt.Fprintf(stderr, "cli: %v\n", err)
			return exitError
		}
		defer st.Close() // after the MCP servers end, which pin in it
		cfg.Store = st
		// Every model call is recorded, so that cli logs can show it.
		st.SetAPILogLimits(memory.APILogLimits{MaxRows: apiLogRows})
		cfg.APILog = st
	}
	if opts.log {
		l := &callLog{w: stderr, screen: scr}
		if cfg.APILog != nil {
			l.store = cfg.APILog
		} else {
			// Nothing is kept: the lines need only the metadata.
			cfg.APILogMetadataOnly = true
		}
		cfg.APILog = l
	}

	var closeMCP func() // ends the MCP servers; nil without -mcp
	if opts.mcp != "" {
		var term *terminator
		ctx, term = terminateOn(ctx, stderr)
		defer term.stop()
		kv, _ := cfg.Store.(memory.KV) // the tool definitions pinned; nil: in memory
		mc, err := startMCP(ctx, opts.mcp, cfg.Tools, kv, cfg.Logger)
		if err != nil {
			fmt.Fprintf(stderr, "cli: %v\n", err)
			return exitStatus(term, exitError)
		}
		// Once: a second Ctrl-C during the deferred call waits for it
		// before it exits.
		closeMCP = sync.OnceFunc(func() {
			if err := mc.Close(); err != nil {
				fmt.Fprintf(stderr, "cli: ending the MCP servers: %v\n", err)
			}
		})
		defer closeMCP()
		if opts.verbose {
			// Owning the screen: the MCP client logs on stderr too, from
			// its own goroutines (a tool list read again once a server
			// acknowledged the subscription to its changes).
			scr.own(func() { printServers(stderr, mc) })
		}
		defer func() { status = exitStatus(term, status) }()
	}

	in := newLineSource(stdin)
	defer in.close()
	if opts.yes {
		cfg.Approver = approval.ApproveAll()
	} else {
		// Questions go to stderr, so stdout stays the transcript (or the
		// JSON log). The approver reads its answers from the same line
		// source as the prompt loop, only while it asks.
		cfg.Approver = approval.NewTerminalFunc(in.next, stderr)
		if opts.trustHints {
			cfg.Approver = approval.Chain(cfg.Approver, approval.ReadOnlyHints())
		}
		// A sub-agent's questions are asked by its own goroutine: each
		// after its call was drawn, on lines nothing is drawn into.
		cfg.Approver = screenApprover{approver: cfg.Approver, screen: scr}
	}

	a, err := agent.New(cfg)
	if err != nil {
		scr.own(func() { fmt.Fprintf(stderr, "cli: %v\n", err) }) // the MCP servers' logs may be written meanwhile
		return exitError
	}

	c := &cli{opts: opts, session: session, agent: a, forms: forms, in: in, out: out, screen: scr, stderr: stderr}

	// A second Ctrl-C exits at once, without the deferred clean-up: it
	// ends the MCP servers first.
	c.intr = newInterrupter(stderr, closeMCP)
	defer c.intr.stop()
	if closeMCP != nil {
		// Ended while Ctrl-C is still watched, so that a Ctrl-C meanwhile
		// cannot kill the process before the servers are gone.
		defer closeMCP()
	}

	if opts.prompt != "" {
		return c.turn(ctx, opts.prompt)
	}
	return c.loop(ctx)
}

// turn runs one user turn and returns its exit status: exitOK when the run
// finished, exitError when it failed (the error already shown on stderr),
// exitRejected when a rejected call ended it and exitInterrupted when
// Ctrl-C (or the end of ctx) did.
func (c *cli) turn(ctx context.Context, msg string) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.intr.arm(cancel, "interrupting (Ctrl-C again to exit now)")
	defer c.intr.disarm()
	if h, ok := c.out.(*humanRenderer); ok {
		h.cancelled = ctx.Err
	}

	if len(c.opts.enable) > 0 {
		ctx = skills.WithEnabled(ctx, c.opts.enable...)
	}
	// No runner drives the turn: the CLI's own asker asks the person, on
	// the terminal, for ask_user_question and the MCP servers.
	ctx = interact.WithAsker(ctx, c.forms)
	defer c.forms.cancelAll() // a form whose call never ran
	t := c.agent.NewTurn(agent.Input{SessionID: c.session, History: c.history, Message: msg})
	var (
		err     error
		unasked string      // a call rejected, or a form cancelled, because the input ended or broke
		last    agent.Chunk // the run's own last chunk, not a sub-agent's
	)
	for ch, e := range t.Run(ctx) {
		if e != nil {
			err = e
			break
		}
		if ch.Depth == 0 {
			last = ch
		}
		// The terminal approver fails (CauseApprovalFailed) only when it
		// cannot read an answer.
		if ch.Kind == agent.KindToolRejected && ch.Tool.Cause == agent.CauseApprovalFailed && unasked == "" {
			unasked = ch.Tool.Name + " was not run: the input ended before the approval question was answered (answer on stdin, or pass -yes)"
		}
		var werr error
		c.screen.draw(ch, func(ch agent.Chunk) {
			c.out.chunk(ch)
			werr = c.out.err()
		})
		if werr != nil {
			err = fmt.Errorf("writing output: %w", werr)
			break // ends the run
		}
		answered := true
		if fr, ok := ch.Side.(interact.FormRequest); ok && ch.Kind == agent.KindSide {
			// Asked here, while the run waits: the call finds the answers
			// whenever it starts to wait for them.
			c.screen.own(func() { answered = c.answerForm(ctx, fr) })
			if !answered && unasked == "" {
				unasked = "the form was not answered: the input ended before its questions were answered (answer them on stdin)"
			}
		}
		if er, ok := ch.Side.(interact.ElicitationRequest); ok && ch.Kind == agent.KindSide {
			// An MCP server's question, asked here as a form is.
			c.screen.own(func() { answered = c.answerElicitation(ctx, er) })
			if !answered && unasked == "" {
				unasked = "the MCP server's question was not answered: the input ended first (answer it on stdin)"
			}
		}
	}
	c.screen.own(c.out.endTurn)
	// Messages is valid history however the run ended; with a store the
	// agent has already saved it.
	if c.opts.db == "" {
		c.history = append(c.history, t.Messages()...)
	}
	if err == nil && unasked != "" {
		// Nobody could answer: the run did not do what was asked.
		err = errors.New(unasked)
	}
	switch {
	case err != nil:
		fmt.Fprintf(c.stderr, "cli: %s\n", describe(err))
		return exitError
	case last.Kind != agent.KindInterrupted:
		return exitOK
	case ctx.Err() != nil:
		return exitInterrupted
	}
	// Nobody pressed Ctrl-C: a rejected call ended the run, as the
	// transcript says ("stopped: the tool call was rejected").
	return exitRejected
}

// answerForm asks the questions of a form on the terminal and gives the
// answers to the form's call. When the input ends (or cannot be read) before
// every question was answered, the session's forms are cancelled, so the
// call returns at once and the model reads that nobody answered; it then
// reports false. An interrupt (ctx ended) leaves the form to the run,
// which ends its call.
func (c *cli) answerForm(ctx context.Context, fr interact.FormRequest) bool {
	answers, err := askForm(ctx, c.in.next, c.stderr, fr)
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		if !errors.Is(err, io.EOF) {
			fmt.Fprintf(c.stderr, "cli: reading the answers: %v\n", err)
		}
		c.forms.cancelAll()
		return false
	}
	open, err := c.forms.answer(fr.FormID, answers)
	switch {
	case err != nil:
		// askForm checks every answer: a form it cannot answer is not
		// left waiting.
		fmt.Fprintf(c.stderr, "cli: the answers were refused: %v\n", err)
		c.forms.cancelAll()
	case !open:
		fmt.Fprintln(c.stderr, "cli: the form is no longer open (it timed out or its run ended): the answers were not sent")
	}
	return true
}

// loop is the interactive prompt loop, which ends at exit, quit, the end of
// the input or Ctrl-C at the prompt. It returns exitError when a turn
// failed, else exitRejected when a rejected call ended a turn, else exitOK:
// the loop goes on after either, and after Ctrl-C interrupted a turn.
func (c *cli) loop(ctx context.Context) int {
	status := exitOK
	for {
		lctx, cancel := context.WithCancel(ctx)
		// Ctrl-C at the prompt leaves the loop, quietly; armed before the
		// prompt shows, so a Ctrl-C as soon as it is seen is not lost.
		c.intr.arm(cancel, "")
		fmt.Fprint(c.stderr, "› ")
		line, err := c.in.next(lctx)
		c.intr.disarm()
		cancel()
		if err != nil {
			fmt.Fprintln(c.stderr)
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(c.stderr, "cli: reading input: %v\n", err)
				return exitError
			}
			return status
		}
		switch line = strings.TrimSpace(line); line {
		case "":
			continue
		case "exit", "quit":
			return status
		}
		switch c.turn(ctx, line) {
		case exitError:
			status = exitError
		case exitRejected:
			if status == exitOK {
				status = exitRejected
			}
		}
		if ctx.Err() != nil {
			return status
		}
	}
}

// describe turns a run's error into one clear line. The agent's errors
// carry the provider's message (agent.ProviderError).
func describe(err error) string {
	return oneLine(err.Error(), 500)
}

// isTerminal reports whether w is a character device (a terminal), or a
// writer that says whether it is one (the terminal a test emulates).
func isTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ terminal() bool }); ok {
		return t.terminal()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// interrupter turns Ctrl-C into the cancellation of what is in progress: the
// run (which then ends with rejected and interrupted chunks) or the wait at
// the prompt. A second Ctrl-C before that ended exits at once.
type interrupter struct {
	sigs   chan os.Signal
	done   chan struct{}
	wg     sync.WaitGroup
	stderr io.Writer

	beforeExit func() // called before a second Ctrl-C exits; may be nil

	mu     sync.Mutex         // guards cancel, msg and hit
	cancel context.CancelFunc // what Ctrl-C cancels now; nil: nothing
	msg    string             // what a first Ctrl-C says; empty: nothing
	hit    bool               // cancel was already called
}

// newInterrupter starts watching Ctrl-C. beforeExit, when not nil, is
// called before a second Ctrl-C ends the process.
func newInterrupter(stderr io.Writer, beforeExit func()) *interrupter {
	i := &interrupter{sigs: make(chan os.Signal, 1), done: make(chan struct{}), stderr: stderr, beforeExit: beforeExit}
	signal.Notify(i.sigs, os.Interrupt)
	i.wg.Add(1)
	go i.watch()
	return i
}

func (i *interrupter) watch() {
	defer i.wg.Done()
	for {
		select {
		case <-i.sigs:
		case <-i.done:
			return
		}
		i.mu.Lock()
		cancel, msg, hit := i.cancel, i.msg, i.hit
		i.hit = true
		i.mu.Unlock()
		switch {
		case hit:
			fmt.Fprintln(i.stderr, "\ncli: interrupted again, exiting")
			if i.beforeExit != nil {
				i.beforeExit()
			}
			exit(exitInterrupted)
		case cancel != nil:
			if msg != "" {
				fmt.Fprintln(i.stderr, "\ncli: "+msg)
			}
			cancel()
		}
	}
}

// arm makes Ctrl-C call cancel, after saying msg (when not empty) on
// stderr.
func (i *interrupter) arm(cancel context.CancelFunc, msg string) {
	i.mu.Lock()
	i.cancel, i.msg, i.hit = cancel, msg, false
	i.mu.Unlock()
}

// disarm ends what arm began: a Ctrl-C now only counts as a first one.
func (i *interrupter) disarm() {
	i.mu.Lock()
	i.cancel, i.msg, i.hit = nil, "", false
	i.mu.Unlock()
}

// stop restores the default Ctrl-C behaviour and ends the watcher.
func (i *interrupter) stop() {
	signal.Stop(i.sigs)
	close(i.done)
	i.wg.Wait()
}
