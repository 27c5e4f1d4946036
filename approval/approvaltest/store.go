package approvaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// timeout is the timeout of the approvals that [RunStore] checks: short,
// so that the timeout checks take about a second, and long enough that
// every other approval of a check is decided well before it.
const timeout = time.Second

// slack is how much later than its deadline a timeout may be seen, and how
// far the times a store records may be from the times the check took.
const slack = 2 * time.Second

// RunStore is the conformance suite of an approval store: what the
// approvals a runner (package runner) keeps on a [memory.ApprovalStore]
// promise, whatever keeps them. A store author calls it with newStore,
// which is called once per check and returns the store to check (the
// suite builds the runner's approvals on it, with the store as their
// memory.Notifier when it is one); it should register its cleanup (closing
// the store) with t. A nil store checks the approvals without a Store, on a
// memory.MemStore of their own. A store may be shared between checks: every
// check uses sessions of its own.
//
// The checks, run as subtests in order:
//   - the first decision wins, among decisions racing from many
//     goroutines, and a decision given before Wait is kept for it;
//   - cancelling a session (runner.Runner.Stop) rejects every pending
//     approval of the session, also one not yet waited for, and no other
//     session's;
//   - the timeout counts from the approval's creation, and a decision that
//     comes after it is refused and the approval recorded as timed out;
//   - the pending approvals of a session are listed oldest first, with the
//     digest of their arguments;
//   - integrity: a reply with another call id, tool, arguments digest or
//     session is refused (approval.ErrMismatch, approval.ErrWrongSession),
//     and so is one missing any of them; the approval stays pending and
//     the right reply afterwards is taken;
//   - audit: the decisions of one session are listed, those of a person
//     who approved, of one who rejected, of a policy and of the timeout,
//     with their principal, channel, arguments digest and times; a time
//     range selects by decision time, across sessions.
//
// After each check no approval is left held in the process.
func RunStore(t *testing.T, newStore func(t *testing.T) memory.ApprovalStore) {
	t.Helper()
	checks := []struct {
		name string
		run  func(t *testing.T, m *person.Approvals, session string)
	}{
		{"FirstDecisionWins", testFirstDecisionWins},
		{"DecisionBeforeWait", testDecisionBeforeWait},
		{"CancelSession", testCancelSession},
		{"TimeoutFromCreation", testTimeoutFromCreation},
		{"PendingWithDigest", testPendingWithDigest},
		{"Integrity", testIntegrity},
		{"Audit", testAudit},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			m := approvals(t, newStore)
			c.run(t, m, newSession(c.name))
			if n := m.Len(); n != 0 {
				t.Errorf("Len() = %d after the check, want 0 (an entry leaked)", n)
			}
		})
	}
}

