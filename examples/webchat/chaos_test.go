package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/historytest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// chaosEffectsEnv names, in the web chat processes of TestWebchatChaos,
// the file its commands append to.
const chaosEffectsEnv = "WEBCHAT_CHAOS_EFFECTS"

// The web chat chaos test's size: chaosSessions sessions of chaosTurns
// turns each, driven by chaosBrowsers browsers at once over chaosReplicas
// web chat processes.
const (
	chaosReplicas  = 3
	chaosBrowsers  = 16
	chaosSessions  = 50
	chaosTurns     = 4
	chaosTurnLimit = 30 * time.Second // one turn, from its message to its call's answer
	chaosSettle    = 30 * time.Second // every session, once the chaos stopped
)

// TestWebchatChaos runs 200 turns over three web chat processes on one
// PostgreSQL schema while a monkey SIGKILLs a random one every 0.5 to 1.5 s
// and restarts it 0.2 to 0.6 s later (one down at a time). Sixteen
// browsers (a cookie jar each, used on every replica) drive 50 sessions of
// four turns: each message ("Please run `echo KEY >> $FILE && sleep 0.2 &&
// echo effect done for KEY`", which the demo model turns into a
// run_command call that needs approval; the pause lets kills land while
// the tool runs) goes to a random live replica, the card is read from the
// session's event stream on a random replica (a stream opened without
// after lists the approvals that wait, then the live events; another
// replica when it breaks), and the decision (approve four times in five)
// goes to a random replica. A turn that died before its call was recorded
// (killed while the model streamed: no run in progress once the sweeper
// ended it, no open call) is asked again with the same message.
//
// Then every session must settle (no open call, no pending approval, no
// run) and it checks: decisions lost (an approved call that neither ran
// nor was reported stopped by a kill while it ran, a rejected call that
// ran or was answered otherwise, a decision taken on an approval no run
// waited for), tools run twice (lines per key in the effects file),
// invalid histories (GET /api/history: no open call, every call answered
// by exactly one tool message right after its assistant message, no stray
// tool message), sessions left pending and turns unanswered: all must be
// 0. It logs a one-line report with where a turn's time went.
//
// It takes 75 to 115 s under -race on a loaded two-core machine, so it
// runs only with PLANROUND_CHAOS=1; it needs PostgreSQL
// (PLANROUND_POSTGRES_URL, skipped without one).
func TestWebchatChaos(t *testing.T) {
	if os.Getenv("PLANROUND_CHAOS") != "1" {
		t.Skip("the web chat chaos test runs with PLANROUND_CHAOS=1")
	}
	var clients []*http.Client
	leaktest.Check(t, func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	})
	url := postgresURL(t)
	schema := freshSchema(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	// The test reads what the replicas share, to check it: the same
	// schema, opened before them (its migration).
	store, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
	require.NoError(t, err)
	t.Cleanup(store.Close)
	effects := filepath.Join(t.TempDir(), "effects")

	c := &chaosRun{
		t:       t,
		store:   store,
		effects: effects,
		args:    []string{"-postgres", url, "-postgres-schema", schema, "-lease-ttl", "2s", "-sweep-interval", "300ms"},
		slots:   make([]*child, chaosReplicas),
	}
	t.Cleanup(c.killAll)
	for i := range c.slots {
		r, err := c.launch()
		require.NoError(t, err)
		c.slots[i] = r
	}
	browsers := make([]*http.Client, chaosBrowsers)
	for i := range browsers {
		browsers[i] = c.browser(t)
		clients = append(clients, browsers[i])
	}
	sessions := make([]string, chaosSessions)
	for s := range sessions {
		sessions[s] = postSession(t, browsers[s%chaosBrowsers], c.pick().url)
	}

	monkeyDone := make(chan struct{})
	stopMonkey := make(chan struct{})
	go func() {
		defer close(monkeyDone)
		c.monkey(stopMonkey)
	}()

	start := time.Now()
	results := make(chan chaosOutcome, chaosSessions*chaosTurns)
	var wg sync.WaitGroup
	for b, client := range browsers {
		wg.Go(func() {
			for s := b; s < chaosSessions; s += chaosBrowsers {
				for k := range chaosTurns {
					key := fmt.Sprintf("s%02dt%d", s, k)
					results <- c.turn(ctx, client, sessions[s], key)
				}
			}
		})
	}
	wg.Wait()
	chaosTime := time.Since(start)
	if ctx.Err() != nil {
		t.Errorf("the turns were not done within the test's bound (%v): the checks below fail for want of time", chaosTime.Round(time.Second))
	}
	close(stopMonkey)
	<-monkeyDone
	close(results)
	if err := c.restartDown(); err != nil {
		t.Fatal(err)
	}

	report := chaosReport{kills: c.kills, took: chaosTime}
	outcomes := map[string][]chaosOutcome{}
	for o := range results {
		outcomes[o.session] = append(outcomes[o.session], o)
		report.turns++
		report.asked += o.asked
		report.adopted += o.adopted
		report.sending = append(report.sending, o.sending)
		report.watching = append(report.watching, o.watching)
		report.answering = append(report.answering, o.answering)
		if len(o.orphaned) > 0 {
			report.orphaned += len(o.orphaned)
			t.Errorf("%s: decided approvals %v of call %s, which no run waited for; the run waited for %s", o.key, o.orphaned, o.callID, o.approvalID)
		}
	}
	runs := map[string]int{}
	for _, key := range readChaosEffects(t, effects) {
		runs[key]++
	}
	settleBy := time.Now().Add(chaosSettle)
	for s, session := range sessions {
		settled, err := chaosWithin(ctx, time.Until(settleBy), func() (bool, error) { return c.settled(ctx, browsers[s%chaosBrowsers], session) })
		if !settled {
			report.pending++
			t.Errorf("%s: still has open calls, pending approvals or a run %v after the chaos (%v)\n%s", session, chaosSettle, err, c.describe(ctx, session))
		}
		msgs, err := c.history(ctx, browsers[s%chaosBrowsers], session)
		if err != nil {
			report.invalid++
			report.unanswered += len(outcomes[session])
			t.Errorf("%s: %v (its %d turns count as unanswered)", session, err, len(outcomes[session]))
			continue
		}
		if err := historytest.Check(msgs); err != nil {
			report.invalid++
			t.Errorf("%s: invalid history: %v\n%s", session, err, chaosDump(msgs))
		}
		for _, o := range outcomes[session] {
			report.count(t, o, msgs, runs[o.key])
		}
	}
	for key, n := range runs {
		if n > 1 {
			report.twice++
			t.Errorf("%s: the tool ran %d times", key, n)
		}
	}
	t.Logf("webchat chaos: %s", report)
	if report.failures() > 0 {
		t.Errorf("webchat chaos: want 0 decisions lost, tools run twice, invalid histories, sessions left pending and turns unanswered")
	}
}

