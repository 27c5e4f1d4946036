package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/memory"
)

// server is the paced model server running in a child process.
type server struct {
	URL string
	// Client trusts the server's certificate when it serves HTTPS, with
	// a transport cloned from http.DefaultTransport (so HTTP/2); nil
	// for plain HTTP.
	Client *http.Client
	cmd    *exec.Cmd
	in     io.WriteCloser
	done   chan struct{}
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
	br := bufio.NewReader(out)
	fail := func(format string, args ...any) (*server, error) {
		in.Close()
		cmd.Wait()
		return nil, fmt.Errorf(format, args...)
	}
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") && !strings.HasPrefix(line, "https://127.0.0.1:") {
		return fail("the server process printed %q (%v), want its URL", line, err)
	}
	s.URL = strings.TrimSpace(line)
	if o.TLS {
		line, err := br.ReadString('\n')
		der, err2 := base64.StdEncoding.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "cert ")))
		cert, err3 := x509.ParseCertificate(der)
		if err != nil || err2 != nil || err3 != nil {
			return fail("the server process printed %q, want its certificate (%v)", line, errors.Join(err, err2, err3))
		}
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		s.Client = &http.Client{Transport: tr}
	}

	go func() { io.Copy(io.Discard, br); close(s.done) }()
	return s, nil
}

