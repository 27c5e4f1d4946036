package main

import (
	"os"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
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

// TestHarnessSmoke runs one small measurement against the server in a
// child process and checks that the report adds up.
func TestHarnessSmoke(t *testing.T) {
	leaktest.Check(t)
	const n, deltas, pace = 20, 20, 5 * time.Millisecond
	srv, err := startServer(os.Args[0], []string{"-test.run=^$"}, ServerOptions{Deltas: deltas, Pace: pace})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server process: %v", err)
		}
	}()
	r, err := measure(Options{URL: srv.URL, N: n, Deltas: deltas, Pace: pace, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("measure: %v (report %+v)", err, r)
	}
	if r.Completed != n || r.Errors != 0 {
		t.Fatalf("completed %d of %d runs, %d errors (first: %s)", r.Completed, n, r.Errors, r.FirstError)
	}
	if r.Deltas != n*deltas {
		t.Errorf("counted %d deltas, want %d", r.Deltas, n*deltas)
	}
	if r.Held < 1 || r.Held > n || r.MaxHeld < r.Held || r.MaxHeld > n {
		t.Errorf("held %d at the snapshot, %d at most, want between 1 and %d", r.Held, r.MaxHeld, n)
	}
	if r.HeapPerConv <= 0 || r.GoroutinesConv <= 0 || r.CPUPerDeltaNs <= 0 {
		t.Errorf("heap %.0f B, goroutines %.2f, CPU %.0f ns per delta: want all positive", r.HeapPerConv, r.GoroutinesConv, r.CPUPerDeltaNs)
	}
	// The server waits at least pace between two deltas, so a gap shorter
	// than pace (a negative added latency) is two deltas read at once;
	// the median must not be one.
	if r.AddedP50Ms < 0 || r.AddedP99Ms < r.AddedP50Ms || r.AddedMaxMs < r.AddedP99Ms {
		t.Errorf("added latency p50 %.3f ms, p99 %.3f ms, max %.3f ms: want 0 ≤ p50 ≤ p99 ≤ max", r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs)
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
