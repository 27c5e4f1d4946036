package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// The conformance cases of what identifies an approval record (its kind,
// key and digest) and of the audit: records created decided, who decided
// and through what, and [memory.ApprovalStore.Decisions].

// decisionIDs returns the ids of what Decisions returns for q, checking
// that each is decided.
func decisionIDs(t *testing.T, as memory.ApprovalStore, q memory.DecisionQuery) []string {
	t.Helper()
	list, err := as.Decisions(t.Context(), q)
	if err != nil {
		t.Fatalf("Decisions(%+v): %v", q, err)
	}
	ids := make([]string, len(list))
	for i, a := range list {
		if !a.Decided || a.DecidedAt.IsZero() {
			t.Errorf("Decisions(%+v) lists %q, which is not decided: %+v", q, a.ID, a)
		}
		ids[i] = a.ID
	}
	return ids
}

// decidedApproval returns a valid record created decided at at.
func decidedApproval(id, sessionID, kind string, at time.Time) memory.Approval {
	a := approval(id, sessionID)
	a.Kind, a.Decided, a.DecidedAt = kind, true, at
	a.Decision = memory.ApprovalDecision{Approved: true, Principal: "policy:" + id, Channel: "policy"}
	return a
}

// testApprovalFields: Kind, Key and Digest, and a decision's Principal and
// Channel, come back from every read.
func testApprovalFields(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	ctx := t.Context()
	in := memory.Approval{
		ID: "f1", SessionID: "s", CallID: "c1", Tool: "ask_user_question", Round: 2,
		Arguments: json.RawMessage(`{"question":"which?"}`),
		Kind:      memory.KindForm, Key: "run-7/c1 ✓", Digest: "sha256:0f1e2d3c4b5a",
		CreatedAt: time.Date(2025, 2, 3, 4, 5, 6, 7, time.UTC),
	}
	createApproval(t, as, in)
	check := func(what string, got memory.Approval, want memory.Approval) {
		t.Helper()
		if !equalApproval(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("GetApproval", getApproval(t, as, "f1"), in)
	byKey, err := as.ApprovalByKey(ctx, "s", in.Key)
	if err != nil {
		t.Fatalf("ApprovalByKey: %v", err)
	}
	check("ApprovalByKey", byKey, in)
	pending, err := as.PendingApprovals(ctx, "s")
	if err != nil || len(pending) != 1 {
		t.Fatalf("PendingApprovals = %+v, %v; want f1", pending, err)
	}
	check("PendingApprovals", pending[0], in)

	d := memory.ApprovalDecision{Approved: false, Reason: "not now", Cause: "user", Principal: "alice@example.com", Channel: "http"}
	decided, err := as.DecideApproval(ctx, "s", "f1", d)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	want := in
	want.Decided, want.Decision, want.DecidedAt = true, d, decided.DecidedAt
	check("DecideApproval", decided, want)
	check("GetApproval after the decision", getApproval(t, as, "f1"), want)
	if byKey, err = as.ApprovalByKey(ctx, "s", in.Key); err != nil {
		t.Fatalf("ApprovalByKey after the decision: %v", err)
	}
	check("ApprovalByKey after the decision", byKey, want)
	list, err := as.Decisions(ctx, memory.DecisionQuery{SessionID: "s"})
	if err != nil || len(list) != 1 {
		t.Fatalf("Decisions = %+v, %v; want f1", list, err)
	}
	check("Decisions", list[0], want)
	// A second decider's principal does not replace the first's.
	again, err := as.DecideApproval(ctx, "s", "f1", memory.ApprovalDecision{Approved: true, Principal: "mallory", Channel: "terminal"})
	if !errors.Is(err, memory.ErrDecided) {
		t.Fatalf("second DecideApproval: err = %v, want ErrDecided", err)
	}
	check("second DecideApproval", again, want)
}

// testApprovalKeyUnique: a session has at most one record per key, pending
// or decided; other sessions, and records without a key, do not collide.
func testApprovalKeyUnique(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	ctx := t.Context()
	withKey := func(id, sessionID, key string) memory.Approval {
		a := approval(id, sessionID)
		a.Key = key
		return a
	}
	createApproval(t, as, withKey("a1", "s", "k"))
	if err := as.CreateApproval(ctx, withKey("a2", "s", "k")); !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateApproval of a key the session has: err = %v, want ErrExists", err)
	}
	if _, err := as.GetApproval(ctx, "a2"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("GetApproval of the refused record: err = %v, want ErrNotFound", err)
	}
	if got, err := as.ApprovalByKey(ctx, "s", "k"); err != nil || got.ID != "a1" {
		t.Errorf("ApprovalByKey(s, k) = %q, %v; want the first record, a1", got.ID, err)
	}
	// Another session may have the same key; so may keys differ in case.
	createApproval(t, as, withKey("b1", "t", "k"))
	createApproval(t, as, withKey("a3", "s", "K"))
	// Records without a key never collide.
	createApproval(t, as, approval("e1", "s"))
	createApproval(t, as, approval("e2", "s"))

	// A decided record keeps its key, and a record created decided needs
	// a free one.
	if _, err := as.DecideApproval(ctx, "s", "a1", memory.ApprovalDecision{Approved: true}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if err := as.CreateApproval(ctx, withKey("a4", "s", "k")); !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateApproval of a decided record's key: err = %v, want ErrExists", err)
	}
	dec := withKey("a5", "s", "k")
	dec.Decided = true
	if err := as.CreateApproval(ctx, dec); !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateApproval, decided, of a key the session has: err = %v, want ErrExists", err)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("Decisions = %v, want [a1] (the refused decided record is not kept)", got)
	}
	if got := pendingIDs(t, as, "s"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"a3", "e1", "e2"}) {
		t.Errorf("PendingApprovals(s) = %v, want a3, e1 and e2", got)
	}
}

