package main

// Web chat mode: the harness drives examples/webchat, run as another
// process, through its HTTP/SSE API as N browsers would. Every browser
// loads the page (which sets its owner cookie), lists its sessions, asks
// for a session id and keeps the session's event stream open. Idle
// browsers only stay connected; active ones send a message, answer the
// approval of the get_weather call the paced server scripts after a random
// delay, read the streamed answer to its run_done, and go on until the
// turns are done. What is measured is the web chat process: its VmRSS,
// open fds and CPU time from /proc, and the inter-chunk latency its
// active pages see.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// webFlags are the flags of the web chat mode; -webchat selects it.
type webFlags struct {
	binary       *string
	active       *int
	turns        *int
	sessionTurns *int
	db           *bool
	connect      *int
	sample       *int
}

// addWebFlags defines the web chat mode's flags on fs.
func addWebFlags(fs *flag.FlagSet) webFlags {
	return webFlags{
		binary:       fs.String("webchat", "", "web chat mode: drive the web chat `binary` (from the repository's root: go build -o /tmp/webchat ./examples/webchat) with -n connected browsers"),
		active:       fs.Int("active", 100, "web chat mode: browsers of the -n that send messages"),
		turns:        fs.Int("turns", 1000, "web chat mode: turns the active browsers complete in all, per N"),
		sessionTurns: fs.Int("session-turns", 5, "web chat mode: turns per session before an active browser opens a new one and deletes the old (0: one session for all)"),
		db:           fs.Bool("webchat-db", false, "web chat mode: run the web chat with -db on a SQLite file in a temporary folder (default: in memory)"),
		connect:      fs.Int("connect", 100, "web chat mode: browsers connecting at most at once"),
		sample:       fs.Int("sample-every", 1000, "web chat mode: turns between two RSS samples of the web chat"),
	}
}

// runWeb is the web chat mode: the paced server with a get_weather call
// per turn, and one measurement per N, each against a fresh web chat.
// An active browser answers each approval after a random delay up to
// approvalDelay (-approval-delay).
func runWeb(f webFlags, counts []int, deltas int, pace, approvalDelay, timeout time.Duration, asJSON bool, out io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start the server: %w", err)
	}
	srv, err := startServer(exe, nil, ServerOptions{Deltas: deltas, Pace: pace, Tool: "get_weather", Args: `{"city":"Oslo"}`})
	if err != nil {
		return err
	}
	defer srv.Close()
	if !asJSON {
		fmt.Fprintln(out, webTableHeader)
	}
	for _, n := range counts {
		dir, err := os.MkdirTemp("", "loadharness-webchat-")
		if err != nil {
			return err
		}
		o := WebOptions{
			Binary: *f.binary, ModelURL: srv.URL, N: n, Active: min(*f.active, n), Turns: *f.turns,
			Deltas: deltas, Pace: pace, ApprovalDelay: approvalDelay, SessionTurns: *f.sessionTurns,
			Connect: *f.connect, SampleEvery: *f.sample, Timeout: timeout, Stderr: os.Stderr,
		}
		if *f.db {
			o.DB = filepath.Join(dir, "chat.db")
		}
		r, err := measureWeb(o)
		os.RemoveAll(dir)
		if asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, webTableRow(r))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WebOptions is one web chat measurement.
type WebOptions struct {
	Binary   string // the web chat binary
	ModelURL string // the paced server, scripted with a get_weather call per turn
	N        int    // browsers connected at once
	Active   int    // of the N, browsers that send messages
	Turns    int    // turns the active browsers complete in all
	Deltas   int    // text deltas per answer (the paced server's)
	Pace     time.Duration
	// ApprovalDelay bounds the random delay after which an active browser
	// answers an approval (approves it).
	ApprovalDelay time.Duration
	// SessionTurns is how many turns an active browser sends in a session
	// before it opens a new one and deletes the old; 0 keeps one session.
	SessionTurns int
	DB           string // when set, the web chat keeps its sessions in this SQLite file (-db)
	Connect      int    // browsers connecting at most at once; 0 is 100
	SampleEvery  int    // turns between two RSS samples; 0 is 1,000
	Timeout      time.Duration
	Stderr       io.Writer // the web chat's stderr; nil discards it
}

