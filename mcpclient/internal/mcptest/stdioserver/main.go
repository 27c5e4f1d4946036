// Command stdioserver is an MCP server on standard input and output, built
// on mcp-go, for the tests of package mcpclient. Its tools behave well or
// badly on request, and flags make the whole server misbehave, so that a
// client can be tested against each case with a real subprocess.
//
// Tests do not build it themselves: mcptest.StdioServer builds it once per
// test process and returns the command to run.
//
// # Tools
//
//   - echo {text}: a text result holding text.
//   - image: a text and a PNG image (image/png).
//   - audio: a text and a WAV sound (audio/wav).
//   - fail {message}: a result with isError set, holding message.
//   - progress {steps, delay_ms}: sends steps progress notifications
//     (progress 1..steps, total steps, message "step i of steps") with the
//     request's progress token, sleeping delay_ms after each one, then
//     answers "progress: done <steps> steps". Without a progress token it
//     sends none. Cancellation ends it at once.
//   - slow {seconds}: waits until it is cancelled, or for seconds when given
//     (0: no limit), then answers "slow: done".
//   - hang: never answers and ignores cancellation. A call in progress also
//     keeps the process alive after its standard input closes and after
//     SIGTERM: only SIGKILL ends it.
//   - crash {status}: exits the process with status (default 3) without
//     answering.
//   - spawn {seconds, block}: starts `sleep seconds` (default 300) as a child
//     in the server's process group and answers with the child's pid. With
//     block, it sends the pid as the message of a progress notification
//     ("child pid N", when the request has a progress token), writes it to
//     standard error, and then waits until it is cancelled; the child lives on
//     either way.
//   - counter: adds one to a count kept by the process and answers with it
//     ("1", "2", ...), so two processes show two counts.
//   - pid: the process id, in decimal.
//   - env {name}: the value of the environment variable name; a result with
//     isError set when it is not set.
//   - cwd: the process's working directory.
//   - resources: a text, a resource link (mcptest://notes/readme.txt), an
//     embedded text resource (mcptest://notes/hello.txt, "hello from an
//     embedded resource") and an embedded blob (mcptest://data/blob.bin).
//   - cancelled: how many calls of progress, slow and spawn saw their
//     cancellation, in decimal. Cancellation arrives as a notification, so
//     poll until the count is reached.
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
//   - huge: every tool call answers with one text result of -huge-bytes bytes
//     (default 64 MiB), so one line of stdout is that long.
//   - flood: answers its first request, then writes one endless line with no
//     newline until its standard output is closed (it then dies of SIGPIPE).
//   - silence: reads standard input until it ends and never writes anything.
//   - exit: exits with status 3 at once, writing a line to standard error.
//
// Other flags: -name sets the server's name (default "mcptest"); -page-size
// N lists tools N to a page (default 0: one page).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mark3labs/mcp-go/server"
)

func main() {
	mode := flag.String("mode", "normal", "normal, garbage-before, garbage-after, huge, flood, silence or exit")
	name := flag.String("name", "mcptest", "the server's name in its answer to initialize")
	pageSize := flag.Int("page-size", 0, "tools per page of tools/list (0: one page)")
	hugeBytes := flag.Int("huge-bytes", 64<<20, "the size of a tool result in -mode=huge")
	flag.Parse()

	switch *mode {
	case "normal", "garbage-before", "garbage-after", "huge", "flood":
	case "silence":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	case "exit":
		fmt.Fprintln(os.Stderr, "stdioserver: exiting at start (-mode=exit)")
		os.Exit(3)
	default:
		fmt.Fprintf(os.Stderr, "stdioserver: unknown -mode %q\n", *mode)
		os.Exit(2)
	}

	opts := []server.ServerOption{server.WithToolCapabilities(true), server.WithRecovery()}
	if *pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(*pageSize))
	}
	srv := server.NewMCPServer(*name, "1.0.0", opts...)
	st := &state{}
	for _, t := range st.tools() {
		if *mode == "huge" {
			t.Handler = hugeResult(*hugeBytes)
		}
		srv.AddTools(t)
	}

	var out io.Writer = os.Stdout
	switch *mode {
	case "garbage-before":
		if err := writeGarbage(os.Stdout); err != nil {
			os.Exit(1)
		}
	case "garbage-after":
		out = &afterFirstLine{w: os.Stdout, then: writeGarbage}
	case "flood":
		out = &afterFirstLine{w: os.Stdout, then: flood, atOnce: true}
	}
	var err error
	if out == io.Writer(os.Stdout) {
		err = server.ServeStdio(srv, server.WithWorkerPoolSize(workers))
	} else {
		err = serve(srv, out)
	}
	if err != nil {
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
