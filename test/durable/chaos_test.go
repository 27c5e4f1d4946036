package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/historytest"
	"github.com/planround/planround/memory"
)

// The chaos test's size: chaosSessions sessions of chaosTurnsPerSession
// turns each, driven by chaosWorkers at once over chaosReplicas replicas.
const (
	chaosReplicas        = 3
	chaosWorkers         = 4
	chaosSessions        = 50
	chaosTurnsPerSession = 4
)

// TestChaos runs 200 turns over three replicas on one PostgreSQL schema
// (no lease holder named anywhere: the runners name themselves) while a
// monkey SIGKILLs a random replica about every second and restarts it.
// Each turn is asked of a random replica (again elsewhere when its stream
// breaks before the approval_required chunk), and its decision is posted
// to a random replica (approve four times in five), or, one turn in eight,
// an interrupt instead. Then it checks every session: decisions lost,
// tools run twice, interrupted calls that ran, invalid histories and turns
// left pending must all be zero.
//
// It runs when PLANROUND_CHAOS=1 or PLANROUND_REQUIRE_ALL=1. A decision
// taken on an approval that no run waited for (the kill of
// TestKillBetweenApprovalAndRecord) counts as lost.
func TestChaos(t *testing.T) {
	if os.Getenv("PLANROUND_CHAOS") != "1" && os.Getenv("PLANROUND_REQUIRE_ALL") != "1" {
		t.Skip("the chaos test runs with PLANROUND_CHAOS=1 (or PLANROUND_REQUIRE_ALL=1)")
	}
	checkLeaks(t)
	db := postgresBackend(t)
	effects := filepath.Join(t.TempDir(), "effects")
	ctx := testContext(t, 5*time.Minute)

	c := &chaos{t: t, slots: make([]*replica, chaosReplicas)}
	for i := range c.slots {
		holder := fmt.Sprintf("R%d", i)
		c.slots[i] = startReplica(t, holder, append([]string{"-holder", holder, "-lease-ttl", "2s", "-effects", effects}, db.args...)...)
	}

	monkeyDone := make(chan struct{})
	stopMonkey := make(chan struct{})
	go func() {
		defer close(monkeyDone)
		c.monkey(stopMonkey)
	}()

	jobs := make(chan int)
	results := make(chan turnOutcome, chaosSessions*chaosTurnsPerSession)
	var wg sync.WaitGroup
	for range chaosWorkers {
		wg.Go(func() {
			for s := range jobs {
				session := fmt.Sprintf("c%d", s)
				for k := range chaosTurnsPerSession {
					results <- c.turn(ctx, session, fmt.Sprintf("%s-t%d", session, k))
				}
			}
		})
	}
	for s := range chaosSessions {
		jobs <- s
	}
	close(jobs)
	wg.Wait()
	close(stopMonkey)
	<-monkeyDone
	close(results)
	if err := c.restartAll(); err != nil {
		t.Fatal(err)
	}

	// Every session settles (no open call, no pending approval) with all
	// replicas up; then every history, decision and execution is checked.
	var report chaosReport
	report.kills = c.kills
	outcomes := map[string][]turnOutcome{}
	for o := range results {
		outcomes[o.session] = append(outcomes[o.session], o)
		report.turns++
		report.attempts += o.attempts
		if o.adopted {
			report.adopted++
		}
		if len(o.orphaned) > 0 {
			report.orphaned += len(o.orphaned)
			t.Errorf("%s: decided approvals %v of call %s, which no run waited for; the run waited for %s", o.key, o.orphaned, o.callID, o.approvalID)
		}
	}
	lines := readEffects(t, effects)
	runs := map[string]int{}
	for _, e := range lines {
		runs[e.Key]++
	}
	for s := range chaosSessions {
		session := fmt.Sprintf("c%d", s)
		settled, err := within(ctx, 30*time.Second, func() (bool, error) { return c.settled(ctx, session) })
		if !settled {
			report.pending++
			t.Errorf("%s: still has open calls or pending approvals 30s after the chaos (%v)\n%s", session, err, c.describe(ctx, session))
		}
		msgs, err := c.history(ctx, session)
		if err != nil {
			t.Errorf("%s: %v", session, err)
			continue
		}
		if err := historytest.Check(msgs); err != nil {
			report.invalid++
			t.Errorf("%s: invalid history: %v\n%s", session, err, dump(msgs))
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
	t.Logf("chaos: %s", report)
	failures := report.lost + report.twice + report.invalid + report.pending + report.unanswered + report.orphaned
	if failures > 0 {
		t.Errorf("chaos: want 0 decisions lost, tools run twice, invalid histories, sessions left pending and turns unanswered")
	}
}

// chaos holds the replicas of TestChaos, which its monkey kills and
// restarts.
type chaos struct {
	t     *testing.T
	mu    sync.Mutex // guards slots, down, dead and kills
	slots []*replica
	down  int  // the slot of the replica the monkey killed, when dead
	dead  bool // a replica is down (one at most)
	kills int
}

// pick returns a random replica that is up.
func (c *chaos) pick() *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		i := rand.IntN(len(c.slots))
		if !c.dead || i != c.down {
			return c.slots[i]
		}
	}
}