// RSSSample is the web chat's VmRSS after a number of turns.
type RSSSample struct {
	Turns int   `json:"turns"`
	RSS   int64 `json:"rss_b"`
	// HeapLive is the web chat's live heap after its last GC before the
	// sample (GODEBUG=gctrace=1, MB resolution); 0 before its first GC.
	HeapLive int64   `json:"heap_live_b"`
	Seconds  float64 `json:"t_s"` // since the active phase began
}

// WebReport is the result of one web chat measurement. Memory and CPU
// figures are the web chat process's, not the harness's.
type WebReport struct {
	N            int     `json:"n"`
	Active       int     `json:"active"`
	Store        string  `json:"store"`         // "memory" or "sqlite"
	SessionTurns int     `json:"session_turns"` // turns per session of an active browser (0: one session)
	Connected    int     `json:"connected"`     // browsers whose event stream was open when all had connected
	ConnectSecs  float64 `json:"connect_s"`     // time to connect them all
	BaseRSS      int64   `json:"base_rss_b"`    // VmRSS of the started web chat, before any browser
	ConnectedRSS int64   `json:"connected_rss_b"`
	// RSSPerBrowser is ConnectedRSS over BaseRSS per connected browser.
	RSSPerBrowser float64 `json:"rss_per_browser_b"`
	// HeapLiveConnected is the live heap after the web chat's last GC
	// when all had connected, and StacksConnected its goroutine stacks
	// then (both from GODEBUG=gctrace=1, MB resolution).
	HeapLiveConnected int64 `json:"heap_live_connected_b"`
	StacksConnected   int64 `json:"stacks_connected_b"`
	FDs               int   `json:"fds"`     // the web chat's open fds when all had connected
	Threads           int   `json:"threads"` // the web chat's OS threads then
	// Samples are VmRSS every SampleEvery turns of the active phase.
	Samples []RSSSample `json:"rss_samples"`
	// RSSSlope and HeapSlope are the least-squares slopes of VmRSS and
	// of the live heap over the samples of the second half of the turns,
	// in bytes per 1,000 turns: near zero when flat.
	RSSSlope    float64 `json:"rss_slope_b_per_1k_turns"`
	HeapSlope   float64 `json:"heap_slope_b_per_1k_turns"`
	EndRSS      int64   `json:"end_rss_b"`       // VmRSS after the last turn
	EndHeapLive int64   `json:"end_heap_live_b"` // live heap after the last GC before the last turn ended
	PeakRSS     int64   `json:"peak_rss_b"`      // VmHWM after the last turn
	Turns       int     `json:"turns"`           // turns that ended with run_done finished and all their deltas
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Dropped     int     `json:"dropped"` // idle event streams that ended before the measurement did
	Deltas      int64   `json:"deltas"`  // answer text chunks the active browsers read
	// CPUPerDeltaNs is the web chat's user+sys time over the active phase
	// per answer delta (the whole turn's work: planning, the tool round,
	// the approval, the idle streams' keep-alives, counted in).
	CPUPerDeltaNs float64 `json:"cpu_per_delta_ns"`
	CPUSeconds    float64 `json:"cpu_active_s"`
	CPUSysSeconds float64 `json:"cpu_sys_active_s"` // of which in the kernel
	AddedP50Ms    float64 `json:"added_p50_ms"`     // inter-chunk gap seen by an active browser minus the pace
	AddedP99Ms    float64 `json:"added_p99_ms"`
	AddedMaxMs    float64 `json:"added_max_ms"`
	// Delay: from the model server's write of a delta to its text in an
	// active browser (the server stamps it; every process reads the
	// same clock): what the web chat and the SDK add, without the model
	// server's own lateness.
	DelayP50Ms      float64 `json:"delay_p50_ms"`
	DelayP99Ms      float64 `json:"delay_p99_ms"`
	DelayMaxMs      float64 `json:"delay_max_ms"`
	Stamped         int     `json:"stamped"`  // deltas whose write time was read: all of them
	ActiveSecs      float64 `json:"active_s"` // the active phase's wall time
	TurnsPerSec     float64 `json:"turns_per_s"`
	WallSeconds     float64 `json:"wall_s"`
	PaceMs          float64 `json:"pace_ms"`
	DeltasPerTurn   int     `json:"deltas_per_turn"`
	ApprovalDelayMs float64 `json:"approval_delay_ms"`
}

