package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
)

// server is the paced model server running in a child process.
type server struct {
	URL  string
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}
}

// startServer re-executes exe (with args) as the paced server answering
// as o says and returns once it has printed its URL. Close ends it.
func startServer(exe string, args []string, o ServerOptions) (*server, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), o.env()...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server process: %w", err)
	}
	s := &server{cmd: cmd, in: in, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") {
		in.Close()
		cmd.Wait()
		return nil, fmt.Errorf("the server process printed %q (%v), want its URL", line, err)
	}
	s.URL = strings.TrimSpace(line)
	go func() { io.Copy(io.Discard, out); close(s.done) }()
	return s, nil
}

// Close ends the server process and waits for it.
func (s *server) Close() error {
	s.in.Close()
	<-s.done
	return s.cmd.Wait()
}

// Options is one measurement: N conversations against the server at URL,
// whose replies have Deltas deltas Pace apart.
type Options struct {
	URL     string
	N       int
	Deltas  int
	Pace    time.Duration
	Ramp    int           // conversations started at most at once before the previous ones reach the server; 0 is N
	Timeout time.Duration // for the whole measurement
}

// Report is the result of one measurement.
type Report struct {
	N              int     `json:"n"`
	Held           int     `json:"held"`      // conversations mid-stream at the snapshot
	MaxHeld        int     `json:"max_held"`  // most conversations mid-stream at once
	Completed      int     `json:"completed"` // runs that ended without error
	Errors         int     `json:"errors"`    // runs that ended with an error
	FirstError     string  `json:"first_error,omitempty"`
	Deltas         int64   `json:"deltas"`          // continuation text chunks received
	HeapPerConv    float64 `json:"heap_per_conv_b"` // HeapAlloc after GC at the snapshot, over the baseline, per held conversation
	RSSPerConv     float64 `json:"rss_per_conv_b"`  // VmRSS at the snapshot over the baseline, per held conversation
	GoroutinesConv float64 `json:"goroutines_per_conv"`
	CPUPerDeltaNs  float64 `json:"cpu_per_delta_ns"` // user+sys of this process over the measurement, per delta
	AddedP50Ms     float64 `json:"added_p50_ms"`     // inter-chunk gap minus the server's pace
	AddedP99Ms     float64 `json:"added_p99_ms"`
	AddedMaxMs     float64 `json:"added_max_ms"`
	WallSeconds    float64 `json:"wall_s"`
	PaceMs         float64 `json:"pace_ms"`
	DeltasPerReply int     `json:"deltas_per_reply"`
}

// measure runs o.N conversations at once, each to its end, and reports.
func measure(o Options) (Report, error) {
	if o.N < 1 || o.Deltas < 1 || o.Pace < 0 || o.Timeout <= 0 {
		return Report{}, fmt.Errorf("loadharness: bad options %+v", o)
	}
	ramp := o.Ramp
	if ramp <= 0 || ramp > o.N {
		ramp = o.N
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = o.N
	tr.MaxIdleConnsPerHost = o.N
	tr.MaxConnsPerHost = 0
	defer tr.CloseIdleConnections()
	a, err := agent.New(agent.Config{
		BaseURL: o.URL, Model: "load", HTTPClient: &http.Client{Transport: tr},
		RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
	})
	if err != nil {
		return Report{}, err
	}

	// The gaps are stored in one slice allocated before the baseline, so
	// that the harness's own bookkeeping is not counted as the runs' heap.
	gaps := make([]time.Duration, o.N*o.Deltas)
	counts := make([]int, o.N)
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	baseRSS, err := vmRSS()
	if err != nil {
		return Report{}, err
	}
	baseG := runtime.NumGoroutine()
	cpu0 := cpuTime()

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	var (
		live, maxLive atomic.Int64
		deltas        atomic.Int64
		reached       sync.WaitGroup // each run is Done once it is mid-stream or ended
		wg            sync.WaitGroup
		mu            sync.Mutex
		errs          []error
		completed     int
	)
	reached.Add(o.N)
	sem := make(chan struct{}, ramp)
	start := time.Now()
	for i := range o.N {
		sem <- struct{}{}
		wg.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			mid := o.Deltas / 2
			if mid < 1 {
				mid = 1
			}
			my := gaps[i*o.Deltas : i*o.Deltas : (i+1)*o.Deltas]
			var last time.Time
			n, in := 0, false
			var runErr error
			for c, err := range a.Run(ctx, agent.Input{Message: "go"}) {
				if err != nil {
					runErr = err
					break
				}
				if c.Kind != agent.KindText || c.Round < 1 {
					continue
				}
				now := time.Now()
				if n == 0 {
					release() // it reached the server: let the next one start
					in = true
					for v := live.Add(1); ; {
						if m := maxLive.Load(); v <= m || maxLive.CompareAndSwap(m, v) {
							break
						}
					}
				} else if len(my) < cap(my) {
					my = append(my, now.Sub(last)-o.Pace)
				}
				deltas.Add(1)
				last = now
				if n++; n == mid {
					reached.Done()
				}
			}
			if in {
				live.Add(-1)
			}
			if n < mid {
				reached.Done()
			}
			counts[i] = len(my)
			mu.Lock()
			if runErr != nil {
				errs = append(errs, runErr)
			} else if n != o.Deltas {
				errs = append(errs, fmt.Errorf("a run read %d deltas, want %d", n, o.Deltas))
			} else {
				completed++
			}
			mu.Unlock()
		})
	}
	allMid := make(chan struct{})
	go func() { reached.Wait(); close(allMid) }()
	var r Report
	r.N, r.PaceMs, r.DeltasPerReply = o.N, float64(o.Pace)/1e6, o.Deltas
	select {
	case <-allMid:
		held := live.Load()
		var snap runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&snap)
		rss, err := vmRSS()
		if err != nil {
			cancel()
			wg.Wait()
			return Report{}, err
		}
		g := runtime.NumGoroutine() - 1 // the waiter above has ended or is ending
		r.Held = int(held)
		if held > 0 {
			h := float64(held)
			r.HeapPerConv = float64(int64(snap.HeapAlloc)-int64(base.HeapAlloc)) / h
			r.RSSPerConv = float64(rss-baseRSS) / h
			r.GoroutinesConv = float64(g-baseG) / h
		}
	case <-ctx.Done():
	}
	wg.Wait()
	<-allMid
	r.WallSeconds = time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	r.MaxHeld = int(maxLive.Load())
	r.Completed, r.Errors = completed, len(errs)
	if len(errs) > 0 {
		r.FirstError = errs[0].Error()
	}
	all := gaps[:0]
	for i, c := range counts {
		all = append(all, gaps[i*o.Deltas:i*o.Deltas+c]...)
	}
	r.Deltas = deltas.Load()
	if r.Deltas > 0 {
		r.CPUPerDeltaNs = float64(cpu) / float64(r.Deltas)
	}
	if len(all) > 0 {
		slices.Sort(all)
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		r.AddedP50Ms = ms(all[len(all)/2])
		r.AddedP99Ms = ms(all[min(len(all)-1, len(all)*99/100)])
		r.AddedMaxMs = ms(all[len(all)-1])
	}
	if ctx.Err() != nil && r.Completed < o.N {
		return r, fmt.Errorf("loadharness: N=%d timed out after %v with %d runs completed", o.N, o.Timeout, r.Completed)
	}
	return r, nil
}

// vmRSS returns this process's resident set size in bytes, from
// /proc/self/status.
func vmRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read VmRSS: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}

// cpuTime returns this process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
