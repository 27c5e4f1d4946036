// Command stdioserver is an MCP server on standard input and output, built
// on mcp-go, for the tests of package mcpclient. Its tools (those of package
// testserver, whose documentation lists them) behave well or badly on
// request, and flags make the whole server misbehave, so that a client can be
// tested against each case with a real subprocess.
//
// Tests do not build it themselves: mcptest.StdioServer builds it once per
// test process and returns the command to run.
//
// In this server the crash tool exits the process with its status, flood
// writes one line without end to standard output (until writing fails), and
// freeze stops the process with SIGSTOP.
//
// # Modes
//
// The -mode flag makes the whole server misbehave:
//
//   - normal: the default.
//   - garbage-before: writes lines that are not JSON-RPC messages (text, a
//     JSON array, a JSON object, a response to a request nobody sent, half a
//     JSON object) before anything else, then serves normally.
//   - garbage-after: serves normally, but writes the same lines before every
//     message after its first answer (the answer to initialize or
//     server/discover).
//   - garbage: writes those lines over and over, one a millisecond, and
//     never answers.
//   - huge: every tool call answers with one text result of -huge-bytes bytes
//     (default 64 MiB), so one line of stdout is that long.
//   - flood: answers its first request, then writes one endless line with no
//     newline until its standard output is closed (it then dies of SIGPIPE).
//   - silence: reads standard input until it ends and never writes anything.
//   - exit: exits with status 3 at once, after writing to standard error a
//     line too long for a log (10,000 bytes) and then its reason.
//   - legacy: a server of protocol 2025-11-25 written by hand that ignores
//     requests it does not know (server/discover among them) instead of
//     refusing them, as some servers do. Its tools are hello (answers "hi
//     from legacy") and ignored (the methods of the requests it ignored so
//     far, in order, separated by commas, or "none").
//   - content: the server of testserver.NewContent, with resources, a
//     resource template and prompts and no tools (-page-size applies to
//     its lists).
//
// # Other flags
//
//   - -name sets the server's name (default "mcptest").
//   - -page-size N lists tools N to a page (default 0: one page).
//   - -elicit adds the tools of testserver.ElicitationTools, which ask the
//     user for input.
//   - -stubborn makes the process ignore SIGTERM and SIGINT and stay after its
//     standard input ends, so that only SIGKILL ends it.
//   - -first-normal FILE makes the server normal on its first start: a start
//     that finds no FILE creates it and ignores -mode; later starts with the
//     same FILE take -mode. So a server works when a client first starts it,
//     and misbehaves when it is started again (after a crash, or as a
//     conversation's own instance after a probe).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

func main() {
	mode := flag.String("mode", "normal", "normal, garbage-before, garbage-after, garbage, huge, flood, silence, exit, legacy or content")
	name := flag.String("name", "mcptest", "the server's name in its answer to initialize")
	pageSize := flag.Int("page-size", 0, "tools per page of tools/list (0: one page)")
	hugeBytes := flag.Int("huge-bytes", 64<<20, "the size of a tool result in -mode=huge")
	stubborn := flag.Bool("stubborn", false, "ignore SIGTERM and SIGINT, and stay after standard input ends")
	trust := flag.Bool("trust", false, "add the tools of the trust tests (lookup, wipe, redefine)")
	firstNormal := flag.String("first-normal", "", "serve normally on the first start, which creates this file")
	tasks := flag.Bool("tasks", false, "add the job tool, run as a task (MCP 2025-11-25)")
	elicit := flag.Bool("elicit", false, "declare elicitation and add the tools of testserver.ElicitationTools")
	flag.Parse()

	if *stubborn {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		defer linger()
	}
	if *firstNormal != "" {
		f, err := os.OpenFile(*firstNormal, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		switch {
		case err == nil:
			f.Close()
			*mode = "normal"
		case !errors.Is(err, os.ErrExist):
			fmt.Fprintf(os.Stderr, "stdioserver: -first-normal: %v\n", err)
			os.Exit(2)
		}
	}

	switch *mode {
	case "normal", "garbage-before", "garbage-after", "huge", "flood", "content":
	case "garbage":
		for {
			if err := writeGarbage(os.Stdout); err != nil {
				os.Exit(1)
			}
			time.Sleep(time.Millisecond)
		}
	case "silence":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	case "exit":
		fmt.Fprintln(os.Stderr, strings.Repeat("x", 10_000))
		fmt.Fprintln(os.Stderr, "stdioserver: exiting at start (-mode=exit)")
		os.Exit(3)
	case "legacy":
		legacy(os.Stdin, os.Stdout)
		return
	default:
		fmt.Fprintf(os.Stderr, "stdioserver: unknown -mode %q\n", *mode)
		os.Exit(2)
	}

	var out io.Writer = os.Stdout
	switch *mode {
	case "garbage-after":
		out = &afterFirstLine{w: os.Stdout, then: writeGarbage}
	case "flood":
		out = &afterFirstLine{w: os.Stdout, then: flood, atOnce: true}
	}
	o := testserver.Options{
		Name:     *name,
		PageSize: *pageSize,
		Trust:    *trust,
		Crash: func(status int) {
			fmt.Fprintf(os.Stderr, "stdioserver: crash: exiting with status %d\n", status)
			os.Exit(status)
		},
		Flood:  func() { _ = flood(out) },
		Freeze: freeze,
		Stderr: os.Stderr,
	}
	if *mode == "huge" {
		o.HugeBytes = *hugeBytes
	}
	if *tasks {
		o.Tasks = &testserver.TaskOptions{}
	}
	o.Elicit = *elicit
	srv := testserver.New(o)
	if *mode == "content" {
		srv = testserver.NewContent(testserver.ContentOptions{PageSize: *pageSize})
	}
	if *mode == "garbage-before" {
		if err := writeGarbage(os.Stdout); err != nil {
			os.Exit(1)
		}
	}
	var err error
	if out == io.Writer(os.Stdout) {
		err = server.ServeStdio(srv, server.WithWorkerPoolSize(workers))
	} else {
		err = serve(srv, out)
	}
	if err != nil && !*stubborn {
		fmt.Fprintf(os.Stderr, "stdioserver: %v\n", err)
		os.Exit(1)
	}
}

// workers is how many tool calls run at once (mcp-go's default is 5), so
// that a test can keep many calls, hung ones included, in flight.
const workers = 64

// serve is server.ServeStdio writing to out instead of os.Stdout: it serves
// until standard input ends, SIGTERM or SIGINT.
func serve(srv *server.MCPServer, out io.Writer) error {
	s := server.NewStdioServer(srv)
	server.WithWorkerPoolSize(workers)(s)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return s.Listen(ctx, os.Stdin, out)
}

// linger keeps a -stubborn server's process alive until it is killed.
func linger() {
	for { // a sleeping goroutine, so the runtime never calls this a deadlock
		time.Sleep(time.Hour)
	}
}