// testApprovalKeyConcurrent: of concurrent creators of one session's key,
// under different ids, exactly one succeeds.
func testApprovalKeyConcurrent(t *testing.T, st memory.Store) {
	const creators = 8
	as := st.(memory.ApprovalStore)
	errs := make([]error, creators)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range creators {
		wg.Go(func() {
			a := approval(fmt.Sprint("c", i), "s")
			a.Key = "the-call"
			<-start
			errs[i] = as.CreateApproval(t.Context(), a)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("creators %d and %d both created key the-call", winner, i)
			}
			winner = i
		case !errors.Is(err, memory.ErrExists):
			t.Errorf("creator %d: err = %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no creator succeeded")
	}
	if got, err := as.ApprovalByKey(t.Context(), "s", "the-call"); err != nil || got.ID != fmt.Sprint("c", winner) {
		t.Errorf("ApprovalByKey = %q, %v; want the winner's, c%d", got.ID, err, winner)
	}
	if got := pendingIDs(t, as, ""); len(got) != 1 {
		t.Errorf("PendingApprovals = %v, want the winner's record only", got)
	}
}

// testApprovalByKey: ApprovalByKey finds a session's record, pending or
// decided, and nothing else.
func testApprovalByKey(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	ctx := t.Context()
	p := approval("p", "s")
	p.Key = "kp"
	createApproval(t, as, p)
	d := decidedApproval("d", "s", "", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	d.Key = "kd"
	createApproval(t, as, d)
	createApproval(t, as, approval("nokey", "s"))
	for key, want := range map[string]string{"kp": "p", "kd": "d"} {
		if got, err := as.ApprovalByKey(ctx, "s", key); err != nil || got.ID != want {
			t.Errorf("ApprovalByKey(s, %s) = %q, %v; want %s", key, got.ID, err, want)
		}
	}
	for _, c := range []struct{ session, key string }{
		{"s", "unknown"},
		{"s", ""},   // an empty key names nothing, though "nokey" has one
		{"t", "kp"}, // another session's key
		{"", "kp"},  // no session
		{"s", "KP"}, // keys are compared exactly
	} {
		if got, err := as.ApprovalByKey(ctx, c.session, c.key); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("ApprovalByKey(%q, %q) = %q, %v; want ErrNotFound", c.session, c.key, got.ID, err)
		}
	}
}

// testApprovalCreateDecided: a record created decided keeps its decision
// and decision time, is never pending and cannot be decided again; a
// pending record is stored without the decision it was given.
func testApprovalCreateDecided(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	ctx := t.Context()
	at := time.Date(2025, 5, 6, 7, 8, 9, 987654321, time.FixedZone("E", -7*3600))
	in := decidedApproval("auto", "s", memory.KindApproval, at)
	in.Key, in.Digest = "k-auto", "sha256:ab"
	in.Decision.Reason, in.Decision.Cause, in.Decision.Scope = "on the allow list", "policy", "session"
	in.Decision.Arguments = json.RawMessage(`{"path": "/tmp"}`)
	before := time.Now()
	createApproval(t, as, in)
	got := getApproval(t, as, "auto")
	if got.CreatedAt.IsZero() || got.CreatedAt.Before(before.Add(-time.Second)) {
		t.Errorf("CreatedAt = %v, want set by the store", got.CreatedAt)
	}
	want := in
	want.CreatedAt = got.CreatedAt
	if !equalApproval(got, want) {
		t.Errorf("GetApproval of a record created decided:\n got %+v\nwant %+v", got, want)
	}
	if got.DecidedAt.Location() != time.UTC {
		t.Errorf("DecidedAt in %v, want UTC", got.DecidedAt.Location())
	}
	if ids := pendingIDs(t, as, ""); len(ids) != 0 {
		t.Errorf("PendingApprovals = %v, want none: a record created decided is never pending", ids)
	}
	stood, err := as.DecideApproval(ctx, "s", "auto", memory.ApprovalDecision{Approved: false, Principal: "bob"})
	if !errors.Is(err, memory.ErrDecided) || !equalApproval(stood, want) {
		t.Errorf("DecideApproval of a record created decided = %+v, %v; want ErrDecided and %+v", stood, err, want)
	}

	// A zero DecidedAt is the time of the creation.
	before = time.Now()
	now := decidedApproval("now", "s", "", time.Time{})
	createApproval(t, as, now)
	after := time.Now()
	if got := getApproval(t, as, "now"); got.DecidedAt.Before(before.Add(-time.Second)) || got.DecidedAt.After(after.Add(time.Second)) {
		t.Errorf("DecidedAt of a record created decided without one = %v, want between %v and %v", got.DecidedAt, before, after)
	}

	// A pending record is stored without a decision.
	p := approval("pending", "s")
	p.Decision, p.DecidedAt = memory.ApprovalDecision{Approved: true, Principal: "forged"}, at
	createApproval(t, as, p)
	if got := getApproval(t, as, "pending"); got.Decided || !equalDecision(got.Decision, memory.ApprovalDecision{}) || !got.DecidedAt.IsZero() {
		t.Errorf("pending record created with a decision = %+v, want no decision stored", got)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); !slices.Equal(got, []string{"auto", "now"}) {
		t.Errorf("Decisions = %v, want [auto now]", got)
	}
}

// testDecisions: Decisions selects by session, kind and time, in the order
// of decisions and then of ids, byte-wise.
func testDecisions(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	base := time.Date(2025, 1, 1, 0, 0, 0, 7, time.UTC)
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	records := []struct {
		id, session, kind string
		at                time.Time
	}{
		// Created out of order; ties at sec(2), where the order is by id
		// byte-wise ("Zz" before "b0", unlike in most collations).
		{"d5", "s1", "", sec(5)},
		{"d3", "s2", memory.KindApproval, sec(2)},
		{"a9", "s2", memory.KindForm, sec(4)},
		{"d1", "s1", "", sec(1)},
		{"d2", "s1", memory.KindForm, sec(2)},
		{"b0", "s2", "", sec(2)},
		{"d4", "s1", memory.KindApproval, sec(3)},
		{"Zz", "s2", "", sec(2)},
	}
	for i, r := range records {
		createApproval(t, as, decidedApproval(r.id, r.session, r.kind, r.at.In(time.FixedZone("Q", i*3600))))
	}
	// Pending records are never listed.
	createApproval(t, as, approval("p1", "s1"))
	createApproval(t, as, approval("p2", "s2"))

	all := []string{"d1", "Zz", "b0", "d2", "d3", "d4", "a9", "d5"}
	for _, c := range []struct {
		name string
		q    memory.DecisionQuery
		want []string
	}{
		{"all", memory.DecisionQuery{}, all},
		{"session s1", memory.DecisionQuery{SessionID: "s1"}, []string{"d1", "d2", "d4", "d5"}},
		{"session s2", memory.DecisionQuery{SessionID: "s2"}, []string{"Zz", "b0", "d3", "a9"}},
		{"unknown session", memory.DecisionQuery{SessionID: "nobody"}, nil},
		{"kind approval, empty included", memory.DecisionQuery{Kind: memory.KindApproval}, []string{"d1", "Zz", "b0", "d3", "d4", "d5"}},
		{"kind form", memory.DecisionQuery{Kind: memory.KindForm}, []string{"d2", "a9"}},
		{"unknown kind", memory.DecisionQuery{Kind: "other"}, nil},
		{"since, inclusive", memory.DecisionQuery{Since: sec(2)}, []string{"Zz", "b0", "d2", "d3", "d4", "a9", "d5"}},
		{"since, to the nanosecond", memory.DecisionQuery{Since: sec(2).Add(time.Nanosecond)}, []string{"d4", "a9", "d5"}},
		{"until, exclusive", memory.DecisionQuery{Until: sec(2)}, []string{"d1"}},
		{"until, to the nanosecond", memory.DecisionQuery{Until: sec(2).Add(time.Nanosecond)}, []string{"d1", "Zz", "b0", "d2", "d3"}},
		{"range", memory.DecisionQuery{Since: sec(2), Until: sec(4)}, []string{"Zz", "b0", "d2", "d3", "d4"}},
		{"range in another zone", memory.DecisionQuery{Since: sec(2).In(time.FixedZone("W", -3600)), Until: sec(4).In(time.FixedZone("F", 9000))},
			[]string{"Zz", "b0", "d2", "d3", "d4"}},
		{"empty range", memory.DecisionQuery{Since: sec(3), Until: sec(3)}, nil},
		{"reversed range", memory.DecisionQuery{Since: sec(4), Until: sec(2)}, nil},
		{"range beyond nanoseconds", memory.DecisionQuery{Since: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, all},
		{"after id Zz", memory.DecisionQuery{Since: sec(2), AfterID: "Zz"}, []string{"b0", "d2", "d3", "d4", "a9", "d5"}},
		{"after id between ids", memory.DecisionQuery{Since: sec(2), AfterID: "c"}, []string{"d2", "d3", "d4", "a9", "d5"}},
		{"after the last id of a time", memory.DecisionQuery{Since: sec(2), AfterID: "d3"}, []string{"d4", "a9", "d5"}},
		{"after id at the first time", memory.DecisionQuery{Since: sec(1), AfterID: "d1"}, all[1:]},
		{"after id, one session", memory.DecisionQuery{SessionID: "s2", Since: sec(2), AfterID: "a"}, []string{"b0", "d3", "a9"}},
		{"after id without since", memory.DecisionQuery{AfterID: "zzz"}, all},
		{"limit", memory.DecisionQuery{Limit: 2}, []string{"d1", "Zz"}},
		{"limit above the count", memory.DecisionQuery{Limit: 100}, all},
		{"negative limit", memory.DecisionQuery{Limit: -1}, all},
		{"session, since and limit", memory.DecisionQuery{SessionID: "s2", Since: sec(2), Limit: 2}, []string{"Zz", "b0"}},
		{"everything", memory.DecisionQuery{SessionID: "s1", Kind: memory.KindApproval, Since: sec(1), Until: sec(5), Limit: 5}, []string{"d1", "d4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := decisionIDs(t, as, c.q); !slices.Equal(got, c.want) {
				t.Errorf("Decisions(%+v) = %v, want %v", c.q, got, c.want)
			}
		})
	}

	// The records come whole.
	list, err := as.Decisions(t.Context(), memory.DecisionQuery{SessionID: "s2", Kind: memory.KindForm})
	if err != nil || len(list) != 1 {
		t.Fatalf("Decisions(s2, form) = %+v, %v; want a9", list, err)
	}
	want := decidedApproval("a9", "s2", memory.KindForm, sec(4))
	want.CreatedAt = getApproval(t, as, "a9").CreatedAt
	if !equalApproval(list[0], want) || list[0].DecidedAt.Location() != time.UTC {
		t.Errorf("Decisions returned\n %+v\nwant %+v, in UTC", list[0], want)
	}
}

// testDecisionsPaging: pages read with Since and AfterID set from the last
// record of the page before, and a Limit, make up the whole listing, each
// record once, also where many records share a decision time.
func testDecisionsPaging(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	const n = 23
	for i := range n {
		// Five instants, ids that do not follow the creation order.
		id := fmt.Sprintf("r%02d", (i*7)%n)
		session := []string{"s", "t"}[i%2]
		createApproval(t, as, decidedApproval(id, session, "", base.Add(time.Duration(i%5)*time.Millisecond)))
	}
	for _, q := range []memory.DecisionQuery{
		{},
		{SessionID: "t"},
		{Since: base.Add(time.Millisecond), Until: base.Add(4 * time.Millisecond)},
	} {
		whole := decisionIDs(t, as, q)
		for _, size := range []int{1, 2, 4, 7} {
			var paged []string
			page := q
			page.Limit = size
			for range n + 1 {
				list, err := as.Decisions(t.Context(), page)
				if err != nil {
					t.Fatalf("Decisions(%+v): %v", page, err)
				}
				if len(list) > size {
					t.Fatalf("Decisions(%+v) returned %d records, more than the limit", page, len(list))
				}
				if len(list) == 0 {
					break
				}
				for _, a := range list {
					paged = append(paged, a.ID)
				}
				last := list[len(list)-1]
				page.Since, page.AfterID = last.DecidedAt, last.ID
			}
			if !slices.Equal(paged, whole) {
				t.Errorf("pages of %d of %+v = %v, want %v", size, q, paged, whole)
			}
		}
	}
}

// testDecisionsDecided: the decisions that DecideApproval takes are listed
// with the records created decided, at the time they were taken.
func testDecisionsDecided(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	ctx := t.Context()
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	createApproval(t, as, decidedApproval("old", "s", "", past))
	createApproval(t, as, approval("x", "s"))
	createApproval(t, as, approval("y", "t"))
	before := time.Now()
	for _, c := range []struct{ session, id, principal, channel string }{{"s", "x", "alice", "http"}, {"t", "y", "timeout", "timeout"}} {
		if _, err := as.DecideApproval(ctx, c.session, c.id, memory.ApprovalDecision{Principal: c.principal, Channel: c.channel}); err != nil {
			t.Fatalf("DecideApproval(%s): %v", c.id, err)
		}
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); !slices.Equal(got, []string{"old", "x", "y"}) && !slices.Equal(got, []string{"old", "y", "x"}) {
		t.Errorf("Decisions = %v, want old first, then x and y", got)
	}
	list, err := as.Decisions(ctx, memory.DecisionQuery{Since: before.Add(-time.Second)})
	if err != nil {
		t.Fatalf("Decisions: %v", err)
	}
	got := map[string]memory.Approval{}
	for _, a := range list {
		got[a.ID] = a
	}
	if len(got) != 2 || got["x"].Decision.Principal != "alice" || got["x"].Decision.Channel != "http" ||
		got["y"].Decision.Principal != "timeout" || got["y"].Decision.Channel != "timeout" {
		t.Errorf("Decisions since the decisions = %+v, want x by alice through http and y by timeout", list)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{SessionID: "t"}); !slices.Equal(got, []string{"y"}) {
		t.Errorf("Decisions(t) = %v, want [y]", got)
	}
	if got := pendingIDs(t, as, ""); len(got) != 0 {
		t.Errorf("PendingApprovals = %v, want none", got)
	}
}
