// Command loadharness measures how many concurrent conversations an
// agent.Agent holds on this machine: it starts a paced scripted model
// server in another process (this binary, re-executed) and runs N
// conversations against it at once, each to its end, reporting per N the
// conversations held, heap, RSS and goroutines per conversation, CPU per
// streamed delta and the inter-chunk latency added over the server's
// pacing. See BENCHMARKS.md (Load harness).
//
//	go run ./internal/loadharness -n 1000,2000 -deltas 200 -pace 20ms
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if serving() {
		if err := serveMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run parses the flags, starts the server process and measures every N.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loadharness", flag.ContinueOnError)
	ns := fs.String("n", "1000", "comma-separated conversation counts, one measurement each")
	deltas := fs.Int("deltas", 200, "text deltas per streamed answer")
	pace := fs.Duration("pace", 20*time.Millisecond, "time between two deltas at the server")
	ramp := fs.Int("ramp", 500, "conversations waiting for their first delta at most at once (0: all)")
	timeout := fs.Duration("timeout", 2*time.Minute, "time limit per N")
	asJSON := fs.Bool("json", false, "print one JSON object per N instead of a table")
	web := addWebFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := parseCounts(*ns)
	if err != nil {
		return err
	}
	if *web.binary != "" {
		return runWeb(web, counts, *deltas, *pace, *timeout, *asJSON, out)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start the server: %w", err)
	}
	srv, err := startServer(exe, nil, ServerOptions{Deltas: *deltas, Pace: *pace})
	if err != nil {
		return err
	}
	defer srv.Close()
	if !*asJSON {
		fmt.Fprintln(out, tableHeader)
	}
	for _, n := range counts {
		r, err := measure(Options{URL: srv.URL, N: n, Deltas: *deltas, Pace: *pace, Ramp: *ramp, Timeout: *timeout})
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, tableRow(r))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseCounts parses a comma list of positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-n: %q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

const tableHeader = "N\theld\tdone\terrors\tdeltas\theap/conv\tRSS/conv\tgoroutines/conv\tCPU/delta\tadded p50\tadded p99\tadded max\twall"

func tableRow(r Report) string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%.1f KB\t%.1f KB\t%.2f\t%.1f µs\t%.3f ms\t%.3f ms\t%.1f ms\t%.1f s",
		r.N, r.Held, r.Completed, r.Errors, r.Deltas, r.HeapPerConv/1024, r.RSSPerConv/1024,
		r.GoroutinesConv, r.CPUPerDeltaNs/1000, r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs, r.WallSeconds)
}