// chaosRun holds the web chat processes of TestWebchatChaos, which its
// monkey kills and restarts.
type chaosRun struct {
	t     *testing.T
	store *pgstore.Store // the replicas' schema, read to check what they share
	args  []string       // every replica's arguments
	// effects is the file the tool's commands append a line to, named by
	// the replicas' environment variable chaosEffectsEnv.
	effects string

	mu    sync.Mutex // guards slots, all, down, dead and kills
	slots []*child
	all   []*child // every process started, killed by killAll
	down  int      // the slot the monkey killed, while dead
	dead  bool     // a replica is down (one at most)
	kills int
}

// launch starts a web chat process with c.args, like startChild, and
// waits until it listens; it may be called from any goroutine.
func (c *chaosRun) launch() (*child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OPENAI_") || k == childArgsEnv || k == chaosEffectsEnv {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, childArgsEnv+"="+mustString(append([]string{"-addr", "127.0.0.1:0"}, c.args...)), chaosEffectsEnv+"="+c.effects)
	r := &child{cmd: cmd, stderr: new(syncBuffer), exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.all = append(c.all, r)
	c.mu.Unlock()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "webchat: listening on "); ok {
				listening <- strings.TrimSuffix(u, "/")
			}
		}
		r.err = cmd.Wait()
		close(r.exited)
	}()
	select {
	case r.url = <-listening:
		return r, nil
	case <-r.exited:
		return nil, fmt.Errorf("a web chat ended before it listened: %v\n%s", r.err, r.stderr)
	case <-time.After(waitLimit):
		kill(r)
		return nil, fmt.Errorf("a web chat did not listen within %v\n%s", waitLimit, r.stderr)
	}
}

