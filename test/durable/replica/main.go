// Command replica is one replica of a service that runs durable agent turns,
// for the tests and benchmarks of package durable (test/durable). Several
// replicas share one PostgreSQL schema (-postgres, -schema), or one SQLite
// file (-sqlite) across restarts of one replica.
//
// A replica runs an agent whose Store is the shared store, holding each
// session's lease while it drives the session's run (-holder, -lease-ttl),
// with a runner whose approvals are kept there: a decision posted to any
// replica is stored and announced to the others, which wakes the run that
// waits for it wherever it runs. A decision that no run of this replica waits
// for resumes the session here (agent.Resume), as does a sweeper that looks
// every -sweep for sessions stopped with open calls (runner.Runner.Sweep),
// such as those of a replica that was killed: another holder's lease makes
// the resume end at once with agent.ErrBusy, and the sweeper tries again
// later.
//
// The model is scripted and lives in the process (an agenttest.Server on
// 127.0.0.1): every turn plans with <need_tool>, calls one tool with
// {"key": the user's message} and, once the tool message is there, answers
// "done: " and the key. The tool is "slow" when the message starts with
// "slow", ask_user_question when it starts with "ask" (then the answer
// also echoes the tool message: "done: KEY; answers: ..."), else "effect".
// "slow" and "effect" record each execution as one line appended to the
// -effects file (O_APPEND, one write), so a test counts executions per
// key; "effect" then returns at once, "slow" writes progress every 50 ms
// and blocks until its run ends (a kill, in the tests). ask_user_question
// is interact's, asking through the runner's forms on the shared store
// (-suspend-after and -approval-timeout apply to its forms too): a form
// asked on one replica is answered on any.
//
// It prints the address it listens on as the first line of its standard
// output, and serves:
//
//	/api/...        ui/jsonapi (a front end's requests): POST /api/chat
//	                starts a turn, GET /api/events?session_id=&after= follows
//	                a session's events from a cursor (Server-Sent Events,
//	                from the store's event log: a run on any replica),
//	                GET /api/history the messages, POST /api/tool-approve a
//	                decision bound to the call (409 when the call is not the
//	                approval's), POST /api/form-answer, POST /api/interrupt
//	                (runner.Runner.Stop); the decisions and answers are the
//	                replica's holder's
//	GET  /calls     ?session=: the session's open calls (memory.OpenCall)
//	GET  /approvals ?session=: the pending approvals (memory.Approval),
//	                not the forms
//	GET  /forms     ?session=: the open forms (interact.PendingForm)
//	GET  /approval  ?id=: one approval (memory.Approval)
//	GET  /healthz   {"ok", "holder", "sweeps"}
//
// With -crash-at create-approval it kills itself with SIGKILL right after
// its store created an approval, to test what a resumed run does with it;
// with -crash-at store-calls, right after its store stored an assistant
// message with tool calls (before any of them was asked about).
//
// SIGTERM or SIGINT shuts it down: runs that wait for an approval are
// suspended (their calls stay open in the store), then it exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	addr            string
	sqlite          string
	postgres        string
	schema          string
	holder          string
	effects         string
	leaseTTL        time.Duration
	suspendAfter    time.Duration
	sweep           time.Duration
	approvalTimeout time.Duration
	crashAt         string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "address to listen on (printed on the first line of stdout)")
	fs.StringVar(&o.sqlite, "sqlite", "", "SQLite file of the store")
	fs.StringVar(&o.postgres, "postgres", "", "PostgreSQL URL of the store")
	fs.StringVar(&o.schema, "schema", pgstore.DefaultSchema, "PostgreSQL schema of the store (with -postgres)")
	fs.StringVar(&o.holder, "holder", "", "this replica's lease holder name (default: one made from the pid)")
	fs.StringVar(&o.effects, "effects", "", "file that gets one line per tool execution (required)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 0, "session lease time to live (0: the agent's default)")
	fs.DurationVar(&o.suspendAfter, "suspend-after", 0, "suspend a run that waited this long for a decision (0: never)")
	fs.DurationVar(&o.sweep, "sweep", 200*time.Millisecond, "how often to look for runs to resume (0: never)")
	fs.DurationVar(&o.approvalTimeout, "approval-timeout", 10*time.Minute, "how long a run waits for a decision before the call times out")
	fs.StringVar(&o.crashAt, "crash-at", "", `kill this process with SIGKILL at a point of a run: "create-approval" (right after the store created an approval) or "store-calls" (right after it stored an assistant message with tool calls)`)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case (o.sqlite == "") == (o.postgres == ""):
		return o, errors.New("give exactly one of -sqlite PATH and -postgres URL")
	case o.effects == "":
		return o, errors.New("-effects PATH is required")
	case o.leaseTTL < 0 || o.suspendAfter < 0 || o.sweep < 0 || o.approvalTimeout < 0:
		return o, errors.New("durations must not be negative")
	case o.crashAt != "" && o.crashAt != "create-approval" && o.crashAt != "store-calls":
		return o, fmt.Errorf("unknown -crash-at %q (want create-approval or store-calls)", o.crashAt)
	}
	if o.holder == "" {
		host, _ := os.Hostname()
		o.holder = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return o, nil
}

// store is what a replica needs of its store: a memory.Store that keeps
// open calls and approvals, carries notes between processes and grants
// leases.
type store interface {
	memory.Store
	memory.CallLog
	memory.ApprovalStore
	memory.Notifier
	memory.Leaser
	memory.EventLog
}

// openStore opens the store the options name; close closes it.
func openStore(ctx context.Context, o options) (st store, close func(), err error) {
	var ms memory.Store
	if o.sqlite != "" {
		s, err := sqlitestore.Open(ctx, o.sqlite)
		if err != nil {
			return nil, nil, err
		}
		ms, close = s, func() { _ = s.Close() }
	} else {
		s, err := pgstore.Open(ctx, o.postgres, pgstore.WithSchema(o.schema))
		if err != nil {
			return nil, nil, err
		}
		ms, close = s, s.Close
	}
	st, ok := ms.(store)
	if !ok {
		close()
		return nil, nil, fmt.Errorf("the store %T does not implement memory.CallLog, ApprovalStore, Notifier, Leaser and EventLog", ms)
	}
	return st, close, nil
}

// crashAfterCreateApproval is a store whose process dies (SIGKILL) right
// after it created an approval: before the agent records the approval's id
// in the call's record and shows the approval_required chunk.
type crashAfterCreateApproval struct{ store }

func (s crashAfterCreateApproval) CreateApproval(ctx context.Context, a memory.Approval) error {
	err := s.store.CreateApproval(ctx, a)
	if err == nil {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return err
}

// crashAfterStoreCalls is a store whose process dies (SIGKILL) right after
// it stored an assistant message with tool calls, however it was stored:
// before the run asked about any of them.
type crashAfterStoreCalls struct{ store }

func (s crashAfterStoreCalls) Append(ctx context.Context, sessionID string, msgs ...memory.Message) ([]memory.Message, error) {
	out, err := s.store.Append(ctx, sessionID, msgs...)
	crashOnCalls(out, err)
	return out, err
}

func (s crashAfterStoreCalls) AppendCalls(ctx context.Context, sessionID string, calls []memory.OpenCall, msgs ...memory.Message) ([]memory.Message, error) {
	out, err := s.store.AppendCalls(ctx, sessionID, calls, msgs...)
	crashOnCalls(out, err)
	return out, err
}

// crashOnCalls kills this process when an append stored tool calls.
func crashOnCalls(stored []memory.Message, err error) {
	if err != nil {
		return
	}
	for _, m := range stored {
		if m.Role == memory.RoleAssistant && len(m.ToolCalls) > 0 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// run is the program: it returns when ctx ends (after a clean shutdown) or
// when the server fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("holder", o.holder)

	st, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	switch o.crashAt {
	case "create-approval":
		st = crashAfterCreateApproval{st}
	case "store-calls":
		st = crashAfterStoreCalls{st}
	}
	effects, err := openEffects(o.effects, o.holder)
	if err != nil {
		return err
	}
	defer effects.close()

	model := agenttest.NewServer()
	defer model.Close()
	model.KeepRequests(0)
	model.Respond(script)

	r := newReplica(o, st, log)
	tools, err := agent.NewToolRegistry(effectTool(effects), slowTool(effects), interact.AskUserQuestion())
	if err != nil {
		return err
	}
	rn, err := runner.New(runner.Config{
		Store: st,
		Agent: agent.Config{
			BaseURL:    model.URL(),
			HTTPClient: model.Client(),
			Model:      "scripted",
			Tools:      tools,
		},
		ApprovalTimeout: o.approvalTimeout,
		FormTimeout:     o.approvalTimeout,
		SuspendAfter:    o.suspendAfter,
		// no Holder: the runner names itself; -holder labels the effects and logs
		LeaseTTL:      o.leaseTTL,
		SweepInterval: -1, // the replica's own loop sweeps, and counts
		Logger:        log,
	})
	if err != nil {
		return err
	}
	r.runner = rn

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	routes, err := r.routes()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes, ReadHeaderTimeout: 10 * time.Second}
	if _, err := fmt.Fprintln(stdout, ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		r.sweep(sweepCtx)
	}()
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case <-ctx.Done():
		err = nil
	case err = <-served:
	}
	// Runs waiting for a decision suspend (their calls stay open for a
	// replica to resume), the others are interrupted; the server then
	// waits for their handlers.
	stopSweep()
	<-swept
	rn.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