// measureWeb starts the web chat, connects o.N browsers, runs o.Turns turns
// from o.Active of them, and reports. The web chat ends before it returns.
func measureWeb(o WebOptions) (WebReport, error) {
	if o.N < 1 || o.Active < 0 || o.Active > o.N || o.Turns < 0 || (o.Turns > 0 && o.Active == 0) ||
		o.Deltas < 1 || o.Pace < 0 || o.ApprovalDelay < 0 || o.SessionTurns < 0 || o.Timeout <= 0 || o.Binary == "" {
		return WebReport{}, fmt.Errorf("loadharness: bad web chat options %+v", o)
	}
	if o.Connect <= 0 {
		o.Connect = 100
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 1000
	}
	r := WebReport{
		N: o.N, Active: o.Active, Store: "memory", SessionTurns: o.SessionTurns,
		PaceMs: float64(o.Pace) / 1e6, DeltasPerTurn: o.Deltas, ApprovalDelayMs: float64(o.ApprovalDelay) / 1e6,
	}
	if o.DB != "" {
		r.Store = "sqlite"
	}
	start := time.Now()
	args := []string{"-addr", "127.0.0.1:0",
		"-max-runs", strconv.Itoa(max(o.Active, 32)),
		// A browser that changes sessions opens the new stream before it
		// closes the old.
		"-max-streams", strconv.Itoa(o.N + o.Active + 16)}
	if o.DB != "" {
		args = append(args, "-db", o.DB)
	}
	gc := &gcTrace{out: o.Stderr}
	wc, err := startWebchat(o.Binary, o.ModelURL, args, gc)
	if err != nil {
		return r, err
	}
	defer wc.Close()
	if r.BaseRSS, err = procRSS(wc.pid, "VmRSS:"); err != nil {
		return r, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = o.Active + o.Connect
	tr.MaxConnsPerHost = 0
	tr.DisableCompression = true
	defer tr.CloseIdleConnections()

	var (
		errMu    sync.Mutex
		errCount int
		firstErr error
		dropped  atomic.Int64
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		errCount++
		if firstErr == nil {
			firstErr = err
		}
	}

	// Connect every browser, at most o.Connect at once. The idle ones'
	// streams are read (and their keep-alives dropped) by a goroutine each
	// until the measurement ends.
	browsers := make([]*browser, o.N)
	var (
		idle      sync.WaitGroup
		connected atomic.Int64
	)
	sem := make(chan struct{}, o.Connect)
	var cwg sync.WaitGroup
	for i := range o.N {
		sem <- struct{}{}
		cwg.Go(func() {
			defer func() { <-sem }()
			b, err := newBrowser(wc.base, tr)
			if err == nil {
				err = b.load(ctx)
			}
			if err != nil {
				fail(fmt.Errorf("connecting browser %d: %w", i, err))
				return
			}
			connected.Add(1)
			browsers[i] = b
			if i >= o.Active {
				rd := b.rd
				idle.Go(func() {
					if err := drain(rd); ctx.Err() == nil { // drain ends only with an error
						dropped.Add(1)
						fail(fmt.Errorf("an idle event stream ended: %w", err))
					}
				})
			}
		})
	}
	cwg.Wait()
	defer func() {
		cancel() // ends every stream
		for _, b := range browsers {
			if b != nil {
				b.closeStream()
			}
		}
		idle.Wait()
	}()
	r.ConnectSecs = time.Since(start).Seconds()
	r.Connected = int(connected.Load())
	time.Sleep(time.Second) // let the last connections settle
	if r.ConnectedRSS, err = procRSS(wc.pid, "VmRSS:"); err != nil {
		return r, err
	}
	if r.Connected > 0 {
		r.RSSPerBrowser = float64(r.ConnectedRSS-r.BaseRSS) / float64(r.Connected)
	}
	r.HeapLiveConnected, r.StacksConnected = gc.live.Load(), gc.stacks.Load()
	r.FDs = procFDs(wc.pid)
	if th, err := procRSS(wc.pid, "Threads:"); err == nil {
		r.Threads = int(th)
	}

	// The active phase.
	var (
		claimed, done atomic.Int64
		deltas        atomic.Int64
		sampleMu      sync.Mutex
		gapsMu        sync.Mutex
		gaps, delays  []time.Duration
		awg           sync.WaitGroup
	)
	cpu0, err := procCPU(wc.pid)
	if err != nil {
		return r, err
	}
	active := time.Now()
	for i := range o.Active {
		b := browsers[i]
		if b == nil {
			continue
		}
		awg.Go(func() {
			var my, myDelays []time.Duration
			defer func() {
				gapsMu.Lock()
				gaps = append(gaps, my...)
				delays = append(delays, myDelays...)
				gapsMu.Unlock()
			}()
			inSession := 0
			for ctx.Err() == nil && claimed.Add(1) <= int64(o.Turns) {
				if o.SessionTurns > 0 && inSession == o.SessionTurns {
					if err := b.rotate(ctx); err != nil {
						fail(fmt.Errorf("changing sessions: %w", err))
						return
					}
					inSession = 0
				}
				inSession++
				n, err := b.turn(ctx, o, &my, &myDelays)
				deltas.Add(int64(n))
				if err != nil {
					fail(err)
					// Start over in a new session, as a page that reloads.
					if err := b.rotate(ctx); err != nil {
						fail(fmt.Errorf("changing sessions after an error: %w", err))
						return
					}
					inSession = 0
					continue
				}
				if d := done.Add(1); d%int64(o.SampleEvery) == 0 {
					rss, err := procRSS(wc.pid, "VmRSS:")
					if err == nil {
						sampleMu.Lock()
						r.Samples = append(r.Samples, RSSSample{Turns: int(d), RSS: rss, HeapLive: gc.live.Load(), Seconds: time.Since(active).Seconds()})
						sampleMu.Unlock()
					}
				}
			}
		})
	}
	awg.Wait()
	r.ActiveSecs = time.Since(active).Seconds()
	if cpu1, err := procCPU(wc.pid); err == nil {
		r.CPUSeconds = (cpu1.user + cpu1.sys - cpu0.user - cpu0.sys).Seconds()
		r.CPUSysSeconds = (cpu1.sys - cpu0.sys).Seconds()
	}
	r.EndRSS, _ = procRSS(wc.pid, "VmRSS:")
	r.PeakRSS, _ = procRSS(wc.pid, "VmHWM:")
	r.EndHeapLive = gc.live.Load()
	r.Turns = int(done.Load())
	r.Deltas = deltas.Load()
	if r.ActiveSecs > 0 {
		r.TurnsPerSec = float64(r.Turns) / r.ActiveSecs
	}
	if r.Deltas > 0 {
		r.CPUPerDeltaNs = r.CPUSeconds * 1e9 / float64(r.Deltas)
	}
	slices.SortFunc(r.Samples, func(a, b RSSSample) int { return a.Turns - b.Turns })
	r.RSSSlope = slope(r.Samples, func(s RSSSample) int64 { return s.RSS })
	r.HeapSlope = slope(r.Samples, func(s RSSSample) int64 { return s.HeapLive })
	r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs = percentiles(gaps)
	r.Stamped = len(delays)
	r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs = percentiles(delays)
	// Idle streams that ended during the active phase are errors too.
	r.Dropped = int(dropped.Load())
	errMu.Lock()
	r.Errors = errCount
	if firstErr != nil {
		r.FirstError = firstErr.Error()
	}
	errMu.Unlock()
	r.WallSeconds = time.Since(start).Seconds()
	if ctx.Err() != nil && r.Turns < o.Turns {
		return r, fmt.Errorf("loadharness: web chat N=%d timed out after %v with %d turns done", o.N, o.Timeout, r.Turns)
	}
	return r, nil
}

// slope returns the least-squares slope of the samples of the second half
// of the turns (the first half holds the warm-up: the turn logs kept for
// a minute after each turn, the heap growing to its GC goal), in bytes per
// 1,000 turns; 0 with fewer than two of them. of picks the figure.
func slope(s []RSSSample, of func(RSSSample) int64) float64 {
	if len(s) == 0 {
		return 0
	}
	half := s[len(s)-1].Turns / 2
	var sx, sy, sxx, sxy, n float64
	for _, p := range s {
		if p.Turns <= half {
			continue
		}
		x, y := float64(p.Turns)/1000, float64(of(p))
		sx, sy, sxx, sxy, n = sx+x, sy+y, sxx+x*x, sxy+x*y, n+1
	}
	den := n*sxx - sx*sx
	if n < 2 || den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// gcTrace is the web chat's stderr: it keeps the figures of the last
// GODEBUG=gctrace=1 line and passes the other lines to out (nil drops
// them).
type gcTrace struct {
	out          io.Writer
	live, stacks atomic.Int64 // bytes
	partial      []byte       // a line not ended yet; only Write uses it
}

// gcLine matches the figures of a gctrace line: "..., 4->5->2 MB, 5 MB
// goal, 0 MB stacks, ...".
var gcLine = regexp.MustCompile(`^gc \d+ .* \d+->\d+->(\d+) MB, \d+ MB goal, (\d+) MB stacks`)

// Write is called by one goroutine at a time (os/exec copies the pipe).
func (g *gcTrace) Write(p []byte) (int, error) {
	g.partial = append(g.partial, p...)
	for {
		i := bytes.IndexByte(g.partial, '\n')
		if i < 0 {
			break
		}
		line := g.partial[:i+1]
		if m := gcLine.FindSubmatch(line); m != nil {
			live, _ := strconv.ParseInt(string(m[1]), 10, 64)
			stacks, _ := strconv.ParseInt(string(m[2]), 10, 64)
			g.live.Store(live << 20)
			g.stacks.Store(stacks << 20)
		} else if g.out != nil {
			g.out.Write(line) //nolint:errcheck // a log
		}
		g.partial = g.partial[i+1:]
	}
	g.partial = append(g.partial[:0:0], g.partial...)
	return len(p), nil
}

// webchatProc is the web chat running in a child process.
type webchatProc struct {
	cmd  *exec.Cmd
	pid  int
	base string // http://127.0.0.1:port
	done chan struct{}
}

// startWebchat starts the web chat binary with args, on the model at
// modelURL, and returns once it listens.
func startWebchat(bin, modelURL string, args []string, stderr io.Writer) (*webchatProc, error) {
	cmd := exec.Command(bin, args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "OPENAI_") || strings.HasPrefix(kv, "WEBCHAT_TOKEN=") || strings.HasPrefix(kv, "PLANROUND_LOAD_")
	})
	cmd.Env = append(env, "OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=load", "OPENAI_MODEL=load", "GODEBUG=gctrace=1")
	cmd.Stderr = stderr
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the web chat: %w", err)
	}
	w := &webchatProc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	rd := bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "webchat: listening on ")
	if err != nil || !ok || !strings.HasPrefix(rest, "http://127.0.0.1:") {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the web chat printed %q (%v), want its address", line, err)
	}
	w.base = strings.TrimSuffix(rest, "/")
	go func() { io.Copy(io.Discard, rd); close(w.done) }()
	return w, nil
}