// kill SIGKILLs a process and waits until it was waited for.
func kill(r *child) {
	select {
	case <-r.exited:
	default:
		r.cmd.Process.Kill() //nolint:errcheck // it may end by itself meanwhile
		<-r.exited
	}
}

// killAll kills every process the test started.
func (c *chaosRun) killAll() {
	c.mu.Lock()
	all := c.all
	c.mu.Unlock()
	for _, r := range all {
		kill(r)
	}
}

// browser returns a client with a cookie jar of its own that loaded the
// page of a replica, and so holds an owner cookie, which every replica
// accepts.
func (c *chaosRun) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}, Jar: jar}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(c.pick().url + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return client
}

// pick returns a random replica that is up.
func (c *chaosRun) pick() *child {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		i := rand.IntN(len(c.slots))
		if !c.dead || i != c.down {
			return c.slots[i]
		}
	}
}

// monkey kills a random replica every 0.5 to 1.5 s and restarts it 0.2 to
// 0.6 s later, until stop is closed.
func (c *chaosRun) monkey(stop <-chan struct{}) {
	pause := func(lo, hi time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(lo + rand.N(hi-lo)):
			return true
		}
	}
	for pause(500*time.Millisecond, 1500*time.Millisecond) {
		i := rand.IntN(len(c.slots))
		c.mu.Lock()
		r := c.slots[i]
		c.down, c.dead = i, true
		c.kills++
		c.mu.Unlock()
		kill(r)
		pause(200*time.Millisecond, 600*time.Millisecond)
		if err := c.restart(i); err != nil {
			c.t.Error(err)
			return
		}
	}
}

// restart starts the replica of slot i again.
func (c *chaosRun) restart(i int) error {
	r, err := c.launch()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.slots[i], c.dead = r, false
	c.mu.Unlock()
	return nil
}

// restartDown restarts the replica the monkey left down, if any.
func (c *chaosRun) restartDown() error {
	c.mu.Lock()
	dead, i := c.dead, c.down
	c.mu.Unlock()
	if dead {
		return c.restart(i)
	}
	return nil
}

// chaosOutcome is what a browser saw of one turn.
type chaosOutcome struct {
	session, key string
	callID       string
	approvalID   string
	approved     bool     // the decision posted
	asked        int      // messages sent for the turn (again when it died before its call)
	adopted      int      // cards read from a stream's list of waiting approvals, not live
	orphaned     []string // approvals decided that no run waited for
	err          error

	// Where the turn's time went: sending its messages (409 while the
	// previous turn ends), waiting for its card, and from the decision
	// to its call's answer.
	sending, watching, answering time.Duration
}

// chaosCard is an approval_required chunk's call, and whether it came
// from a stream's list of waiting approvals (no SSE id) rather than live.
type chaosCard struct {
	callID, approvalID string
	listed             bool
}