// stats asks the server how many connections it accepted and TLS
// handshakes it began so far (the request itself may add one of each).
func (s *server) stats() (serverStats, error) {
	var st serverStats
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(strings.TrimSuffix(s.URL, "/v1") + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Close ends the server process and waits for it.
func (s *server) Close() error {
	if s.Client != nil {
		s.Client.CloseIdleConnections()
	}
	s.in.Close()
	<-s.done
	return s.cmd.Wait()
}

// clients are the values of Options.Client (besides "", the agent).
var clients = []string{"agent", "openai", "openai-acc"}

// Options is one measurement: N conversations against the server at URL,
// whose replies have Deltas deltas Pace apart.
type Options struct {
	URL     string
	N       int
	Deltas  int
	Pace    time.Duration
	Ramp    int           // conversations started at most at once before the previous ones reach the server; 0 is N
	Timeout time.Duration // for the whole measurement
	// Tool makes every turn call get_weather (the server must be started
	// with the same tool), which waits for a person's decision (the
	// harness's heldApprovals):
	// once every run waits (or has ended), the harness takes the paused
	// snapshot and then answers each approval after a random delay of at
	// most ApprovalDelay (0: all at once). With an openai client, the
	// conversation makes the same three requests with openai-go (plan,
	// tool call, answer) and waits between the last two as the agent
	// waits for its approval.
	Tool          bool
	ApprovalDelay time.Duration
	// Client is what holds the conversations: "agent" (or empty), an
	// agent.Agent; "openai", bare openai-go streams (the baseline: the
	// answer alone, or with Tool the agent's three requests); "openai-acc",
	// the same with openai-go's ChatCompletionAccumulator.
	Client string
	// HTTPClient, when not nil, makes the requests of either client;
	// nil leaves each with its own default.
	HTTPClient *http.Client
	// Agent, when not nil, changes the agent's Config before it is built.
	Agent func(*agent.Config)
	// History, when above 0, gives every conversation an earlier turn of
	// about this many bytes (a user message and an answer), which every
	// request carries, as a real conversation's history.
	History int
	// HeapProfile, when not nil, receives a heap profile taken at the
	// paused snapshot (or at the mid-stream one without Tool).
	HeapProfile io.Writer
	// Setup is copied into the report.
	Setup string
	// ServerPID, when not 0, is the server process, whose CPU time per
	// delta is reported too.
	ServerPID int
	// Server, when not nil, is asked how many connections and TLS
	// handshakes the measurement took.
	Server *server
}

// Report is the result of one measurement.
type Report struct {
	N           int     `json:"n"`
	Client      string  `json:"client"`
	TLS         bool    `json:"tls"`
	Tool        bool    `json:"tool"`
	History     int     `json:"history_b,omitempty"`
	Setup       string  `json:"setup,omitempty"` // what was changed from the defaults: GOGC, GOMEMLIMIT, the agent's transport
	Held        int     `json:"held"`            // conversations mid-stream at the snapshot
	MaxHeld     int     `json:"max_held"`        // most conversations mid-stream at once
	Completed   int     `json:"completed"`       // runs that ended without error
	Errors      int     `json:"errors"`          // runs that ended with an error
	FirstError  string  `json:"first_error,omitempty"`
	Deltas      int64   `json:"deltas"`          // answer text chunks received
	HeapPerConv float64 `json:"heap_per_conv_b"` // HeapAlloc after GC at the snapshot, over the baseline, per held conversation
	RSSPerConv  float64 `json:"rss_per_conv_b"`  // VmRSS at the snapshot over the baseline, per held conversation
	// InusePerConv is HeapInuse (the bytes of the heap's spans in use:
	// live objects and the free slots between them) after the GC, over
	// the baseline, per held conversation; over HeapPerConv, it tells
	// how fragmented the heap is.
	InusePerConv   float64 `json:"heap_inuse_per_conv_b"`
	StackPerConv   float64 `json:"stack_per_conv_b"` // goroutine stacks (StackInuse) at the snapshot over the baseline, per held conversation
	RSSTotal       float64 `json:"rss_b"`            // VmRSS of the process at the mid-stream snapshot
	GoroutinesConv float64 `json:"goroutines_per_conv"`
	// Paused: the same at the moment every run waited for its approval.
	Paused           int     `json:"paused,omitempty"`
	PausedHeapConv   float64 `json:"paused_heap_per_conv_b,omitempty"`
	PausedInuseConv  float64 `json:"paused_heap_inuse_per_conv_b,omitempty"`
	PausedGoroutines float64 `json:"paused_goroutines_per_conv,omitempty"`
	CPUPerDeltaNs    float64 `json:"cpu_per_delta_ns"`                  // user+sys of this process over the measurement, per delta
	SysPerDeltaNs    float64 `json:"sys_per_delta_ns"`                  // the part of it in the kernel
	ServerPerDeltaNs float64 `json:"server_cpu_per_delta_ns,omitempty"` // user+sys of the server process, per delta
	AddedP50Ms       float64 `json:"added_p50_ms"`                      // inter-chunk gap minus the server's pace
	AddedP99Ms       float64 `json:"added_p99_ms"`
	AddedMaxMs       float64 `json:"added_max_ms"`
	// Delay: from the server's write of a delta to its text chunk in
	// this process, which the server stamps on the delta (both processes
	// read the same clock): what the client side adds (the kernel's
	// loopback, net/http, the SDK, the scheduler), without the server's
	// own lateness, which the added gap counts.
	DelayP50Ms float64 `json:"delay_p50_ms"`
	DelayP99Ms float64 `json:"delay_p99_ms"`
	DelayMaxMs float64 `json:"delay_max_ms"`
	Stamped    int     `json:"stamped"` // deltas whose write time was read: all of them
	// The mid-stream snapshot (a forced GC and a read of the memory
	// statistics) stalls the process, every conversation at once, which
	// alone puts up to one delta per conversation (1% of a 100-delta
	// answer) behind: SnapshotMs is how long it took, and the last delay
	// figure leaves out the deltas in flight meanwhile (written before it
	// ended, read after it began). A service takes no such snapshot.
	SnapshotMs float64 `json:"snapshot_ms"`
	// The Go scheduler's latency over the measurement (runtime/metrics
	// /sched/latencies: how long goroutines waited runnable before they
	// ran) and the longest stop-the-world pause of the GC, as the
	// runtime's histograms bucket them.
	SchedP99Ms        float64 `json:"sched_latency_p99_ms"`
	SchedMaxMs        float64 `json:"sched_latency_max_ms"`
	GCPauseMaxMs      float64 `json:"gc_pause_max_ms"`
	DelayP99OutsideMs float64 `json:"delay_p99_outside_snapshot_ms"`
	AddedP99OutsideMs float64 `json:"added_p99_outside_snapshot_ms"` // the added gaps of deltas received before the snapshot began or after it ended
	WallSeconds       float64 `json:"wall_s"`
	LoadAvg           float64 `json:"loadavg_1m"` // the machine's load average when the measurement began
	PaceMs            float64 `json:"pace_ms"`
	DeltasPerReply    int     `json:"deltas_per_reply"`
	ApprovalDelayMs   float64 `json:"approval_delay_ms,omitempty"` // the bound of the random delay before each approval is answered
	// What the server saw over the measurement: connections accepted and
	// TLS handshakes begun (HTTPS only), the harness's two requests for
	// these figures included.
	ServerConns      int64 `json:"server_conns,omitempty"`
	ServerHandshakes int64 `json:"server_handshakes,omitempty"`
}

// snapshot is the process's memory at one moment, over a baseline.
type snapshot struct {
	heap, inuse, stack, rss int64
	g                       int
}

func takeSnapshot() (snapshot, error) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	rss, err := procRSS(os.Getpid(), "VmRSS:")
	return snapshot{heap: int64(ms.HeapAlloc), inuse: int64(ms.HeapInuse), stack: int64(ms.StackInuse), rss: rss, g: runtime.NumGoroutine()}, err
}

// measure runs o.N conversations at once, each to its end, and reports.
func measure(o Options) (Report, error) {
	if o.N < 1 || o.Deltas < 1 || o.Pace < 0 || o.Timeout <= 0 || o.ApprovalDelay < 0 ||
		o.Client != "" && !slices.Contains(clients, o.Client) {
		return Report{}, fmt.Errorf("loadharness: bad options %+v", o)
	}
	ramp := o.Ramp
	if ramp <= 0 || ramp > o.N {
		ramp = o.N
	}
	cfg := agent.Config{
		BaseURL: o.URL, Model: "load", HTTPClient: o.HTTPClient,
		MaxRetries: -1,
	}
	oopts := []option.RequestOption{option.WithBaseURL(o.URL), option.WithAPIKey("load"), option.WithMaxRetries(0)}
	if o.HTTPClient != nil {
		oopts = append(oopts, option.WithHTTPClient(o.HTTPClient))
	}
	oc := openai.NewClient(oopts...)
	held := &heldApprovals{waits: make(map[string]chan struct{})}
	if o.Tool {
		var err error
		if cfg.Tools, err = agent.NewToolRegistry(demo.GetWeather()); err != nil {
			return Report{}, err
		}
		cfg.Approver = held
	}
	if o.Agent != nil {
		o.Agent(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		return Report{}, err
	}
	var history []memory.Message
	msgs := continuation
	if o.History > 0 {
		half := strings.Repeat("history ", max(o.History/16, 1))
		history = []memory.Message{{Role: memory.RoleUser, Content: half}, {Role: memory.RoleAssistant, Content: half}}
		msgs = append([]openai.ChatCompletionMessageParamUnion{openai.UserMessage(half), openai.AssistantMessage(half)}, continuation...)
	}
	answerRound := 1 // the continuation
	if o.Tool {
		answerRound = 2 // after the tool round
	}

	// The gaps are stored in one slice allocated before the baseline, so
	// that the harness's own bookkeeping is not counted as the runs' heap.
	gaps := make([]time.Duration, o.N*o.Deltas)
	delays := make([]time.Duration, o.N*o.Deltas)
	received := make([]int64, o.N*o.Deltas) // Unix ns, beside delays
	delayCounts := make([]int, o.N)
	counts := make([]int, o.N)
	// pending is a conversation waiting for its approval; resume gives it.
	type pending struct {
		resume func()
	}
	waiting := make(chan pending, o.N)
	var st0 serverStats
	if o.Server != nil {
		if st0, err = o.Server.stats(); err != nil {
			return Report{}, err
		}
	}
	base, err := takeSnapshot()
	if err != nil {
		return Report{}, err
	}
	cpu0 := cpuTime()
	rt0 := readRuntimeHists()
	load := loadAvg()
	srv0, _ := procCPU(o.ServerPID)

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	var (
		live, maxLive atomic.Int64
		deltas        atomic.Int64
		reached       sync.WaitGroup // each run is Done once it is mid-stream or ended
		paused        sync.WaitGroup // each run is Done once it waits for its approval or ended
		wg            sync.WaitGroup
		mu            sync.Mutex
		errs          []error
		completed     int
	)
	reached.Add(o.N)
	paused.Add(o.N)
	sem := make(chan struct{}, ramp)
	start := time.Now()
	for i := range o.N {
		sem <- struct{}{}
		wg.Go(func() {
			var once, pauseOnce sync.Once
			release := func() { once.Do(func() { <-sem }) }
			pause := func() { pauseOnce.Do(paused.Done) }
			defer release()
			defer pause()
			if !o.Tool {
				pause()
			}
			mid := max(o.Deltas/2, 1)
			my := gaps[i*o.Deltas : i*o.Deltas : (i+1)*o.Deltas]
			myDelays := delays[i*o.Deltas : i*o.Deltas : (i+1)*o.Deltas]
			myReceived := received[i*o.Deltas : i*o.Deltas : (i+1)*o.Deltas]
			var last time.Time
			n, in := 0, false
			text := func(s string) {
				now := time.Now()
				stamps(s, func(sent int64) {
					if len(myDelays) < cap(myDelays) {
						myDelays = append(myDelays, time.Duration(now.UnixNano()-sent))
						myReceived = append(myReceived, now.UnixNano())
					}
				})
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
			session := "c" + strconv.Itoa(i)
			approve := func(call agent.ToolCall) {
				release()
				waiting <- pending{func() { held.approve(call.ApprovalID) }}
				pause()
			}
			var runErr error
			switch {
			case o.Client != "agent" && o.Client != "" && o.Tool:
				wait := func() {
					release()
					approved := make(chan struct{})
					waiting <- pending{func() { close(approved) }}
					pause()
					select {
					case <-approved:
					case <-ctx.Done():
					}
				}
				runErr = converseOpenAITool(ctx, &oc, msgs[:1], o.Client == "openai-acc", wait, text)
			case o.Client == "openai" || o.Client == "openai-acc":
				runErr = converseOpenAI(ctx, &oc, msgs, o.Client == "openai-acc", text)
			default:
				runErr = converseAgent(ctx, a, agent.Input{SessionID: session, History: history, Message: "go"}, answerRound, approve, text)
			}
			if in {
				live.Add(-1)
			}
			if n < mid {
				reached.Done()
			}
			counts[i], delayCounts[i] = len(my), len(myDelays)
			mu.Lock()
			if runErr != nil {
				errs = append(errs, runErr)
			} else if n != o.Deltas {
				errs = append(errs, fmt.Errorf("a run read %d answer deltas, want %d", n, o.Deltas))
			} else {
				completed++
			}
			mu.Unlock()
		})
	}
	var r Report
	r.N, r.Client, r.TLS, r.Tool = o.N, cmp.Or(o.Client, "agent"), strings.HasPrefix(o.URL, "https:"), o.Tool
	r.PaceMs, r.DeltasPerReply, r.LoadAvg, r.History, r.Setup = float64(o.Pace)/1e6, o.Deltas, load, o.History, o.Setup
	if o.Tool {
		r.ApprovalDelayMs = float64(o.ApprovalDelay) / 1e6
	}
	fail := func(err error) (Report, error) {
		cancel()
		wg.Wait()
		return r, err
	}
	if o.Tool {
		allPaused := make(chan struct{})
		go func() { paused.Wait(); close(allPaused) }()
		select {
		case <-allPaused:
			snap, err := takeSnapshot()
			if err != nil {
				return fail(err)
			}
			if held := len(waiting); held > 0 {
				r.Paused = held
				r.PausedHeapConv = float64(snap.heap-base.heap) / float64(held)
				r.PausedInuseConv = float64(snap.inuse-base.inuse) / float64(held)
				r.PausedGoroutines = float64(snap.g-base.g) / float64(held)
			}
			if o.HeapProfile != nil {
				pprof.Lookup("heap").WriteTo(o.HeapProfile, 0)
			}
		case <-ctx.Done():
		}
		// Answer every approval after its random delay; the channel holds
		// them all, so no run ever blocks on it.
		var timers sync.WaitGroup
		for range o.N {
			var p pending
			select {
			case p = <-waiting:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			delay := time.Duration(rand.Int64N(int64(o.ApprovalDelay) + 1))
			timers.Go(func() {
				t := time.NewTimer(delay)
				defer t.Stop()
				select {
				case <-t.C:
					p.resume()
				case <-ctx.Done():
				}
			})
		}
		defer timers.Wait()
	}
	allMid := make(chan struct{})
	go func() { reached.Wait(); close(allMid) }()
	var snapFrom, snapTo time.Time
	select {
	case <-allMid:
		held := live.Load()
		snapFrom = time.Now()
		snap, err := takeSnapshot()
		snapTo = time.Now()
		if err != nil {
			return fail(err)
		}
		g := snap.g - 1 // the waiter above has ended or is ending
		if o.HeapProfile != nil && !o.Tool {
			pprof.Lookup("heap").WriteTo(o.HeapProfile, 0)
		}
		r.Held = int(held)
		r.RSSTotal = float64(snap.rss)
		if held > 0 {
			h := float64(held)
			r.HeapPerConv = float64(snap.heap-base.heap) / h
			r.InusePerConv = float64(snap.inuse-base.inuse) / h
			r.RSSPerConv = float64(snap.rss-base.rss) / h
			r.StackPerConv = float64(snap.stack-base.stack) / h
			r.GoroutinesConv = float64(g-base.g) / h
		}
	case <-ctx.Done():
	}
	wg.Wait()
	<-allMid
	r.WallSeconds = time.Since(start).Seconds()
	cpu1 := cpuTime()
	rt1 := readRuntimeHists()
	r.SchedP99Ms = histQuantile(rt0.sched, rt1.sched, 0.99) * 1000
	r.SchedMaxMs = histQuantile(rt0.sched, rt1.sched, 1) * 1000
	r.GCPauseMaxMs = histQuantile(rt0.pauses, rt1.pauses, 1) * 1000
	srv1, _ := procCPU(o.ServerPID)
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
	if o.Server != nil {
		if st1, err := o.Server.stats(); err == nil {
			r.ServerConns, r.ServerHandshakes = st1.Accepted-st0.Accepted, st1.Handshakes-st0.Handshakes
		}
	}
	if r.Deltas > 0 {
		r.CPUPerDeltaNs = float64(cpu1.user+cpu1.sys-cpu0.user-cpu0.sys) / float64(r.Deltas)
		r.SysPerDeltaNs = float64(cpu1.sys-cpu0.sys) / float64(r.Deltas)
		r.ServerPerDeltaNs = float64(srv1.user+srv1.sys-srv0.user-srv0.sys) / float64(r.Deltas)
	}
	r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs = percentiles(all)
	// The deltas in flight during the mid-stream snapshot are picked out
	// before the delays are gathered (in place) and sorted.
	var outside []time.Duration
	for i, c := range delayCounts {
		for j := i * o.Deltas; j < i*o.Deltas+c; j++ {
			recv := received[j]
			sent := recv - int64(delays[j])
			if snapTo.IsZero() || sent > snapTo.UnixNano() || recv < snapFrom.UnixNano() {
				outside = append(outside, delays[j])
			}
		}
	}
	_, r.DelayP99OutsideMs, _ = percentiles(outside)
	// The same for the added gaps: those whose two deltas came on either
	// side of the snapshot's start or end, or during it, are left out.
	outside = outside[:0]
	for i, c := range delayCounts {
		for j := i*o.Deltas + 1; j < i*o.Deltas+c; j++ {
			prev, recv := received[j-1], received[j]
			if snapTo.IsZero() || recv < snapFrom.UnixNano() || prev > snapTo.UnixNano() {
				outside = append(outside, time.Duration(recv-prev)-o.Pace)
			}
		}
	}
	_, r.AddedP99OutsideMs, _ = percentiles(outside)
	if !snapTo.IsZero() {
		r.SnapshotMs = float64(snapTo.Sub(snapFrom)) / 1e6
	}
	allDelays := delays[:0]
	for i, c := range delayCounts {
		allDelays = append(allDelays, delays[i*o.Deltas:i*o.Deltas+c]...)
	}
	r.Stamped = len(allDelays)
	r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs = percentiles(allDelays)
	if ctx.Err() != nil && r.Completed < o.N {
		return r, fmt.Errorf("loadharness: N=%d timed out after %v with %d runs completed", o.N, o.Timeout, r.Completed)
	}
	return r, nil
}

// converseAgent runs one agent turn, calling approve with the id of each
// approval it waits for and text for each text chunk of the answer round.
func converseAgent(ctx context.Context, a *agent.Agent, in agent.Input, answerRound int, approve func(agent.ToolCall), text func(string)) error {
	for c, err := range a.Run(ctx, in) {
		if err != nil {
			return err
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.ApprovalRequired:
			approve(*c.Tool)
		case c.Kind == agent.KindText && c.Round >= answerRound:
			text(c.Text)
		}
	}
	return nil
}

// continuation is the request of the agent's continuation round, which the
// server answers with the paced answer.
var continuation = []openai.ChatCompletionMessageParamUnion{
	openai.UserMessage("go"), openai.AssistantMessage("Sure."), openai.UserMessage("[continue]"),
}

// converseOpenAI streams the same answer with openai-go alone, calling
// text for each chunk with content; with accumulate, it also adds each
// chunk to a ChatCompletionAccumulator, as openai-go's documentation shows
// for keeping the reply.
func converseOpenAI(ctx context.Context, c *openai.Client, msgs []openai.ChatCompletionMessageParamUnion, accumulate bool, text func(string)) error {
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "load", Messages: msgs})
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		chunk := s.Current()
		if accumulate {
			acc.AddChunk(chunk)
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			text(chunk.Choices[0].Delta.Content)
		}
	}
	return s.Err()
}

// converseOpenAITool makes the agent's three requests of a turn with a
// tool with openai-go alone: the plan (without tools), the tool round
// (with the tool, which the server answers with a call), and after wait
// returns, the answer to the tool's result, calling text for each chunk
// of the answer with content.
func converseOpenAITool(ctx context.Context, c *openai.Client, msgs []openai.ChatCompletionMessageParamUnion, accumulate bool, wait func(), text func(string)) error {
	stream := func(p openai.ChatCompletionNewParams, text func(string)) (openai.ChatCompletion, error) {
		s := c.Chat.Completions.NewStreaming(ctx, p)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			chunk := s.Current()
			acc.AddChunk(chunk)
			if text != nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
				text(chunk.Choices[0].Delta.Content)
			}
		}
		return acc.ChatCompletion, s.Err()
	}
	msgs = slices.Clip(msgs) // the appends below must not write into the caller's array
	plan, err := stream(openai.ChatCompletionNewParams{Model: "load", Messages: msgs}, nil)
	if err != nil {
		return err
	}
	if len(plan.Choices) == 0 {
		return errors.New("the plan has no choice")
	}
	msgs = append(msgs, openai.AssistantMessage(plan.Choices[0].Message.Content), openai.UserMessage("[continue]"))
	call, err := stream(openai.ChatCompletionNewParams{Model: "load", Messages: msgs, Tools: openAITools}, nil)
	if err != nil {
		return err
	}
	if len(call.Choices) == 0 || len(call.Choices[0].Message.ToolCalls) != 1 {
		return errors.New("the tool round made no call")
	}
	wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	tc := call.Choices[0].Message.ToolCalls[0]
	msgs = append(msgs, call.Choices[0].Message.ToParam(), openai.ToolMessage(`{"city":"Oslo","temp_c":4}`, tc.ID))
	if accumulate {
		_, err = stream(openai.ChatCompletionNewParams{Model: "load", Messages: msgs, Tools: openAITools}, text)
		return err
	}
	// As converseOpenAI: the answer's chunks are read without keeping them.
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "load", Messages: msgs, Tools: openAITools})
	defer s.Close()
	for s.Next() {
		chunk := s.Current()
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			text(chunk.Choices[0].Delta.Content)
		}
	}
	return s.Err()
}

