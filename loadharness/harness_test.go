package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/agent"
)

// TestMain makes the test binary the paced server when it is re-executed
// with serveEnv set, as the command does with its own binary.
func TestMain(m *testing.M) {
	if serving() {
		if err := serveMain(os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHarnessSmoke runs small measurements against the server in a child
// process, in each mode, and checks that the reports add up.
func TestHarnessSmoke(t *testing.T) {
	checkLeaks(t)
	const n, deltas, pace = 20, 20, 25 * time.Millisecond // the second half of an answer (250 ms) outlasts a loaded machine's lateness in taking the mid-stream snapshot
	for _, c := range []struct {
		name   string
		client string
		tool   bool
		tls    bool
		pooled bool // the agent's transport is wrapped with agent.NewPooledTransport
	}{
		{"agent with a tool call", "agent", true, false, false},
		{"agent over HTTP/2", "agent", false, true, false},
		{"agent with a tool call over HTTP/2", "agent", true, true, true},
		{"openai-go", "openai", false, false, false},
		{"openai-go with its accumulator over HTTP/2", "openai-acc", false, true, false},
		{"openai-go with a tool call over HTTP/2", "openai", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			so := ServerOptions{Deltas: deltas, Pace: pace, TLS: c.tls}
			if c.tool {
				so.Tool, so.Args = "get_weather", `{"city":"Oslo"}`
			}
			srv, err := startServer(os.Args[0], []string{"-test.run=^$"}, so)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Close(); err != nil {
					t.Errorf("server process: %v", err)
				}
			}()
			if c.tls != (srv.Client != nil) || c.tls != strings.HasPrefix(srv.URL, "https://") {
				t.Fatalf("TLS %v: server at %s, client %v", c.tls, srv.URL, srv.Client)
			}
			var pool func(*agent.Config)
			if c.pooled {
				pool = func(cfg *agent.Config) {
					cfg.HTTPClient = &http.Client{Transport: agent.NewPooledTransport(srv.Client.Transport.(*http.Transport).Clone())}
				}
			}
			r, err := measure(Options{URL: srv.URL, N: n, Deltas: deltas, Pace: pace, Timeout: 30 * time.Second,
				Client: c.client, Tool: c.tool, ApprovalDelay: 20 * time.Millisecond, HTTPClient: srv.Client,
				ServerPID: srv.cmd.Process.Pid, Server: srv, Agent: pool})
			if err != nil {
				t.Fatalf("measure: %v (report %+v)", err, r)
			}
			if r.Completed != n || r.Errors != 0 {
				t.Fatalf("completed %d of %d runs, %d errors (first: %s)", r.Completed, n, r.Errors, r.FirstError)
			}
			if r.Deltas != n*deltas {
				t.Errorf("counted %d deltas, want %d", r.Deltas, n*deltas)
			}
			if r.Client != c.client || r.TLS != c.tls || r.Tool != c.tool {
				t.Errorf("report says client %q, TLS %v, tool %v", r.Client, r.TLS, r.Tool)
			}
			if r.Held < 1 || r.Held > n || r.MaxHeld < r.Held || r.MaxHeld > n {
				t.Errorf("held %d at the snapshot, %d at most, want between 1 and %d", r.Held, r.MaxHeld, n)
			}
			if r.HeapPerConv <= 0 || r.GoroutinesConv <= 0 || r.CPUPerDeltaNs <= 0 || r.RSSTotal <= 0 {
				t.Errorf("heap %.0f B, goroutines %.2f, CPU %.0f ns per delta, RSS %.0f B: want all positive",
					r.HeapPerConv, r.GoroutinesConv, r.CPUPerDeltaNs, r.RSSTotal)
			}
			if r.SysPerDeltaNs < 0 || r.SysPerDeltaNs > r.CPUPerDeltaNs || r.ServerPerDeltaNs < 0 {
				t.Errorf("sys %.0f ns of %.0f ns per delta, server %.0f ns", r.SysPerDeltaNs, r.CPUPerDeltaNs, r.ServerPerDeltaNs)
			}
			// Every run waits for its approval before the paused snapshot:
			// none can go on until the harness answers.
			if c.tool && (r.Paused != n || r.PausedHeapConv <= 0 || r.PausedGoroutines <= 0) {
				t.Errorf("paused %d of %d runs, %.0f B and %.2f goroutines each", r.Paused, n, r.PausedHeapConv, r.PausedGoroutines)
			}
			if !c.tool && r.Paused != 0 {
				t.Errorf("paused %d runs without a tool call", r.Paused)
			}
			// The gaps are sorted into the percentiles. (A negative gap, two
			// deltas read at once, is not an error: a loaded machine reads
			// late and then in pairs.)
			if r.AddedP99Ms < r.AddedP50Ms || r.AddedMaxMs < r.AddedP99Ms {
				t.Errorf("added latency p50 %.3f ms, p99 %.3f ms, max %.3f ms: want p50 ≤ p99 ≤ max", r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs)
			}
			// Every delta carries the time the server wrote it, and reaches
			// the client after that.
			if r.Stamped != n*deltas || r.DelayP50Ms <= 0 || r.DelayP99Ms < r.DelayP50Ms || r.DelayMaxMs < r.DelayP99Ms {
				t.Errorf("%d deltas stamped of %d; delay p50 %.3f ms, p99 %.3f ms, max %.3f ms: want all, and 0 < p50 ≤ p99 ≤ max",
					r.Stamped, n*deltas, r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs)
			}
			if r.SnapshotMs <= 0 || r.DelayP99OutsideMs <= 0 || r.DelayP99OutsideMs > r.DelayMaxMs {
				t.Errorf("mid-stream snapshot %.3f ms, delay p99 outside it %.3f ms (max %.3f ms): want a snapshot, and a p99 within the delays",
					r.SnapshotMs, r.DelayP99OutsideMs, r.DelayMaxMs)
			}
			// The server counts the connections and handshakes: over
			// HTTP/1.1 the 20 runs need connections of their own; over
			// HTTP/2 they may share the one the harness's first question
			// opened, except with the pool, which makes its own: at most
			// 4 at once, and the 20 runs need one.
			if !c.tls && (r.ServerConns < 1 || r.ServerHandshakes != 0) || c.tls && r.ServerHandshakes != r.ServerConns ||
				c.pooled && (r.ServerConns < 1 || r.ServerConns > 4+1) {
				t.Errorf("the server accepted %d connections and began %d TLS handshakes", r.ServerConns, r.ServerHandshakes)
			}
			if r.AddedP99OutsideMs > r.AddedMaxMs {
				t.Errorf("added p99 outside the snapshot %.3f ms, above the added max %.3f ms", r.AddedP99OutsideMs, r.AddedMaxMs)
			}
		})
	}
}

// TestRunBadFlags checks that run refuses bad flags before it starts
// anything.
func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "0"},
		{"-client", "nope", "-n", "1"},
		{"-nope"},
	} {
		var out strings.Builder
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) gave no error", args)
		}
	}
}