// turn runs one turn: sends its message (again when the turn died before
// its call was recorded), decides its card, and waits for its call's
// tool message.
func (c *chaosRun) turn(ctx context.Context, client *http.Client, session, key string) (o chaosOutcome) {
	o = chaosOutcome{session: session, key: key}
	// The pause gives the monkey a chance to kill a replica while the
	// tool runs: the call is then reported stopped, never run again.
	// The effects file's name comes from the replicas' environment, which
	// keeps the message, and so the text the demo model streams, short.
	message := fmt.Sprintf("Please run `echo %s >> $%s && sleep 0.2 && echo effect done for %s`", key, chaosEffectsEnv, key)
	deadline := time.Now().Add(chaosTurnLimit)
	var card chaosCard
	for card.approvalID == "" && time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		if err := c.send(ctx, client, session, message, deadline); err != nil {
			o.err = err
			return o
		}
		o.asked++
		t1 := time.Now()
		// A turn that died before its call was recorded is asked again.
		card, _ = c.watch(ctx, client, session, key, deadline)
		o.sending += t1.Sub(t0)
		o.watching += time.Since(t1)
	}
	if card.approvalID == "" {
		o.err = fmt.Errorf("no card in %v (%d messages sent)\n%s", chaosTurnLimit, o.asked, c.describe(ctx, session))
		return o
	}
	o.callID, o.approvalID = card.callID, card.approvalID
	if card.listed {
		o.adopted++
	}
	o.approved = rand.IntN(5) != 0
	decided := time.Now()
	defer func() { o.answering = time.Since(decided) }()
	if o.err = c.decide(ctx, client, session, o.approvalID, o.approved); o.err != nil {
		return o
	}
	// The turn goes on wherever it can; the browser moves on once the call
	// has its tool message (its next message would move the call on). A
	// call still unanswered a few seconds after its decision may wait for
	// another approval: one a resumed run asked for because the run that
	// asked first was killed before it recorded its approval id. Deciding
	// an approval no run waits for is a decision lost: it is counted, and
	// the other one decided, as a person who sees its card would.
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ok, _ := chaosWithin(ctx, 3*time.Second, func() (bool, error) { return c.answered(ctx, session, o.callID) }); ok {
			return o
		}
		a, found := c.pendingFor(ctx, session, key)
		if !found || a.ID == o.approvalID || a.CallID != o.callID {
			continue
		}
		o.orphaned = append(o.orphaned, o.approvalID)
		o.approvalID = a.ID
		if o.err = c.decide(ctx, client, session, a.ID, o.approved); o.err != nil {
			return o
		}
	}
	o.err = fmt.Errorf("call %s not answered by %v after its message; approval %s decided (approved %v)\n%s",
		o.callID, chaosTurnLimit, o.approvalID, o.approved, c.describe(ctx, session))
	return o
}

// send posts the message to random replicas until one takes it (202) or
// the connection broke (the replica may have taken it: watch tells). A
// session busy with its previous turn's end, or whose run a killed replica
// held until its lease expires, answers 409: it is tried again.
func (c *chaosRun) send(ctx context.Context, client *http.Client, session, message string, deadline time.Time) error {
	body := mustString(map[string]string{"session_id": session, "message": message})
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		status, out, err := chaosPost(ctx, client, c.pick().url+"/api/chat", body)
		switch {
		case err != nil:
			return nil // maybe taken
		case status == http.StatusAccepted:
			return nil
		case status == http.StatusConflict, status == http.StatusTooManyRequests, status >= 500:
			last = fmt.Sprintf("%d %s", status, out)
			chaosSleep(ctx, 100*time.Millisecond)
		default:
			return fmt.Errorf("POST /api/chat: %d %s", status, out)
		}
	}
	return fmt.Errorf("POST /api/chat not taken by %v (last answer %s)", chaosTurnLimit, last)
}

// watch follows the session's event stream, on a random replica (another
// one when it breaks), until the card of key shows: an approval_required
// chunk of a call whose command names key, live or in the list of waiting
// approvals a stream opened without after begins with. It reports dead
// when the turn can no longer show one: no run in progress, and no open
// call (its message was lost, or the run died before it recorded its
// call): the message must be sent again.
func (c *chaosRun) watch(ctx context.Context, client *http.Client, session, key string, deadline time.Time) (card chaosCard, dead bool) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r := c.pick()
		sctx, cancel := context.WithDeadline(ctx, deadline)
		ev, err := chaosEvents(sctx, client, r.url, session)
		if err != nil {
			cancel()
			chaosSleep(ctx, 100*time.Millisecond)
			continue
		}
		card, dead = c.follow(ctx, client, ev, session, key, deadline)
		ev.close()
		cancel()
		if card.approvalID != "" || dead {
			return card, dead
		}
	}
	return chaosCard{}, false
}