// openAITools offers get_weather to the baseline's tool round.
var openAITools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:       "get_weather",
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
})}

// loadAvg returns the machine's load average over the last minute, or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuTimes is a process's CPU time in user space and in the kernel.
type cpuTimes struct{ user, sys time.Duration }

// procCPU returns the CPU times of process pid from /proc (with the
// kernel's clock tick of 100 Hz), or zero times for pid 0.
func procCPU(pid int) (cpuTimes, error) {
	if pid == 0 {
		return cpuTimes{}, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its closing one. utime and stime are fields
	// 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return cpuTimes{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return cpuTimes{}, err
	}
	const tick = 10 * time.Millisecond
	return cpuTimes{time.Duration(u) * tick, time.Duration(k) * tick}, nil
}

// cpuTime returns this process's CPU times.
func cpuTime() cpuTimes {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// percentiles sorts gaps and returns their median, 99th percentile and
// largest, in milliseconds; zeros for none.
func percentiles(gaps []time.Duration) (p50, p99, most float64) {
	if len(gaps) == 0 {
		return 0, 0, 0
	}
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return ms(gaps[len(gaps)/2]), ms(gaps[min(len(gaps)-1, len(gaps)*99/100)]), ms(gaps[len(gaps)-1])
}

// runtimeHists are the runtime's histograms the report reads.
type runtimeHists struct{ sched, pauses *metrics.Float64Histogram }

func readRuntimeHists() runtimeHists {
	samples := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(samples)
	var h runtimeHists
	if samples[0].Value.Kind() == metrics.KindFloat64Histogram {
		h.sched = samples[0].Value.Float64Histogram()
	}
	if samples[1].Value.Kind() == metrics.KindFloat64Histogram {
		h.pauses = samples[1].Value.Float64Histogram()
	}
	return h
}

// histQuantile returns the q quantile (0 < q ≤ 1) of what the histogram
// after counted since before, as the upper bound of its bucket (the lower
// one for the last bucket, whose upper bound is infinite), or 0 when it
// counted nothing.
func histQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0
	}
	var total uint64
	for i := range after.Counts {
		total += after.Counts[i] - before.Counts[i]
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range after.Counts {
		seen += after.Counts[i] - before.Counts[i]
		if seen >= want {
			if hi := after.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return after.Buckets[i]
		}
	}
	return 0
}