// Close stops the web chat (SIGTERM, then SIGKILL after 15 s) and waits
// for it.
func (w *webchatProc) Close() error {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		w.cmd.Process.Kill()
		<-w.done
	}
	return w.cmd.Wait()
}

// browser is one simulated browser: its cookie jar, its session and the
// session's open event stream.
type browser struct {
	c       *http.Client
	base    string
	session string
	stream  *http.Response
	rd      *bufio.Reader
	cancel  context.CancelFunc // ends the stream's request
}

func newBrowser(base string, tr http.RoundTripper) (*browser, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	return &browser{c: &http.Client{Transport: tr, Jar: jar}, base: base}, nil
}

// do sends a request as the page's fetch would (same-origin; JSON bodies
// with the page's Origin) and returns the status and the body.
func (b *browser) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", b.base)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// load does what the page does when it opens: GET / (the owner cookie),
// GET /api/sessions, a new session, and its event stream.
func (b *browser) load(ctx context.Context) error {
	if st, _, err := b.do(ctx, http.MethodGet, "/", ""); err != nil || st != http.StatusOK {
		return fmt.Errorf("GET /: %d %v", st, err)
	}
	u, _ := url.Parse(b.base)
	if len(b.c.Jar.Cookies(u)) == 0 {
		return errors.New("GET / set no owner cookie")
	}
	if st, body, err := b.do(ctx, http.MethodGet, "/api/sessions", ""); err != nil || st != http.StatusOK {
		return fmt.Errorf("GET /api/sessions: %d %s %v", st, body, err)
	}
	return b.open(ctx)
}