// follow reads an open stream until the card of key, the stream's end,
// or the deadline. On run_done, and on every second of silence, it asks
// whether the turn died.
func (c *chaosRun) follow(ctx context.Context, client *http.Client, ev *events, session, key string, deadline time.Time) (card chaosCard, dead bool) {
	for time.Now().Before(deadline) {
		select {
		case e, ok := <-ev.ch:
			if !ok {
				return chaosCard{}, false
			}
			if e.name == "run_done" {
				if c.died(ctx, client, session) {
					return chaosCard{}, true
				}
				continue
			}
			if e.name != "" {
				continue
			}
			var ch agent.Chunk
			if json.Unmarshal([]byte(e.data), &ch) != nil || ch.Kind != agent.KindToolCall || ch.Tool == nil || ch.Tool.State != agent.StateApprovalRequired {
				continue
			}
			if chaosCommandKey(ch.Tool.Arguments) == key {
				return chaosCard{callID: ch.Tool.ID, approvalID: ch.Tool.ApprovalID, listed: e.id == ""}, false
			}
		case <-time.After(time.Second):
			if c.died(ctx, client, session) {
				return chaosCard{}, true
			}
		case <-ctx.Done():
			return chaosCard{}, false
		}
	}
	return chaosCard{}, false
}

// died reports whether the session has no run in progress (its turn log,
// read through a replica) and no open call (the store): a turn sent and
// not yet decided that is in that state died before it recorded its call.
func (c *chaosRun) died(ctx context.Context, client *http.Client, session string) bool {
	calls, err := c.store.OpenCalls(ctx, session)
	if err != nil && !errors.Is(err, memory.ErrNotFound) || len(calls) > 0 {
		return false
	}
	running, err := c.running(ctx, client, session)
	if err != nil || running {
		return false
	}
	// Read again: a call recorded meanwhile by a run that ended since.
	calls, err = c.store.OpenCalls(ctx, session)
	return (err == nil || errors.Is(err, memory.ErrNotFound)) && len(calls) == 0
}

// running reports whether a replica says a run is in progress in the
// session (GET /api/history's X-Session-Running).
func (c *chaosRun) running(ctx context.Context, client *http.Client, session string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.pick().url+"/api/history?session_id="+session, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the header counts
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET /api/history: %d", resp.StatusCode)
	}
	return resp.Header.Get(headerRunning) == "true", nil
}

// decide posts a decision to random replicas until one takes it. An
// answer "no longer pending" after a POST whose answer was lost is fine
// when the store holds this decision.
func (c *chaosRun) decide(ctx context.Context, client *http.Client, session, approvalID string, approved bool) error {
	// Bound to the call the approval shows, as the page's card is.
	a, err := c.store.GetApproval(ctx, approvalID)
	if err != nil {
		return fmt.Errorf("reading approval %s: %w", approvalID, err)
	}
	body := mustString(map[string]any{"session_id": session, "approval_id": approvalID, "call_id": a.CallID,
		"tool": a.Tool, "arguments_digest": a.Digest, "approved": approved})
	broken := false
	for range 50 {
		if ctx.Err() != nil {
			break
		}
		status, out, err := chaosPost(ctx, client, c.pick().url+"/api/tool-approve", body)
		switch {
		case err != nil || status >= 500:
			broken = true
			chaosSleep(ctx, 100*time.Millisecond)
			continue
		case status == http.StatusOK && out["success"] == true:
			return nil
		case status == http.StatusOK && broken:
			a, err := c.store.GetApproval(ctx, approvalID)
			if err == nil && a.Decided && a.Decision.Approved == approved {
				return nil
			}
			return fmt.Errorf("decision on %s refused after a lost answer: %v; the store holds %+v (%v)", approvalID, out, a, err)
		}
		return fmt.Errorf("decision on %s refused: %d %v", approvalID, status, out)
	}
	return fmt.Errorf("the decision on %s could not be posted", approvalID)
}

// answered reports whether the session's stored messages answer callID.
func (c *chaosRun) answered(ctx context.Context, session, callID string) (bool, error) {
	msgs, err := c.store.Messages(ctx, session, true)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Role == memory.RoleTool && m.ToolCallID == callID {
			return true, nil
		}
	}
	return false, nil
}