// TestPlots writes the charts of a results file with agent and web chat
// lines and checks that both are PNG images of the chosen size.
func TestPlots(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "r.jsonl")
	lines := `{"n":1000,"client":"agent","tls":false,"tool":true,"rss_b":104857600,"added_p99_ms":5.5,"pace_ms":20}
{"n":2000,"client":"agent","tls":false,"tool":true,"rss_b":209715200,"added_p99_ms":0,"delay_p99_ms":2.5,"pace_ms":20}
{"n":1000,"client":"openai","tls":true,"tool":false,"rss_b":157286400,"added_p99_ms":80,"pace_ms":20}

{"n":1000,"active":200,"store":"memory","connected":1000,"connected_rss_b":52428800,"peak_rss_b":157286400,"added_p99_ms":3}
`
	if err := os.WriteFile(results, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	pts, err := readPoints(strings.NewReader(lines))
	if err != nil || len(pts) != 5 || len(seriesOf(pts)) != 4 {
		t.Fatalf("readPoints = %d points in %d series, %v; want 5 in 4", len(pts), len(seriesOf(pts)), err)
	}
	if err := plotMain([]string{"-o", dir, results}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rss.png", "p99.png", "delay.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
			t.Errorf("%s is %v, want a chart-sized image", name, b)
		}
	}
	// Results from before the delay was measured: no delay chart.
	old := t.TempDir()
	noDelay := filepath.Join(old, "r.jsonl")
	if err := os.WriteFile(noDelay, []byte(strings.ReplaceAll(lines, `"delay_p99_ms":2.5,`, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := plotMain([]string{"-o", old, noDelay}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(old, "delay.png")); !os.IsNotExist(err) {
		t.Errorf("delay.png without a delay in the results: %v", err)
	}
	for _, bad := range []string{"{", `{"n":1}`, `{"client":"agent"}`, `{"connected":1}`} {
		if _, err := readPoints(strings.NewReader(bad)); err == nil {
			t.Errorf("readPoints(%q) gave no error", bad)
		}
	}
	if err := plotMain([]string{"-o", dir}); err == nil {
		t.Error("plot without results files gave no error")
	}
}

// TestParseCounts checks the -n flag's parsing.
func TestParseCounts(t *testing.T) {
	got, err := parseCounts("100, 1000,2000")
	if err != nil || len(got) != 3 || got[0] != 100 || got[2] != 2000 {
		t.Errorf("parseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "10,-1"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) gave no error", bad)
		}
	}
}

// TestStamps checks that the write time a delta's frame carries is read
// back from its text, from the frame and from a web chat chunk, and that
// text which is not a stamp is passed over.
func TestStamps(t *testing.T) {
	at := time.Unix(1764633600, 123456789)
	frame := appendDelta(nil, at)
	var chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(bytes.TrimPrefix(frame, []byte("data: "))), &chunk); err != nil || len(chunk.Choices) != 1 {
		t.Fatalf("the frame %q is not a chunk with one choice: %v", frame, err)
	}
	text := chunk.Choices[0].Delta.Content
	for _, in := range []string{text, `{"kind":"text","round":2,"text":"` + text + `"}`} {
		var got []int64
		stamps(in, func(v int64) { got = append(got, v) })
		if len(got) != 1 || got[0] != at.UnixNano() {
			t.Errorf("stamps(%q) = %v, want [%d]", in, got, at.UnixNano())
		}
	}
	for in, want := range map[string]int{"": 0, "t": 0, "tok ": 0, "t123456789012345 ": 0, "text t": 0, "t1234567890123456 t1234567890123456": 2, "t12345678901234567890123": 1} {
		var got []int64
		stamps([]byte(in), func(v int64) { got = append(got, v) })
		if len(got) != want {
			t.Errorf("stamps(%q) = %v, want %d stamps", in, got, want)
		}
	}
}

// TestHistQuantile checks the quantiles read from the difference of two
// runtime histograms.
func TestHistQuantile(t *testing.T) {
	buckets := []float64{0, 1, 2, 4, math.Inf(1)}
	before := &metrics.Float64Histogram{Counts: []uint64{5, 0, 0, 0}, Buckets: buckets}
	after := &metrics.Float64Histogram{Counts: []uint64{5 + 90, 9, 0, 1}, Buckets: buckets}
	for _, tc := range []struct{ q, want float64 }{{0.5, 1}, {0.9, 1}, {0.99, 2}, {1, 4}} {
		if got := histQuantile(before, after, tc.q); got != tc.want {
			t.Errorf("q %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := histQuantile(after, after, 0.99); got != 0 {
		t.Errorf("nothing counted: %v, want 0", got)
	}
	if got := histQuantile(nil, after, 0.99); got != 0 {
		t.Errorf("no histogram: %v, want 0", got)
	}
	if rt := readRuntimeHists(); rt.sched == nil || rt.pauses == nil {
		t.Errorf("runtime histograms %+v: want both", rt)
	}
}