// approvals returns the approvals of a runner on newStore's store, closed
// when the test ends.
func approvals(t *testing.T, newStore func(t *testing.T) memory.ApprovalStore) *person.Approvals {
	t.Helper()
	cfg := person.ApprovalsConfig{Timeout: timeout}
	if st := newStore(t); st != nil {
		cfg.Store = st
		cfg.Notifier, _ = st.(memory.Notifier)
	}
	m, err := person.StartApprovals(cfg)
	if err != nil {
		t.Fatalf("the approvals on the store: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// newSession returns a session id no other run of the suite uses.
func newSession(check string) string {
	var b [6]byte
	rand.Read(b[:])
	return "approvaltest-" + check + "-" + hex.EncodeToString(b[:])
}

// call returns the i-th request of session: tool "approvaltest_tool", call
// id "call_<i>", arguments {"n":i}.
func call(session string, i int) agent.ApprovalRequest {
	r := Request(i)
	r.SessionID = session
	return r
}

// reply returns the reply that gives d to the approval id of req's call, as
// a front end that shows req's card sends it.
func reply(req agent.ApprovalRequest, id string, d agent.Decision) person.Reply {
	return person.Reply{SessionID: req.SessionID, ApprovalID: id, CallID: req.Call.ID, Tool: req.Call.Name,
		ArgumentsDigest: agent.ArgumentsDigest(req.Call.Arguments), Decision: d}
}

// register asks m about req and fails t unless it gets a pending ticket.
func register(t *testing.T, m *person.Approvals, req agent.ApprovalRequest) agent.Ticket {
	t.Helper()
	tk, err := m.Request(context.Background(), req)
	if err != nil {
		t.Fatalf("Request(%s): %v", req.Call.ID, err)
	}
	if _, decided := tk.Decision(); decided || tk.ApprovalID() == "" {
		t.Fatalf("Request(%s) = a ticket decided %v with id %q, want a pending ticket with an id", req.Call.ID, decided, tk.ApprovalID())
	}
	return tk
}

// waitFor waits for tk's decision, failing t when Wait fails or takes
// longer than Bound past the timeout.
func waitFor(t *testing.T, tk agent.Ticket) agent.Decision {
	t.Helper()
	type outcome struct {
		d   agent.Decision
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		d, err := tk.Wait(context.Background())
		done <- outcome{d, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Wait of %s: %v", tk.ApprovalID(), o.err)
		}
		return o.d
	case <-time.After(timeout + Bound):
		t.Fatalf("Wait of %s did not return within the timeout and %v", tk.ApprovalID(), Bound)
		return agent.Decision{}
	}
}

// giveUp gives up tk, as the agent does for a ticket it does not wait for.
func giveUp(tk agent.Ticket) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tk.Wait(ctx) //nolint:errcheck // the release
}

// pending lists the pending approvals of session, failing t on an error.
func pending(t *testing.T, m *person.Approvals, session string) []approval.PendingApproval {
	t.Helper()
	list, err := m.Pending(context.Background(), session)
	if err != nil {
		t.Fatalf("Pending(%s): %v", session, err)
	}
	return list
}

// decisions returns the audit records q selects, failing t on an error.
func decisions(t *testing.T, m *person.Approvals, q approval.DecisionQuery) []approval.DecisionRecord {
	t.Helper()
	var out []approval.DecisionRecord
	for r, err := range m.Decisions(context.Background(), q) {
		if err != nil {
			t.Fatalf("Decisions(%+v): %v", q, err)
		}
		out = append(out, r)
	}
	return out
}

func testFirstDecisionWins(t *testing.T, m *person.Approvals, session string) {
	const deciders = 8
	req := call(session, 1)
	tk := register(t, m, req)
	start := make(chan struct{})
	taken := make([]bool, deciders)
	var wg sync.WaitGroup
	for j := range deciders {
		wg.Go(func() {
			<-start
			ok, err := m.Respond(context.Background(), reply(req, tk.ApprovalID(),
				agent.Decision{Approved: j%2 == 0, Reason: fmt.Sprint("decider ", j), By: fmt.Sprint("person-", j)}))
			if err != nil {
				t.Errorf("Respond of decider %d: %v", j, err)
			}
			taken[j] = ok
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for j, ok := range taken {
		if !ok {
			continue
		}
		if winner >= 0 {
			t.Fatalf("the decisions of deciders %d and %d were both taken", winner, j)
		}
		winner = j
	}
	if winner < 0 {
		t.Fatal("no decision was taken")
	}
	d := waitFor(t, tk)
	if want := fmt.Sprint("decider ", winner); d.Reason != want || d.Approved != (winner%2 == 0) {
		t.Errorf("Wait = %+v, want the decision of decider %d", d, winner)
	}
	records := decisions(t, m, approval.DecisionQuery{SessionID: session})
	if len(records) != 1 || records[0].Decision.By != fmt.Sprint("person-", winner) {
		t.Errorf("the audit holds %+v, want the one decision of decider %d", records, winner)
	}
	ok, err := m.Respond(context.Background(), reply(req, tk.ApprovalID(), agent.Decision{Approved: true}))
	if ok || err != nil {
		t.Errorf("Respond after the decision = %v, %v; want false, nil", ok, err)
	}
}

func testDecisionBeforeWait(t *testing.T, m *person.Approvals, session string) {
	req := call(session, 1)
	tk := register(t, m, req)
	edited := json.RawMessage(`{"n":42}`)
	ok, err := m.Respond(context.Background(), reply(req, tk.ApprovalID(),
		agent.Decision{Approved: true, Arguments: edited, Scope: agent.ScopeSession, By: "alice"}))
	if !ok || err != nil {
		t.Fatalf("Respond before Wait = %v, %v; want true, nil", ok, err)
	}
	if list := pending(t, m, session); len(list) != 0 {
		t.Errorf("Pending lists %d approvals after the decision, want none", len(list))
	}
	d := waitFor(t, tk)
	if !d.Approved || string(d.Arguments) != string(edited) || d.Scope != agent.ScopeSession || d.By != "alice" || d.Via != approval.ViaHTTP {
		t.Errorf("Wait = %+v, want the decision given before it (approved, edited, scope session, by alice via http)", d)
	}
}

func testCancelSession(t *testing.T, m *person.Approvals, session string) {
	other := session + "-other"
	waited := register(t, m, call(session, 1))
	notYet := register(t, m, call(session, 2))
	kept := register(t, m, call(other, 3))
	defer giveUp(kept)
	type outcome struct {
		d   agent.Decision
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		d, err := waited.Wait(context.Background())
		done <- outcome{d, err}
	}()
	n, err := m.CancelSession(context.Background(), session)
	if n != 2 || err != nil {
		t.Errorf("CancelSession = %d, %v; want 2, nil", n, err)
	}
	interrupted := func(who string, d agent.Decision) {
		t.Helper()
		if d.Approved || d.Cause != agent.CauseApprovalInterrupted || d.Via != approval.ViaSystem {
			t.Errorf("%s: %+v, want a rejection with cause %s via %s", who, d, agent.CauseApprovalInterrupted, approval.ViaSystem)
		}
	}
	select {
	case o := <-done:
		if o.err != nil {
			t.Errorf("the waiting Wait: %v", o.err)
		}
		interrupted("the waiting Wait", o.d)
	case <-time.After(Bound):
		t.Fatalf("the waiting Wait did not return within %v of CancelSession", Bound)
	}
	interrupted("the Wait that came later", waitFor(t, notYet))
	ok, err := m.Respond(context.Background(), reply(call(session, 2), notYet.ApprovalID(), agent.Decision{Approved: true}))
	if ok || err != nil {
		t.Errorf("Respond to a cancelled approval = %v, %v; want false, nil", ok, err)
	}
	if list := pending(t, m, other); len(list) != 1 || list[0].ApprovalID != kept.ApprovalID() {
		t.Errorf("another session's approvals: %+v, want the one pending", list)
	}
	if n, err := m.CancelSession(context.Background(), session); n != 0 || err != nil {
		t.Errorf("CancelSession again = %d, %v; want 0, nil", n, err)
	}
}

func testTimeoutFromCreation(t *testing.T, m *person.Approvals, session string) {
	// The Wait starts 3/5 of a timeout after the creation, and returns a
	// timeout after the creation (a timeout counted from the Wait would
	// return at 8/5).
	created := time.Now()
	tk := register(t, m, call(session, 1))
	time.Sleep(timeout * 3 / 5)
	d := waitFor(t, tk)
	took := time.Since(created)
	if d.Approved || d.Cause != agent.CauseTimeout || d.By != approval.ViaTimeout || d.Via != approval.ViaTimeout {
		t.Errorf("Wait = %+v, want a timeout by and via %q", d, approval.ViaTimeout)
	}
	if took < timeout || took > timeout*7/5 {
		t.Errorf("Wait returned %v after the creation, want the timeout (%v) from the creation, not from the Wait", took, timeout)
	}

	// A decision that comes after the timeout, while nobody waits, is
	// refused, and the approval is recorded as timed out.
	req := call(session, 2)
	late := register(t, m, req)
	suspended, cancel := context.WithCancelCause(context.Background())
	cancel(agent.ErrSuspended)
	if _, err := late.Wait(suspended); !errors.Is(err, agent.ErrSuspended) {
		t.Fatalf("Wait with a suspended context: %v, want agent.ErrSuspended", err)
	}
	time.Sleep(timeout + 100*time.Millisecond)
	ok, err := m.Respond(context.Background(), reply(req, late.ApprovalID(), agent.Decision{Approved: true, By: "alice"}))
	if ok || err != nil {
		t.Errorf("Respond after the timeout = %v, %v; want false, nil", ok, err)
	}
	if list := pending(t, m, session); len(list) != 0 {
		t.Errorf("Pending lists %+v after the timeouts, want none", list)
	}
	var found bool
	for _, r := range decisions(t, m, approval.DecisionQuery{SessionID: session}) {
		if r.ApprovalID != late.ApprovalID() {
			continue
		}
		found = true
		if r.Decision.Approved || r.Decision.Cause != agent.CauseTimeout || r.Decision.By != approval.ViaTimeout {
			t.Errorf("the late approval is recorded as %+v, want a timeout", r.Decision)
		}
	}
	if !found {
		t.Error("the late approval is not in the audit")
	}
}

func testPendingWithDigest(t *testing.T, m *person.Approvals, session string) {
	var tickets []agent.Ticket
	for i := 1; i <= 3; i++ {
		tickets = append(tickets, register(t, m, call(session, i)))
		time.Sleep(10 * time.Millisecond) // orders the creation times
	}
	defer func() {
		for _, tk := range tickets {
			giveUp(tk)
		}
	}()
	ok, err := m.Respond(context.Background(), reply(call(session, 2), tickets[1].ApprovalID(), agent.Decision{Approved: true}))
	if !ok || err != nil {
		t.Fatalf("Respond = %v, %v; want true, nil", ok, err)
	}
	list := pending(t, m, session)
	if len(list) != 2 {
		t.Fatalf("Pending lists %d approvals, want 2", len(list))
	}
	for k, i := range []int{1, 3} {
		p, req := list[k], call(session, i)
		switch {
		case p.ApprovalID != tickets[i-1].ApprovalID() || p.Call.ApprovalID != p.ApprovalID:
			t.Errorf("Pending[%d] is approval %s (call's %s), want %s, oldest first", k, p.ApprovalID, p.Call.ApprovalID, tickets[i-1].ApprovalID())
		case p.SessionID != session || p.Call.ID != req.Call.ID || p.Call.Name != req.Call.Name:
			t.Errorf("Pending[%d] = %+v, want call %s of tool %s in session %s", k, p, req.Call.ID, req.Call.Name, session)
		case !sameJSON(p.Call.Arguments, req.Call.Arguments):
			t.Errorf("Pending[%d] arguments %s, want %s", k, p.Call.Arguments, req.Call.Arguments)
		case p.Call.ArgumentsDigest != agent.ArgumentsDigest(req.Call.Arguments):
			t.Errorf("Pending[%d] digest %q, want %q", k, p.Call.ArgumentsDigest, agent.ArgumentsDigest(req.Call.Arguments))
		case p.Created.IsZero():
			t.Errorf("Pending[%d] has no creation time", k)
		}
	}
	if len(list) == 2 && list[1].Created.Before(list[0].Created) {
		t.Errorf("Pending is not oldest first: %v, %v", list[0].Created, list[1].Created)
	}
	// The reply Pending's entry builds is taken.
	ok, err = m.Respond(context.Background(), person.ReplyTo(list[0], agent.Decision{Reason: "no"}))
	if !ok || err != nil {
		t.Errorf("Respond with PendingApproval.Reply = %v, %v; want true, nil", ok, err)
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func testIntegrity(t *testing.T, m *person.Approvals, session string) {
	req := call(session, 1)
	tk := register(t, m, req)
	defer giveUp(tk)
	right := reply(req, tk.ApprovalID(), agent.Decision{Approved: true, By: "alice"})
	cases := []struct {
		name string
		edit func(r *person.Reply)
		want error
	}{
		{"another call id", func(r *person.Reply) { r.CallID = "call_2" }, approval.ErrMismatch},
		{"another tool", func(r *person.Reply) { r.Tool = "delete_everything" }, approval.ErrMismatch},
		{"another arguments digest", func(r *person.Reply) {
			r.ArgumentsDigest = agent.ArgumentsDigest(json.RawMessage(`{"n":666}`))
		}, approval.ErrMismatch},
		{"another session", func(r *person.Reply) { r.SessionID = session + "-mallory" }, approval.ErrWrongSession},
		{"no call id", func(r *person.Reply) { r.CallID = "" }, approval.ErrMismatch},
		{"no tool", func(r *person.Reply) { r.Tool = "" }, approval.ErrMismatch},
		{"no arguments digest", func(r *person.Reply) { r.ArgumentsDigest = "" }, approval.ErrMismatch},
	}
	for _, c := range cases {
		r := right
		c.edit(&r)
		ok, err := m.Respond(context.Background(), r)
		if ok || !errors.Is(err, c.want) {
			t.Errorf("%s: Respond = %v, %v; want false, %v", c.name, ok, err, c.want)
		}
		if list := pending(t, m, session); len(list) != 1 || list[0].ApprovalID != tk.ApprovalID() {
			t.Fatalf("%s: Pending = %+v after a refused reply, want the approval still pending", c.name, list)
		}
	}
	if records := decisions(t, m, approval.DecisionQuery{SessionID: session}); len(records) != 0 {
		t.Errorf("the audit holds %+v after refused replies only, want nothing", records)
	}
	ok, err := m.Respond(context.Background(), right)
	if !ok || err != nil {
		t.Fatalf("the right reply after the refused ones: Respond = %v, %v; want true, nil", ok, err)
	}
	if d := waitFor(t, tk); !d.Approved || d.By != "alice" {
		t.Errorf("Wait = %+v, want alice's approval", d)
	}
}

func testAudit(t *testing.T, m *person.Approvals, session string) {
	ctx := context.Background()
	other := session + "-other"
	type span struct{ from, to time.Time }
	// respond registers req, gives it d and waits for it; asked and decided
	// both fall within the span it returns.
	respond := func(req agent.ApprovalRequest, d agent.Decision) span {
		t.Helper()
		s := span{from: time.Now()}
		tk := register(t, m, req)
		if ok, err := m.Respond(ctx, reply(req, tk.ApprovalID(), d)); !ok || err != nil {
			t.Fatalf("Respond(%s) = %v, %v; want true, nil", req.Call.ID, ok, err)
		}
		waitFor(t, tk)
		s.to = time.Now()
		return s
	}
	var asked, decided [4]span
	asked[0] = respond(call(session, 1), agent.Decision{Approved: true, By: "alice", Via: approval.ViaHTTP})
	decided[0] = asked[0]
	asked[1] = respond(call(session, 2), agent.Decision{Reason: "not that", By: "bob", Via: approval.ViaHTTP})
	decided[1] = asked[1]
	respond(call(other, 9), agent.Decision{Approved: true, By: "carol"}) // another session, between them

	policyReq := call(session, 3)
	policyReq.Call.Name = "read_file"
	asked[2].from, decided[2].from = time.Now(), time.Now()
	tk, err := m.Approver(approval.AllowTools("read_file")).Request(ctx, policyReq)
	if err != nil {
		t.Fatalf("the Chain's Request: %v", err)
	}
	if d, ok := tk.Decision(); !ok || !d.Approved || d.By != "policy:allow-tools" || d.Via != approval.ViaPolicy {
		t.Errorf("the Chain's ticket: %+v decided %v, want approved at once by policy:allow-tools via policy", d, ok)
	}
	asked[2].to, decided[2].to = time.Now(), time.Now()

	asked[3].from = time.Now()
	timedOut := register(t, m, call(session, 4))
	asked[3].to = time.Now()
	decided[3].from = asked[3].from.Add(timeout)
	waitFor(t, timedOut)
	decided[3].to = time.Now()

	want := []struct {
		req      agent.ApprovalRequest
		approved bool
		by, via  string
		cause    agent.Cause
	}{
		{call(session, 1), true, "alice", approval.ViaHTTP, ""},
		{call(session, 2), false, "bob", approval.ViaHTTP, ""},
		{policyReq, true, "policy:allow-tools", approval.ViaPolicy, ""},
		{call(session, 4), false, approval.ViaTimeout, approval.ViaTimeout, agent.CauseTimeout},
	}
	records := decisions(t, m, approval.DecisionQuery{SessionID: session})
	if len(records) != len(want) {
		t.Fatalf("Decisions of the session: %d records, want %d: %+v", len(records), len(want), records)
	}
	within := func(what string, i int, got time.Time, s span) {
		t.Helper()
		if got.Before(s.from.Add(-slack)) || got.After(s.to.Add(slack)) {
			t.Errorf("record %d: %s %v, want between %v and %v", i, what, got, s.from, s.to)
		}
	}
	for i, w := range want {
		r := records[i]
		switch {
		case r.SessionID != session || r.CallID != w.req.Call.ID || r.Tool != w.req.Call.Name:
			t.Errorf("record %d names call %s of tool %s in session %s, want %s of %s", i, r.CallID, r.Tool, r.SessionID, w.req.Call.ID, w.req.Call.Name)
		case r.ApprovalID == "":
			t.Errorf("record %d has no approval id", i)
		case r.ArgumentsDigest != agent.ArgumentsDigest(w.req.Call.Arguments) || !sameJSON(r.Arguments, w.req.Call.Arguments):
			t.Errorf("record %d shows arguments %s with digest %q, want %s with %q", i, r.Arguments, r.ArgumentsDigest, w.req.Call.Arguments, agent.ArgumentsDigest(w.req.Call.Arguments))
		case r.Decision.Approved != w.approved || r.Decision.By != w.by || r.Decision.Via != w.via || r.Decision.Cause != w.cause:
			t.Errorf("record %d: decision %+v, want approved %v by %q via %q with cause %q", i, r.Decision, w.approved, w.by, w.via, w.cause)
		}
		within("asked", i, r.Asked, asked[i])
		within("decided", i, r.Decided, decided[i])
		if r.Decided.Before(r.Asked) {
			t.Errorf("record %d decided (%v) before it was asked (%v)", i, r.Decided, r.Asked)
		}
	}
	if !slices.IsSortedFunc(records, func(a, b approval.DecisionRecord) int { return a.Decided.Compare(b.Decided) }) {
		t.Error("Decisions is not oldest first")
	}

	// A time range selects by decision time, in every session: from the
	// rejection (included) to the timeout (excluded) are the rejection,
	// the other session's approval and the policy's.
	ranged := decisions(t, m, approval.DecisionQuery{Since: records[1].Decided, Until: records[3].Decided})
	var got []string
	for _, r := range ranged {
		got = append(got, r.SessionID+"/"+r.CallID)
	}
	wantRange := []string{session + "/call_2", other + "/call_9", session + "/call_3"}
	if !slices.Equal(got, wantRange) {
		t.Errorf("Decisions from %v until %v: %v, want %v", records[1].Decided, records[3].Decided, got, wantRange)
	}
	if both := decisions(t, m, approval.DecisionQuery{SessionID: other, Since: records[1].Decided}); len(both) != 1 || both[0].Decision.By != "carol" {
		t.Errorf("Decisions of the other session since the rejection: %+v, want carol's", both)
	}
}