// pendingFor returns the session's pending approval of the call for key,
// if there is one.
func (c *chaosRun) pendingFor(ctx context.Context, session, key string) (memory.Approval, bool) {
	pending, err := c.store.PendingApprovals(ctx, session)
	if err != nil {
		return memory.Approval{}, false
	}
	for _, a := range pending {
		if chaosCommandKey(a.Arguments) == key {
			return a, true
		}
	}
	return memory.Approval{}, false
}

// settled reports whether the session has no open call, no pending
// approval and no run in progress.
func (c *chaosRun) settled(ctx context.Context, client *http.Client, session string) (bool, error) {
	calls, err := c.store.OpenCalls(ctx, session)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return false, err
	}
	pending, err := c.store.PendingApprovals(ctx, session)
	if err != nil {
		return false, err
	}
	if len(calls) > 0 || len(pending) > 0 {
		return false, fmt.Errorf("%d open calls, %d pending approvals", len(calls), len(pending))
	}
	running, err := c.running(ctx, client, session)
	if err == nil && running {
		err = errors.New("a run in progress")
	}
	return err == nil, err
}

// history reads the session's history from a replica (GET /api/history),
// as a page does; open calls in it are an error.
func (c *chaosRun) history(ctx context.Context, client *http.Client, session string) ([]memory.Message, error) {
	var err error
	for range 20 {
		var hist []historyEntry
		if hist, err = chaosGetHistory(ctx, client, c.pick().url, session); err == nil {
			msgs := make([]memory.Message, len(hist))
			for i, e := range hist {
				if len(e.OpenCalls) > 0 {
					return nil, fmt.Errorf("GET /api/history: message %d has open calls %+v", e.ID, e.OpenCalls)
				}
				msgs[i] = e.Message
			}
			return msgs, nil
		}
		chaosSleep(ctx, 100*time.Millisecond)
	}
	return nil, err
}

// describe returns what the store holds of a session, for a failure
// message.
func (c *chaosRun) describe(ctx context.Context, session string) string {
	var b strings.Builder
	calls, err := c.store.OpenCalls(ctx, session)
	if err != nil {
		fmt.Fprintf(&b, "  open calls: %v\n", err)
	}
	for _, oc := range calls {
		fmt.Fprintf(&b, "  open call %+v\n", oc)
		if oc.ApprovalID != "" {
			a, err := c.store.GetApproval(ctx, oc.ApprovalID)
			fmt.Fprintf(&b, "    approval %+v %v\n", a, err)
		}
	}
	pending, err := c.store.PendingApprovals(ctx, session)
	for _, a := range pending {
		fmt.Fprintf(&b, "  pending approval %+v\n", a)
	}
	if err != nil {
		fmt.Fprintf(&b, "  pending approvals: %v\n", err)
	}
	if msgs, err := c.store.Messages(ctx, session, true); err == nil {
		b.WriteString(chaosDump(msgs))
	}
	return b.String()
}

// chaosReport counts what TestWebchatChaos found.
type chaosReport struct {
	turns, asked, kills, adopted  int
	took                          time.Duration // the turns, from the first message to the last answer
	sending, watching, answering  []time.Duration
	orphaned                      int
	ran, stopped, rejected        int
	lost, twice, invalid, pending int
	unanswered                    int
}

func (r chaosReport) String() string {
	return fmt.Sprintf("%d turns in %.0f s (%d messages sent, %d kills, %d cards read from the waiting list): %d ran, %d stopped by a kill while executing, %d rejected; "+
		"decisions lost %d (on approvals no run waited for %d), tools run twice %d, invalid histories %d, sessions left pending %d, turns unanswered %d; "+
		"per turn p50/p99: sending %v/%v, to the card %v/%v, decision to answer %v/%v",
		r.turns, r.took.Seconds(), r.asked, r.kills, r.adopted, r.ran, r.stopped, r.rejected, r.lost+r.orphaned, r.orphaned, r.twice, r.invalid, r.pending, r.unanswered,
		chaosQuantile(r.sending, 0.5), chaosQuantile(r.sending, 0.99),
		chaosQuantile(r.watching, 0.5), chaosQuantile(r.watching, 0.99),
		chaosQuantile(r.answering, 0.5), chaosQuantile(r.answering, 0.99))
}