// monkey kills a random replica every 0.3 to 0.9 s and restarts it 0.2 to
// 0.6 s later, until stop is closed.
func (c *chaos) monkey(stop <-chan struct{}) {
	pause := func(lo, hi time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(lo + rand.N(hi-lo)):
			return true
		}
	}
	for pause(300*time.Millisecond, 900*time.Millisecond) {
		i := rand.IntN(len(c.slots))
		c.mu.Lock()
		r := c.slots[i]
		c.down, c.dead = i, true
		c.kills++
		c.mu.Unlock()
		r.kill()
		pause(200*time.Millisecond, 600*time.Millisecond)
		if err := c.restart(i); err != nil {
			c.t.Error(err)
			return
		}
	}
}

// restart starts the replica of slot i again, with the same arguments.
func (c *chaos) restart(i int) error {
	c.mu.Lock()
	old := c.slots[i]
	c.mu.Unlock()
	r, err := launch(c.t, old.name, old.args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.slots[i], c.dead = r, false
	c.mu.Unlock()
	return nil
}

// restartAll restarts a replica the monkey left down.
func (c *chaos) restartAll() error {
	c.mu.Lock()
	dead, i := c.dead, c.down
	c.mu.Unlock()
	if dead {
		return c.restart(i)
	}
	return nil
}

// turnOutcome is what a worker saw of one turn.
type turnOutcome struct {
	session, key string
	callID       string
	approvalID   string
	pending      decision // the approval's binding (call id, tool, digest), as the card showed it
	decided      bool     // a decision was taken (by this worker's POST)
	interrupted  bool     // the worker interrupted the turn instead of deciding
	approved     bool     // ... and it was an approval
	attempts     int      // turns asked until one showed approval_required
	adopted      bool     // the approval was found in the store, not on a stream
	orphaned     []string // approvals decided that no run waited for
	err          error
}

// turn runs one turn of the chaos: asks it (again, when the stream breaks
// before the approval), decides it, and waits for its call to be answered.
func (c *chaos) turn(ctx context.Context, session, key string) turnOutcome {
	o := turnOutcome{session: session, key: key}
	// Bounded by time more than by count: after a kill the session stays
	// busy until the dead replica's lease (2 s) expires, and on a loaded
	// machine 20 quick refusals came before that.
	until := time.Now().Add(15 * time.Second)
	for o.attempts < 200 && time.Now().Before(until) && ctx.Err() == nil {
		o.attempts++
		r := c.pick()
		s, err := r.startTurn(ctx, c.t, session, key)
		if err != nil {
			sleep(ctx, 100*time.Millisecond) // a dead replica, or the session still busy
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		e, err := s.find(wctx, func(e event) bool { return e.End || isState(agent.StateApprovalRequired)(e) })
		cancel()
		s.close()
		if err == nil && !e.End {
			o.callID, o.approvalID = e.tool().ID, e.tool().ApprovalID
			o.pending = decisionFor(session, e.tool(), false)
			break
		}
		// The replica was killed, or another drives the session: maybe a
		// replica resumed this turn (killed before its approval was
		// asked) and waits for a decision that no stream showed. A front
		// end finds it in the store's pending approvals, as this does.
		if a, ok := c.pendingFor(ctx, session, key); ok {
			o.callID, o.approvalID, o.adopted = a.CallID, a.ID, true
			o.pending = decisionOn(a, false)
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	if o.approvalID == "" {
		o.err = fmt.Errorf("no approval_required in %d attempts over 15s", o.attempts)
		return o
	}
	if rand.IntN(8) == 0 {
		// The user interrupts instead of deciding, on any replica.
		o.interrupted = true
		if o.err = c.interrupt(ctx, session); o.err != nil {
			return o
		}
	} else {
		o.approved = rand.IntN(5) != 0
		if o.err = c.decide(ctx, o.pending, o.approved); o.err != nil {
			return o
		}
		o.decided = true
	}
	// The turn goes on wherever it can; the worker moves on once the call
	// has its tool message, so the session's next turn does not move it
	// on. A call still unanswered a few seconds after its decision may wait
	// for another approval: one a resumed run asked for because the run
	// that asked first was killed before it recorded its approval id.
	// Deciding the approval a run does not wait for is a decision lost:
	// the worker counts it, and decides the other one as a person who
	// sees its card would.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := within(ctx, 3*time.Second, func() (bool, error) { return c.answered(ctx, session, o.callID) }); ok {
			return o
		}
		a, found := c.pendingFor(ctx, session, key)
		if !found || a.ID == o.approvalID || a.CallID != o.callID {
			continue
		}
		if o.interrupted {
			// Asked again by a resumed run after the interrupt came (a
			// kill before the run took it): the user, who interrupted,
			// rejects it.
			o.approvalID, o.pending = a.ID, decisionOn(a, false)
			if o.err = c.decide(ctx, o.pending, false); o.err != nil {
				return o
			}
			continue
		}
		o.orphaned = append(o.orphaned, o.approvalID)
		o.approvalID, o.pending = a.ID, decisionOn(a, false)
		if o.err = c.decide(ctx, o.pending, o.approved); o.err != nil {
			return o
		}
	}
	o.err = fmt.Errorf("call %s not answered 30s after the decision of approval %s (found in the store: %v)\n%s",
		o.callID, o.approvalID, o.adopted, c.describe(ctx, session))
	return o
}

// decide posts the decision approved on the approval of d (bound to its
// call) to random replicas until one takes it.
func (c *chaos) decide(ctx context.Context, d decision, approved bool) error {
	d.Approved = approved
	approvalID := d.ApprovalID
	for range 20 {
		if ctx.Err() != nil {
			break
		}
		status, body, err := c.pick().approve(ctx, d)
		switch {
		case err != nil || status >= 500:
			sleep(ctx, 100*time.Millisecond)
			continue
		case taken(status, body):
			return nil
		case status == http.StatusOK:
			// Not pending: an earlier POST of this decision was taken,
			// and its answer lost with the replica that took it.
			var a memory.Approval
			if c.pick().get(ctx, "/approval?id="+neturl.QueryEscape(approvalID), &a) == nil && a.Decided && a.Decision.Approved == approved {
				return nil
			}
		}
		return fmt.Errorf("decision on %s refused: %d %s", approvalID, status, body)
	}
	return fmt.Errorf("the decision on %s could not be posted", approvalID)
}

// interrupt posts an interrupt of the session to random replicas until
// one takes it.
func (c *chaos) interrupt(ctx context.Context, session string) error {
	for range 20 {
		if ctx.Err() != nil {
			break
		}
		status, body, err := c.pick().interrupt(ctx, session)
		switch {
		case err != nil || status >= 500:
			sleep(ctx, 100*time.Millisecond)
			continue
		case status == http.StatusOK:
			return nil
		}
		return fmt.Errorf("interrupt of %s refused: %d %s", session, status, body)
	}
	return fmt.Errorf("the interrupt of %s could not be posted", session)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// history reads a session's messages from any replica that answers.
func (c *chaos) history(ctx context.Context, session string) ([]memory.Message, error) {
	var err error
	for range 20 {
		var msgs []memory.Message
		if err = c.pick().get(ctx, "/api/history?session_id="+neturl.QueryEscape(session), &msgs); err == nil {
			return msgs, nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return nil, err
}

// describe returns what the store holds of a session's open calls and
// their approvals, for a failure message.
func (c *chaos) describe(ctx context.Context, session string) string {
	r := c.pick()
	calls, err := r.openCalls(ctx, session)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, oc := range calls {
		fmt.Fprintf(&b, "  open call %+v\n", oc)
		if oc.ApprovalID != "" {
			var a memory.Approval
			err := r.get(ctx, "/approval?id="+neturl.QueryEscape(oc.ApprovalID), &a)
			fmt.Fprintf(&b, "    approval %+v %v\n", a, err)
		}
	}
	var pending []memory.Approval
	err = r.get(ctx, "/approvals?session="+neturl.QueryEscape(session), &pending)
	for _, a := range pending {
		fmt.Fprintf(&b, "  pending approval %+v\n", a)
	}
	if err != nil {
		fmt.Fprintf(&b, "  pending approvals: %v\n", err)
	}
	if msgs, err := c.history(ctx, session); err == nil {
		b.WriteString(dump(msgs))
	}
	return b.String()
}

// pendingFor returns the pending approval of the session's call for key,
// if there is one.
func (c *chaos) pendingFor(ctx context.Context, session, key string) (memory.Approval, bool) {
	var pending []memory.Approval
	if err := c.pick().get(ctx, "/approvals?session="+neturl.QueryEscape(session), &pending); err != nil {
		return memory.Approval{}, false
	}
	for _, a := range pending {
		var args struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(a.Arguments, &args) == nil && args.Key == key {
			return a, true
		}
	}
	return memory.Approval{}, false
}

// answered reports whether the session's history has the tool message of
// callID.
func (c *chaos) answered(ctx context.Context, session, callID string) (bool, error) {
	var msgs []memory.Message
	if err := c.pick().get(ctx, "/api/history?session_id="+neturl.QueryEscape(session), &msgs); err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Role == memory.RoleTool && m.ToolCallID == callID {
			return true, nil
		}
	}
	return false, nil
}

// settled reports whether the session has no open call and no pending
// approval.
func (c *chaos) settled(ctx context.Context, session string) (bool, error) {
	r := c.pick()
	calls, err := r.openCalls(ctx, session)
	if err != nil {
		return false, err
	}
	var pending []memory.Approval
	if err := r.get(ctx, "/approvals?session="+neturl.QueryEscape(session), &pending); err != nil {
		return false, err
	}
	return len(calls) == 0 && len(pending) == 0, nil
}

// chaosReport counts what TestChaos found.
type chaosReport struct {
	turns, attempts, kills, adopted int
	orphaned                        int
	ran, stopped, rejected          int
	interrupted                     int
	lost, twice, invalid, pending   int
	unanswered                      int
}

func (r chaosReport) String() string {
	return fmt.Sprintf("%d turns (%d asked, %d kills, %d approvals found pending in the store): %d ran, %d stopped by a kill while executing, %d rejected, %d interrupted; "+
		"decisions lost %d (on approvals no run waited for %d), tools run twice %d, invalid histories %d, sessions left pending %d, turns unanswered %d",
		r.turns, r.attempts, r.kills, r.adopted, r.ran, r.stopped, r.rejected, r.interrupted, r.lost+r.orphaned, r.orphaned, r.twice, r.invalid, r.pending, r.unanswered)
}

// count checks one turn's outcome against the final history of its session
// and the executions of its key.
func (r *chaosReport) count(t *testing.T, o turnOutcome, msgs []memory.Message, runs int) {
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
	case o.interrupted && runs > 0:
		r.lost++
		t.Errorf("%s: interrupted while it waited for its approval, yet the tool ran (%q)", o.key, answer.Content)
	case o.interrupted:
		r.interrupted++
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
