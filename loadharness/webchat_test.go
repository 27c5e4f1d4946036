package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWebchatSmoke builds the web chat, drives it with a few browsers
// through its HTTP/SSE API against the paced server (a get_weather call to
// approve per turn) and checks that the report adds up.
func TestWebchatSmoke(t *testing.T) {
	checkLeaks(t)
	bin := filepath.Join(t.TempDir(), "webchat")
	// The web chat is built from the repository's root, as its users build
	// it: in the workspace (go.work), from the examples' module.
	build := exec.Command("go", "build", "-o", bin, "./examples/webchat")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the web chat: %v\n%s", err, out)
	}
	const n, active, turns, deltas, pace = 20, 5, 20, 10, 2 * time.Millisecond
	srv, err := startServer(os.Args[0], []string{"-test.run=^$"},
		ServerOptions{Deltas: deltas, Pace: pace, Tool: "get_weather", Args: `{"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server process: %v", err)
		}
	}()
	var stderr strings.Builder
	r, err := measureWeb(WebOptions{
		Binary: bin, ModelURL: srv.URL, N: n, Active: active, Turns: turns, Deltas: deltas, Pace: pace,
		ApprovalDelay: 20 * time.Millisecond, SessionTurns: 3, SampleEvery: 5, Timeout: 60 * time.Second,
		Stderr: &lockedWriter{b: &stderr},
	})
	if err != nil {
		t.Fatalf("measureWeb: %v (report %+v)\nweb chat stderr:\n%s", err, r, stderr.String())
	}
	if r.Connected != n || r.Turns != turns || r.Errors != 0 || r.Dropped != 0 {
		t.Fatalf("connected %d of %d, %d of %d turns, %d errors (first: %s), %d dropped", r.Connected, n, r.Turns, turns, r.Errors, r.FirstError, r.Dropped)
	}
	if r.Deltas != turns*deltas {
		t.Errorf("counted %d deltas, want %d", r.Deltas, turns*deltas)
	}
	if r.BaseRSS <= 0 || r.ConnectedRSS <= 0 || r.EndRSS <= 0 || r.PeakRSS < r.EndRSS || r.FDs < n {
		t.Errorf("base RSS %d, connected %d, end %d, peak %d, fds %d: want positive, peak ≥ end, fds ≥ %d", r.BaseRSS, r.ConnectedRSS, r.EndRSS, r.PeakRSS, r.FDs, n)
	}
	if len(r.Samples) != turns/5 {
		t.Errorf("%d RSS samples, want %d", len(r.Samples), turns/5)
	}
	if r.AddedP99Ms < r.AddedP50Ms || r.AddedMaxMs < r.AddedP99Ms {
		t.Errorf("added latency p50 %.3f ms, p99 %.3f ms, max %.3f ms: want p50 ≤ p99 ≤ max", r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs)
	}
	if r.Stamped != int(r.Deltas) || r.DelayP50Ms <= 0 || r.DelayP99Ms < r.DelayP50Ms || r.DelayMaxMs < r.DelayP99Ms {
		t.Errorf("%d deltas stamped of %d; delay p50 %.3f ms, p99 %.3f ms, max %.3f ms: want all, and 0 < p50 ≤ p99 ≤ max",
			r.Stamped, r.Deltas, r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs)
	}
}

// TestReadEvent checks the SSE reader on events as the web chat writes
// them, a comment and a line longer than the buffer.
func TestReadEvent(t *testing.T) {
	long := strings.Repeat("x", 5000)
	in := ": keep-alive\n\nevent: hello\ndata: {}\n\nid: 3\ndata: " + long + "\n\n"
	rd := bufio.NewReaderSize(strings.NewReader(in), 64)
	for _, want := range []struct{ name, data string }{{"hello", "{}"}, {"", long}} {
		name, data, err := readEvent(rd)
		if err != nil || name != want.name || string(data) != want.data {
			t.Fatalf("readEvent = %q, %.20q, %v; want %q, %.20q", name, data, err, want.name, want.data)
		}
	}
	if _, _, err := readEvent(rd); err == nil {
		t.Error("readEvent at the end gave no error")
	}
}

// TestSlope checks the slope over the second half of the samples.
func TestSlope(t *testing.T) {
	rss := func(s RSSSample) int64 { return s.RSS }
	flat := []RSSSample{{Turns: 1000, RSS: 0}, {Turns: 2000, RSS: 900}, {Turns: 3000, RSS: 100}, {Turns: 4000, RSS: 100}}
	if got := slope(flat, rss); got != 0 {
		t.Errorf("slope of flat samples = %v, want 0", got)
	}
	growing := []RSSSample{{Turns: 1000, RSS: 0}, {Turns: 2000, RSS: 0}, {Turns: 3000, RSS: 3000}, {Turns: 4000, RSS: 4000}}
	if got := slope(growing, rss); got != 1000 {
		t.Errorf("slope = %v, want 1000 bytes per 1,000 turns", got)
	}
	if got := slope(growing[:1], rss); got != 0 {
		t.Errorf("slope of one sample = %v, want 0", got)
	}
}

// lockedWriter is an io.Writer safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	b  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