// chaosQuantile returns the q quantile of ds, to the millisecond.
func chaosQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))].Round(time.Millisecond)
}

func (r chaosReport) failures() int {
	return r.lost + r.orphaned + r.twice + r.invalid + r.pending + r.unanswered
}

// count checks one turn's outcome against its session's final history and
// the executions of its key.
func (r *chaosReport) count(t *testing.T, o chaosOutcome, msgs []memory.Message, runs int) {
	t.Helper()
	if o.err != nil {
		r.unanswered++
		t.Errorf("%s: %v", o.key, o.err)
		return
	}
	var answer *memory.Message
	for i := range msgs {
		if msgs[i].Role == memory.RoleTool && msgs[i].ToolCallID == o.callID {
			answer = &msgs[i]
		}
	}
	switch {
	case answer == nil:
		r.lost++
		t.Errorf("%s: call %s has no tool message after its decision", o.key, o.callID)
	case !o.approved && runs > 0:
		r.lost++
		t.Errorf("%s: rejected, yet the tool ran", o.key)
	case !o.approved && strings.Contains(answer.Content, agent.CauseUser.DefaultReason()):
		r.rejected++
	case !o.approved:
		r.lost++
		t.Errorf("%s: rejected, and the call was answered %q", o.key, answer.Content)
	case runs == 1 && strings.Contains(answer.Content, "effect done for "+o.key):
		r.ran++
	case runs <= 1 && strings.Contains(answer.Content, agent.CauseStopped.DefaultReason()):
		r.stopped++ // approved, then killed while executing: never run again
	default:
		r.lost++
		t.Errorf("%s: approved, the tool ran %d times and the call was answered %q", o.key, runs, answer.Content)
	}
}

// chaosCommandKey returns the key of a run_command call's arguments: the
// word after "echo" in its command.
func chaosCommandKey(args json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	rest, ok := strings.CutPrefix(a.Command, "echo ")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, " ")
	return key
}

// readChaosEffects returns the keys written to the effects file, one per
// run of the tool.
func readChaosEffects(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

func chaosDump(msgs []memory.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "  %d %s %q", m.ID, m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " call %s %s %s", tc.ID, tc.Name, tc.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " answers %s", m.ToolCallID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// chaosPost posts a JSON body and decodes the JSON answer; err is set when
// no answer came (a killed replica).
func chaosPost(ctx context.Context, client *http.Client, u, body string) (int, map[string]any, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, nil, fmt.Errorf("POST %s: the answer (%d) is not JSON: %w", u, resp.StatusCode, err)
	}
	return resp.StatusCode, out, nil
}

// chaosGetHistory reads GET /api/history of the session on the replica at
// base.
func chaosGetHistory(ctx context.Context, client *http.Client, base, session string) ([]historyEntry, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/api/history?session_id="+session, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /api/history: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var hist []historyEntry
	if err := json.NewDecoder(resp.Body).Decode(&hist); err != nil {
		return nil, fmt.Errorf("GET /api/history: %w", err)
	}
	return hist, nil
}

// chaosEvents opens the session's event stream on the replica at base,
// without after: it begins with hello and the approvals that wait. ctx
// ending closes it.
func chaosEvents(ctx context.Context, client *http.Client, base, session string) (*events, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events?session_id="+session, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /api/events: %d", resp.StatusCode)
	}
	ev := &events{body: resp.Body, ch: make(chan sseEvent, 10000), done: make(chan struct{})}
	go ev.read(resp.Body)
	return ev, nil
}

// chaosWithin calls cond every 100 ms until it holds, for at most d: for
// state that lives in the replicas' database and has no signal to wait
// for.
func chaosWithin(ctx context.Context, d time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if ok {
			return true, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, err
		}
		chaosSleep(ctx, 100*time.Millisecond)
	}
}

func chaosSleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
