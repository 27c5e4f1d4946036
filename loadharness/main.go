// Command loadharness measures how many concurrent conversations an
// agent.Agent holds on this machine: it starts a paced scripted model
// server in another process (this binary, re-executed) and runs N
// conversations against it at once, each to its end, reporting per N the
// conversations held, heap, RSS and goroutines per conversation, CPU per
// streamed delta and the inter-chunk latency added over the server's
// pacing. See docs/BENCHMARKS.md (Load harness).
//
// The harness is a module of its own (loadharness/ in the repository, so
// that its plotting library stays out of the SDK's go.mod); from there:
//
//	go run . -n 1000,2000 -deltas 200 -pace 20ms
//	go run . plot -o DIR results.jsonl...
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/planround/planround/agent"
)

func main() {
	if serving() {
		if err := serveMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "plot" {
		if err := plotMain(os.Args[2:]); err != nil {
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
	client := fs.String("client", "agent", "what holds the conversations: agent; openai, bare openai-go streams (the baseline: the answer alone unless -tool is given, else the agent's three requests of a turn with a tool); openai-acc, the same with openai-go's accumulator")
	useTLS := fs.Bool("tls", false, "serve HTTPS with HTTP/2, as hosted providers do, instead of plain HTTP/1.1")
	tool := fs.Bool("tool", true, "every turn calls a tool that waits for an approval (false: planning and answer only)")
	approvalDelay := fs.Duration("approval-delay", time.Second, "each approval is answered after a random delay up to this, once all runs wait: the approvals spread over this window (0: all at once)")
	asJSON := fs.Bool("json", false, "print one JSON object per N instead of a table")
	history := fs.Int("history", 0, "give every conversation an earlier turn of about this many `bytes`, sent with every request")
	idle := fs.Int("idle-per-host", 0, "give the agent its own transport keeping this many idle connections (0: the SDK's default client)")
	connBuf := fs.Int("conn-buffers", 0, "give the agent its own transport with read and write buffers of this many `bytes` per HTTP/1.1 connection (0: net/http's 4096 in a transport of the agent's own, or the SDK's default client's 1024 when -idle-per-host is 0 too)")
	heapProfile := fs.String("heapprofile", "", "write a heap profile taken at the paused snapshot (mid-stream with -tool=false) to `file` (one N only)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measurements to `file`")
	web := addWebFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := parseCounts(*ns)
	if err != nil {
		return err
	}
	if *web.binary != "" {
		return runWeb(web, counts, *deltas, *pace, *approvalDelay, *timeout, *asJSON, out)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start the server: %w", err)
	}
	if !slices.Contains(clients, *client) {
		return fmt.Errorf("-client: %q is not agent, openai or openai-acc", *client)
	}
	toolSet := false
	fs.Visit(func(f *flag.Flag) { toolSet = toolSet || f.Name == "tool" })
	if strings.HasPrefix(*client, "openai") && !toolSet {
		*tool = false
	}
	so := ServerOptions{Deltas: *deltas, Pace: *pace, TLS: *useTLS}
	if *tool {
		so.Tool, so.Args = "get_weather", `{"city":"Oslo"}`
	}
	srv, err := startServer(exe, nil, so)
	if err != nil {
		return err
	}
	defer srv.Close()
	if srv.Client != nil {
		// Both clients use their defaults over HTTPS too (the SDK's
		// default client and openai-go's http.DefaultClient are built on
		// http.DefaultTransport): it trusts the server's certificate.
		http.DefaultTransport.(*http.Transport).TLSClientConfig = srv.Client.Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	var heapOut io.Writer
	if *heapProfile != "" {
		if len(counts) != 1 {
			return errors.New("-heapprofile: one N only")
		}
		f, err := os.Create(*heapProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		heapOut = f
		runtime.MemProfileRate = 64 // fine grained: a paused run holds a few KB
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if !*asJSON {
		fmt.Fprintln(out, tableHeader)
	}
	for _, n := range counts {
		r, err := measure(Options{URL: srv.URL, N: n, Deltas: *deltas, Pace: *pace, Ramp: *ramp, Timeout: *timeout,
			Tool: *tool, ApprovalDelay: *approvalDelay, Client: *client, Agent: withTransport(*idle, *connBuf), ServerPID: srv.cmd.Process.Pid, Server: srv, HeapProfile: heapOut, History: *history,
			Setup: setup(*idle, *connBuf)})
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, tableRow(r))
			if r.ServerConns > 0 {
				fmt.Fprintf(out, "\tserver: %d connections accepted, %d TLS handshakes\n", r.ServerConns, r.ServerHandshakes)
			}
			if r.FirstError != "" {
				fmt.Fprintf(out, "\tfirst error: %s\n", r.FirstError)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// plotMain is "loadharness plot -o DIR FILE...": the charts of the JSON
// lines (-json output) in the files.
func plotMain(args []string) error {
	fs := flag.NewFlagSet("loadharness plot", flag.ContinueOnError)
	dir := fs.String("o", ".", "`folder` to write rss.png, p99.png and delay.png into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("loadharness plot: name the results files (the JSON lines of -json)")
	}
	return writePlots(*dir, fs.Args())
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

const tableHeader = "client\tN\tpaused\theap/paused\tin-use/paused\tgoroutines/paused\theld\tdone\terrors\tdeltas\theap/conv\tin-use/conv\tstacks/conv\tRSS/conv\tRSS\tgoroutines/conv\tCPU/delta\tsys/delta\tserver CPU/delta\tadded p50\tadded p99\tadded max\tdelay p50\tdelay p99\tdelay max\tsnapshot\tdelay p99 outside it\tadded p99 outside it\tsched latency p99\tGC pause max\twall\tload"

func tableRow(r Report) string {
	client := r.Client
	if r.TLS {
		client += "+h2"
	}
	return fmt.Sprintf("%s\t%d\t%d\t%.1f KB\t%.1f KB\t%.2f\t%d\t%d\t%d\t%d\t%.1f KB\t%.1f KB\t%.1f KB\t%.1f KB\t%.0f MB\t%.2f\t%.1f µs\t%.1f µs\t%.1f µs\t%.3f ms\t%.3f ms\t%.1f ms\t%.3f ms\t%.3f ms\t%.1f ms\t%.0f ms\t%.3f ms\t%.3f ms\t%.3f ms\t%.3f ms\t%.1f s\t%.1f",
		client, r.N, r.Paused, r.PausedHeapConv/1024, r.PausedInuseConv/1024, r.PausedGoroutines, r.Held, r.Completed, r.Errors, r.Deltas,
		r.HeapPerConv/1024, r.InusePerConv/1024, r.StackPerConv/1024, r.RSSPerConv/1024, r.RSSTotal/(1<<20),
		r.GoroutinesConv, r.CPUPerDeltaNs/1000, r.SysPerDeltaNs/1000, r.ServerPerDeltaNs/1000, r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs, r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs, r.SnapshotMs, r.DelayP99OutsideMs, r.AddedP99OutsideMs, r.SchedP99Ms, r.GCPauseMaxMs, r.WallSeconds, r.LoadAvg)
}

// withTransport returns an Options.Agent that gives the agent a transport
// keeping idle idle connections per host and with buffers of buf bytes
// per connection, or nil when both are 0 (the SDK's default).
func withTransport(idle, buf int) func(*agent.Config) {
	if idle <= 0 && buf <= 0 {
		return nil
	}
	return func(c *agent.Config) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if c.HTTPClient != nil {
			tr = c.HTTPClient.Transport.(*http.Transport).Clone()
		}
		if idle > 0 {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = idle, idle
		}
		tr.ReadBufferSize, tr.WriteBufferSize = buf, buf
		c.HTTPClient = &http.Client{Transport: tr}
	}
}

// setup says what differs from the defaults in a measurement: the garbage
// collector's settings and the agent's transport.
func setup(idle, buf int) string {
	var out []string
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	if idle > 0 {
		out = append(out, "idle-per-host="+strconv.Itoa(idle))
	}
	if buf > 0 {
		out = append(out, "conn-buffers="+strconv.Itoa(buf))
	}
	return strings.Join(out, " ")
}