// open asks for a new session id and opens its event stream, up to its
// hello event.
func (b *browser) open(ctx context.Context) error {
	st, body, err := b.do(ctx, http.MethodPost, "/api/sessions", "{}")
	if err != nil || st != http.StatusOK {
		return fmt.Errorf("POST /api/sessions: %d %s %v", st, body, err)
	}
	var out struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.SessionID == "" {
		return fmt.Errorf("POST /api/sessions answered %s", body)
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, b.base+"/api/events?session_id="+out.SessionID+"&after=0", nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.c.Do(req)
	if err != nil {
		cancel()
		return fmt.Errorf("GET /api/events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		return fmt.Errorf("GET /api/events: %d %s", resp.StatusCode, msg)
	}
	rd := bufio.NewReaderSize(resp.Body, 2048)
	name, _, err := readEvent(rd)
	if err != nil || name != "hello" {
		resp.Body.Close()
		cancel()
		return fmt.Errorf("GET /api/events: first event %q (%v), want hello", name, err)
	}
	b.session, b.stream, b.rd, b.cancel = out.SessionID, resp, rd, cancel
	return nil
}

// closeStream closes the event stream, if one is open.
func (b *browser) closeStream() {
	if b.stream != nil {
		b.cancel()
		b.stream.Body.Close()
		b.stream, b.rd = nil, nil
	}
}

// rotate opens a new session with its stream, then closes the old stream
// and deletes the old session, as a page that starts a new conversation
// and drops the last one.
func (b *browser) rotate(ctx context.Context) error {
	old, stream, cancel := b.session, b.stream, b.cancel
	if err := b.open(ctx); err != nil {
		return err
	}
	if stream != nil {
		cancel()
		stream.Body.Close()
	}
	st, body, err := b.do(ctx, http.MethodPost, "/api/sessions/delete", `{"session_id":"`+old+`"}`)
	// 404: the session was never stored (no message reached it).
	if err != nil || (st != http.StatusOK && st != http.StatusNotFound) {
		return fmt.Errorf("POST /api/sessions/delete: %d %s %v", st, body, err)
	}
	return nil
}

// drain reads an idle browser's stream until it ends.
func drain(rd *bufio.Reader) error {
	for {
		if _, err := rd.ReadSlice('\n'); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// turnChunk is the part of a chunk's JSON that a turn reads.
type turnChunk struct {
	Kind  string `json:"kind"`
	Round int    `json:"round"`
	Tool  *struct {
		ID              string `json:"id"`
		Name            string `json:"name"`
		State           string `json:"state"`
		ApprovalID      string `json:"approval_id"`
		ArgumentsDigest string `json:"arguments_digest"`
	} `json:"tool"`
}

// textPrefix begins the JSON of a text chunk; its round follows.
var textPrefix = []byte(`{"kind":"text","round":`)

// textField begins the visible text in the JSON of a text chunk.
var textField = []byte(`"text":"`)

// turn sends one message and reads the session's events to the run's
// run_done, answering the approval on the way. It returns the answer's
// text chunks read and appends their gaps over the pace to gaps, and the
// delays since the model server wrote them to delays.
func (b *browser) turn(ctx context.Context, o WebOptions, gaps, delays *[]time.Duration) (int, error) {
	msg := `{"session_id":"` + b.session + `","message":"What is the weather in Oslo?"}`
	st, body, err := b.do(ctx, http.MethodPost, "/api/chat", msg)
	if err != nil || st != http.StatusAccepted {
		return 0, fmt.Errorf("POST /api/chat: %d %s %v", st, bytes.TrimSpace(body), err)
	}
	n, approved := 0, false
	var last time.Time
	for {
		name, data, err := readEvent(b.rd)
		if err != nil {
			return n, fmt.Errorf("reading the events: %w", err)
		}
		switch name {
		case "":
		case "run_done":
			var done struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			}
			json.Unmarshal(data, &done) //nolint:errcheck // checked below
			switch {
			case done.Status != "finished":
				return n, fmt.Errorf("run_done %s", data)
			case !approved:
				return n, errors.New("the run finished without an approval")
			case n != o.Deltas:
				return n, fmt.Errorf("the answer had %d text chunks, want %d", n, o.Deltas)
			}
			return n, nil
		default:
			continue // run_started, and others
		}
		if rest, ok := bytes.CutPrefix(data, textPrefix); ok {
			if len(rest) > 0 && rest[0] != '0' { // round 1 or later: the answer
				now := time.Now()
				if n > 0 {
					*gaps = append(*gaps, now.Sub(last)-o.Pace)
				}
				// The text (not the raw text beside it) carries the stamp.
				if _, txt, ok := bytes.Cut(rest, textField); ok {
					txt, _, _ = bytes.Cut(txt, []byte{'"'})
					stamps(txt, func(sent int64) { *delays = append(*delays, time.Duration(now.UnixNano()-sent)) })
				}
				last = now
				n++
			}
			continue
		}
		var c turnChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return n, fmt.Errorf("a chunk that is not JSON: %s", data)
		}
		if c.Kind == "tool_call" && c.Tool != nil && c.Tool.State == "approval_required" {
			if o.ApprovalDelay > 0 {
				time.Sleep(rand.N(o.ApprovalDelay))
			}
			decision, _ := json.Marshal(map[string]any{"session_id": b.session, "approval_id": c.Tool.ApprovalID,
				"call_id": c.Tool.ID, "tool": c.Tool.Name, "arguments_digest": c.Tool.ArgumentsDigest, "approved": true})
			st, body, err := b.do(ctx, http.MethodPost, "/api/tool-approve", string(decision))
			if err != nil || st != http.StatusOK || !bytes.Contains(body, []byte(`"success":true`)) {
				return n, fmt.Errorf("POST /api/tool-approve: %d %s %v", st, bytes.TrimSpace(body), err)
			}
			approved = true
		}
	}
}

// readEvent reads one Server-Sent Event and returns its name and data
// (comments and ids skipped). data is valid until the next read.
func readEvent(rd *bufio.Reader) (name string, data []byte, err error) {
	var buf []byte
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = rd.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			return "", nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if buf != nil || name != "" {
				return name, buf, nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			buf = append(buf, line[len("data: "):]...)
		}
	}
}

// procRSS returns a size field (VmRSS:, VmHWM:) of /proc/pid/status in
// bytes, or a count field (Threads:) as it is.
func procRSS(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v := strings.TrimSpace(rest)
			kb, isKB := strings.CutSuffix(v, " kB")
			n, err := strconv.ParseInt(kb, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %q: %w", field, rest, err)
			}
			if isKB {
				n *= 1024
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// procFDs counts the open fds of process pid; -1 when it cannot.
func procFDs(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

const webTableHeader = "N\tactive\tstore\tconnected\tconnect\tbase RSS\tRSS connected\tRSS/browser\theap live\tstacks\tfds\tturns\terrors\tdeltas\tRSS samples (turns:RSS/live heap MB)\tRSS, heap slope/1k turns\tpeak RSS\tCPU/delta\tadded p50\tadded p99\tadded max\tdelay p50\tdelay p99\tdelay max\tturns/s\twall"

func webTableRow(r WebReport) string {
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	var samples []string
	for _, s := range r.Samples {
		samples = append(samples, fmt.Sprintf("%d:%.0f/%.0f", s.Turns, mb(s.RSS), mb(s.HeapLive)))
	}
	row := fmt.Sprintf("%d\t%d\t%s\t%d\t%.1f s\t%.1f MB\t%.1f MB\t%.1f KB\t%.0f MB\t%.0f MB\t%d\t%d\t%d\t%d\t%s\t%.2f, %.2f MB\t%.1f MB\t%.1f µs\t%.3f ms\t%.3f ms\t%.1f ms\t%.3f ms\t%.3f ms\t%.1f ms\t%.1f\t%.1f s",
		r.N, r.Active, r.Store, r.Connected, r.ConnectSecs, mb(r.BaseRSS), mb(r.ConnectedRSS), r.RSSPerBrowser/1024, mb(r.HeapLiveConnected), mb(r.StacksConnected), r.FDs,
		r.Turns, r.Errors, r.Deltas, strings.Join(samples, " "), r.RSSSlope/(1<<20), r.HeapSlope/(1<<20), mb(r.PeakRSS), r.CPUPerDeltaNs/1000,
		r.AddedP50Ms, r.AddedP99Ms, r.AddedMaxMs, r.DelayP50Ms, r.DelayP99Ms, r.DelayMaxMs, r.TurnsPerSec, r.WallSeconds)
	if r.FirstError != "" {
		row += "\tfirst error: " + r.FirstError
	}
	return row
}