// heldApprovals is the harness's person in the loop: every call's approval
// waits, as a run paused at a person's approval does, until the harness
// approves it (approve) or the run's context ends. It keeps a channel per
// approval and nothing else: what the figures show is the run's own
// pause, as the openai clients' pause is theirs.
type heldApprovals struct {
	mu    sync.Mutex
	next  int
	waits map[string]chan struct{}
}

// Request implements agent.Approver.
func (h *heldApprovals) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return agent.Ticket{}, err
	}
	h.mu.Lock()
	h.next++
	id := "approval-" + strconv.Itoa(h.next)
	approved := make(chan struct{})
	h.waits[id] = approved
	h.mu.Unlock()
	return agent.Pending(id, func(ctx context.Context) (agent.Decision, error) {
		defer h.forget(id)
		select {
		case <-approved:
			return agent.Decision{Approved: true, By: "loadharness"}, nil
		case <-ctx.Done():
			return agent.Decision{Reason: agent.CauseApprovalInterrupted.DefaultReason(), Cause: agent.CauseApprovalInterrupted}, ctx.Err()
		}
	}), nil
}

// approve approves the approval id; an unknown id (its run ended) is left.
func (h *heldApprovals) approve(id string) {
	h.mu.Lock()
	approved := h.waits[id]
	delete(h.waits, id)
	h.mu.Unlock()
	if approved != nil {
		close(approved)
	}
}

// forget drops the approval id once its wait is over.
func (h *heldApprovals) forget(id string) {
	h.mu.Lock()
	delete(h.waits, id)
	h.mu.Unlock()
}
