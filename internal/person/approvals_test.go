package person_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
)

func TestStartApprovals(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration
		wantErr bool
	}{
		{"zero means default", 0, approval.DefaultTimeout, false},
		{"custom", 5 * time.Second, 5 * time.Second, false},
		{"negative", -time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := person.StartApprovals(person.ApprovalsConfig{Timeout: tt.timeout})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("StartApprovals(%v) error = nil, want an error", tt.timeout)
				}
				return
			}
			require.NoError(t, err)
			if got := m.Timeout(); got != tt.want {
				t.Errorf("Timeout() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRequestIDs(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	seen := make(map[string]bool)
	for i := range 1000 {
		tk, err := m.Request(context.Background(), request("s", i))
		require.NoError(t, err)
		_, decided := tk.Decision()
		require.False(t, decided, "an Approvals' ticket is pending")
		id := tk.ApprovalID()
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("id %q is not 128 bits of hex", id)
		}
		if seen[id] {
			t.Fatalf("id %q returned twice", id)
		}
		seen[id] = true
	}
	if got := cancelSession(t, m, "s"); got != 1000 {
		t.Errorf("CancelSession = %d, want 1000", got)
	}
	assert.Equal(t, 0, m.Len())
}

func TestRequestWithEndedContext(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tk, err := m.Request(ctx, request("s", 1))
	if !errors.Is(err, context.Canceled) || tk.ApprovalID() != "" {
		t.Errorf("Request(cancelled) = %q, %v; want \"\", context.Canceled", tk.ApprovalID(), err)
	}
	assert.Equal(t, 0, m.Len(), "nothing may be registered")
}

// Race: the decision arrives after Request but before Wait.
func TestRespondBeforeWait(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := request("s", 1)
	tk, err := m.Request(context.Background(), req)
	require.NoError(t, err)
	id := tk.ApprovalID()

	edited := json.RawMessage(`{"n":42}`)
	pending, err := respond(m, "s", id, req, agent.Decision{Approved: true, Arguments: edited, Scope: agent.ScopeSession})
	require.NoError(t, err)
	if !pending {
		t.Fatal("Respond right after Request: pending = false, want true")
	}
	assert.Empty(t, pendingList(t, m, "s"), "a decided approval is not listed as pending")

	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	want := agent.Decision{Approved: true, Arguments: edited, Scope: agent.ScopeSession}
	if !d.Approved || string(d.Arguments) != string(want.Arguments) || d.Scope != want.Scope {
		t.Errorf("Wait = %+v, want %+v", d, want)
	}
	assert.Equal(t, 0, m.Len())
}

func TestRespondWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		req := request("s", 1)
		tk, err := m.Request(t.Context(), req)
		require.NoError(t, err)
		id := tk.ApprovalID()

		done := make(chan outcome, 1)
		go func() {
			d, err := tk.Wait(t.Context())
			done <- outcome{d, err}
		}()
		synctest.Wait() // Wait is blocked
		start := time.Now()
		pending, err := respond(m, "s", id, req, agent.Decision{Reason: "not now"})
		require.NoError(t, err)
		require.True(t, pending)
		assert.Equal(t, 0, m.Len(), "a decision for a waiting approval removes it at once")
		got := <-done
		require.NoError(t, got.err)
		assert.Equal(t, byPerson(agent.Decision{Reason: "not now"}), got.d)
		assert.Equal(t, time.Duration(0), time.Since(start), "no timer may be involved")
	})
}

// TestNoSession: a request without a session id cannot be answered through
// the handlers (they need the session), so Request refuses it at once with
// ErrNoSession, registers nothing, and says how to fix it.
func TestNoSession(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := request("", 1)
	tk, err := m.Request(t.Context(), req)
	require.ErrorIs(t, err, approval.ErrNoSession)
	assert.Contains(t, err.Error(), "agent.Input.SessionID")
	assert.Empty(t, tk.ApprovalID())
	assert.Equal(t, 0, m.Len())
}

// Race: CancelSession lands between register (Request) and wait (Wait).
func TestCancelBetweenRegisterAndWait(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := request("s", 1)
	tk, err := m.Request(context.Background(), req)
	require.NoError(t, err)
	id := tk.ApprovalID()

	if got := cancelSession(t, m, "s"); got != 1 {
		t.Fatalf("CancelSession = %d, want 1", got)
	}
	assert.Equal(t, 0, m.Len(), "CancelSession must remove the entry, not only wake it")

	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, cancelledDecision, d)

	pending, err := respond(m, "s", id, req, agent.Decision{Approved: true})
	require.NoError(t, err)
	assert.False(t, pending, "a cancelled approval is not pending")
}

func TestCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		done := make(chan outcome, 2)
		for i := range 2 {
			tk, err := m.Request(t.Context(), request("s", i))
			require.NoError(t, err)
			go func() {
				d, err := tk.Wait(t.Context())
				done <- outcome{d, err}
			}()
		}
		other, err := m.Request(t.Context(), request("other", 9))
		require.NoError(t, err)
		synctest.Wait()
		require.Equal(t, 3, m.Len())

		if got := cancelSession(t, m, "s"); got != 2 {
			t.Fatalf("CancelSession = %d, want 2", got)
		}
		for range 2 {
			got := <-done
			require.NoError(t, got.err)
			assert.Equal(t, cancelledDecision, got.d)
		}
		assert.Equal(t, 1, m.Len(), "another session's approval stays")
		assert.Equal(t, 0, cancelSession(t, m, "s"), "second CancelSession finds nothing")
		assert.Equal(t, 1, cancelSession(t, m, "other"))
		_, _ = other.Wait(t.Context())
		assert.Equal(t, 0, m.Len())
	})
}

// Race: the decision arrives after the timeout.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{Timeout: 5 * time.Minute})
		req := request("s", 1)
		tk, err := m.Request(t.Context(), req)
		require.NoError(t, err)
		id := tk.ApprovalID()

		start := time.Now()
		d, err := tk.Wait(t.Context())
		require.NoError(t, err)
		if got := time.Since(start); got != 5*time.Minute {
			t.Errorf("Wait returned after %v, want 5m0s", got)
		}
		want := timedOut("5m0s")
		assert.Equal(t, want, d)
		assert.Equal(t, 0, m.Len())

		pending, err := respond(m, "s", id, req, agent.Decision{Approved: true})
		require.NoError(t, err)
		assert.False(t, pending, "Respond after the timeout: pending = true, want false")
	})
}

func TestDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		tk, err := m.Request(t.Context(), request("s", 1))
		require.NoError(t, err)
		start := time.Now()
		d, _ := tk.Wait(t.Context())
		if got := time.Since(start); got != 300*time.Second {
			t.Errorf("waited %v, want 5m0s", got)
		}
		assert.Equal(t, "approval timed out after 5m0s", d.Reason)
	})
}

// Race: two decisions for one approval; the first wins.
func TestDoubleRespond(t *testing.T) {
	tests := []struct {
		name          string
		first, second agent.Decision
	}{
		{"approve then reject", agent.Decision{Approved: true}, agent.Decision{Reason: "no"}},
		{"reject then approve", agent.Decision{Reason: "no"}, agent.Decision{Approved: true}},
		{"approve twice", agent.Decision{Approved: true, Reason: "first"}, agent.Decision{Approved: true, Reason: "second"}},
	}
	for _, tt := range tests {
		for _, waiting := range []bool{false, true} {
			name := tt.name + map[bool]string{false: "/before wait", true: "/while waiting"}[waiting]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					m := startApprovals(t, person.ApprovalsConfig{})
					req := request("s", 1)
					tk, err := m.Request(t.Context(), req)
					require.NoError(t, err)
					id := tk.ApprovalID()
					done := make(chan outcome, 1)
					wait := func() {
						d, err := tk.Wait(t.Context())
						done <- outcome{d, err}
					}
					if waiting {
						go wait()
						synctest.Wait()
					}
					p1, err1 := respond(m, "s", id, req, tt.first)
					p2, err2 := respond(m, "s", id, req, tt.second)
					require.NoError(t, err1)
					require.NoError(t, err2)
					if !p1 || p2 {
						t.Errorf("pending = %v, %v; want true, false", p1, p2)
					}
					if !waiting {
						wait()
					}
					got := <-done
					require.NoError(t, got.err)
					assert.Equal(t, byPerson(tt.first), got.d)
					assert.Equal(t, 0, m.Len())
				})
			})
		}
	}
}

// Race: a decision for another session's approval is refused and does not
// consume it.
func TestRespondOtherSession(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := request("alice", 1)
	tk, err := m.Request(context.Background(), req)
	require.NoError(t, err)
	id := tk.ApprovalID()

	pending, err := respond(m, "mallory", id, req, agent.Decision{Approved: true})
	if !errors.Is(err, approval.ErrWrongSession) || pending {
		t.Fatalf("Respond(other session) = %v, %v; want false, ErrWrongSession", pending, err)
	}
	require.Len(t, pendingList(t, m, "alice"), 1, "the approval stays pending")
	assert.Equal(t, 0, cancelSession(t, m, "mallory"), "CancelSession of another session must not touch it")

	pending, err = respond(m, "alice", id, req, agent.Decision{Reason: "no"})
	require.NoError(t, err)
	require.True(t, pending)
	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, byPerson(agent.Decision{Reason: "no"}), d)
}

func TestRespondValidation(t *testing.T) {
	tests := []struct {
		name    string
		d       agent.Decision
		wantErr error
	}{
		{"object", agent.Decision{Approved: true, Arguments: json.RawMessage(`{"a":[1,2]}`)}, nil},
		{"empty object", agent.Decision{Approved: true, Arguments: json.RawMessage(` {} `)}, nil},
		{"no arguments", agent.Decision{Approved: true}, nil},
		{"array", agent.Decision{Approved: true, Arguments: json.RawMessage(`[1]`)}, approval.ErrInvalidArguments},
		{"string", agent.Decision{Approved: true, Arguments: json.RawMessage(`"x"`)}, approval.ErrInvalidArguments},
		{"null", agent.Decision{Approved: true, Arguments: json.RawMessage(`null`)}, approval.ErrInvalidArguments},
		{"broken", agent.Decision{Approved: true, Arguments: json.RawMessage(`{"a":`)}, approval.ErrInvalidArguments},
		{"empty", agent.Decision{Approved: true, Arguments: json.RawMessage{}}, approval.ErrInvalidArguments},
		{"two values", agent.Decision{Approved: true, Arguments: json.RawMessage(`{} {}`)}, approval.ErrInvalidArguments},
		{"bad scope", agent.Decision{Approved: true, Scope: 7}, approval.ErrInvalidScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startApprovals(t, person.ApprovalsConfig{})
			tk, err := m.Request(context.Background(), request("s", 1))
			require.NoError(t, err)
			pending, err := respond(m, "s", tk.ApprovalID(), request("s", 1), tt.d)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Respond error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if pending {
					t.Error("pending = true with an error")
				}
				if got := len(pendingList(t, m, "s")); got != 1 {
					t.Errorf("after a refused decision %d approvals pending, want 1", got)
				}
			}
			cancelSession(t, m, "s")
			_, _ = tk.Wait(context.Background())
			assert.Equal(t, 0, m.Len())
		})
	}
}

// The decision's arguments are copied: the caller may reuse its buffer.
func TestRespondCopiesArguments(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	req := request("s", 1)
	tk, _ := m.Request(context.Background(), req)
	id := tk.ApprovalID()
	buf := []byte(`{"a":1}`)
	_, err := respond(m, "s", id, req, agent.Decision{Approved: true, Arguments: buf})
	require.NoError(t, err)
	copy(buf, `{"b":2}`)
	d, _ := tk.Wait(context.Background())
	assert.JSONEq(t, `{"a":1}`, string(d.Arguments))
}

func TestRespondUnknown(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	for _, id := range []string{"", "nope", "00000000000000000000000000000000"} {
		pending, err := respond(m, "s", id, request("s", 1), agent.Decision{Approved: true})
		if pending || err != nil {
			t.Errorf("Respond(%q) = %v, %v; want false, nil", id, pending, err)
		}
	}
}

func TestContextEnds(t *testing.T) {
	t.Run("already ended after Request", func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		req := request("s", 1)
		tk, _ := m.Request(context.Background(), req)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := tk.Wait(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		assert.Equal(t, cancelledDecision, d)
		assert.Equal(t, 0, m.Len())
	})
	t.Run("decision beats an ended context", func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		req := request("s", 1)
		tk, _ := m.Request(context.Background(), req)
		id := tk.ApprovalID()
		_, _ = respond(m, "s", id, req, agent.Decision{Approved: true})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := tk.Wait(ctx)
		require.NoError(t, err)
		assert.True(t, d.Approved, "a decision taken before the context ended wins")
		assert.Equal(t, 0, m.Len())
	})
	t.Run("ends during the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := startApprovals(t, person.ApprovalsConfig{})
			tk, err := m.Request(t.Context(), request("s", 1))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			d, err := tk.Wait(ctx)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, time.Second, time.Since(start))
			assert.Equal(t, cancelledDecision, d, "the caller's deadline is not the Approvals' timeout")
			assert.Equal(t, 0, m.Len())
		})
	})
}

func TestWaitTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		req := request("s", 1)
		tk, err := m.Request(t.Context(), req)
		require.NoError(t, err)
		done := make(chan outcome, 1)
		go func() {
			d, err := tk.Wait(t.Context())
			done <- outcome{d, err}
		}()
		synctest.Wait()
		_, err = tk.Wait(t.Context())
		assert.ErrorIs(t, err, approval.ErrAlreadyWaiting, "while the first Wait waits")
		cancelSession(t, m, "s")
		<-done
		_, err = tk.Wait(t.Context())
		assert.ErrorIs(t, err, approval.ErrAlreadyWaiting, "after the first Wait returned")
		assert.Equal(t, 0, m.Len())
	})
}

func TestOnRegisterAutoApprove(t *testing.T) {
	// A host hook that answers at once, like a browser's auto-approve list:
	// the decision lands before Wait waits, and is not lost.
	var m *person.Approvals
	var seen []approval.PendingApproval
	m = startApprovals(t, person.ApprovalsConfig{OnRegister: func(p approval.PendingApproval) {
		seen = append(seen, p)
		if _, err := m.Respond(context.Background(), person.ReplyTo(p, agent.Decision{Approved: true, By: "auto"})); err != nil {
			t.Errorf("Respond from OnRegister: %v", err)
		}
	}})
	tk, err := m.Request(context.Background(), request("s", 1))
	require.NoError(t, err)
	d, err := tk.Wait(context.Background())
	require.NoError(t, err)
	assert.True(t, d.Approved)
	require.Len(t, seen, 1)
	assert.Equal(t, "run_command", seen[0].Call.Name)
	assert.Equal(t, seen[0].ApprovalID, seen[0].Call.ApprovalID)
	assert.Equal(t, tk.ApprovalID(), seen[0].ApprovalID)
	assert.Equal(t, 0, m.Len())
}

func TestPendingListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		var ids []string
		var tickets []agent.Ticket
		for i := range 3 {
			tk, err := m.Request(t.Context(), request("s", i))
			require.NoError(t, err)
			ids = append(ids, tk.ApprovalID())
			tickets = append(tickets, tk)
			time.Sleep(time.Second)
		}
		_, _ = m.Request(t.Context(), request("other", 9))
		_, _ = respond(m, "s", ids[1], request("s", 1), agent.Decision{Approved: true})

		got := pendingList(t, m, "s")
		require.Len(t, got, 2)
		for i, want := range []int{0, 2} {
			assert.Equal(t, ids[want], got[i].ApprovalID)
			assert.Equal(t, "s", got[i].SessionID)
			assert.Equal(t, 1, got[i].Round)
			assert.Equal(t, request("s", want).Call.ID, got[i].Call.ID)
			assert.JSONEq(t, string(request("s", want).Call.Arguments), string(got[i].Call.Arguments))
		}
		assert.True(t, got[0].Created.Before(got[1].Created), "oldest first")
		assert.Empty(t, pendingList(t, m, "nobody"))
		assert.Equal(t, 4, m.Len(), "the decided entry waits for its Wait")
		cancelSession(t, m, "s")
		cancelSession(t, m, "other")
		d, _ := tickets[1].Wait(t.Context())
		assert.True(t, d.Approved, "a decided approval keeps its decision through CancelSession")
		assert.Equal(t, 0, m.Len())
	})
}

// cancelledDecision is what the Wait of a cancelled approval returns.
var cancelledDecision = agent.Decision{Reason: agent.CauseApprovalInterrupted.DefaultReason(), Cause: agent.CauseApprovalInterrupted,
	By: approval.ViaSystem, Via: approval.ViaSystem}

// TestPendingApprovalJSON: a listed approval names its id approval_id, as
// the chunks and the approval handler's body do.
func TestPendingApprovalJSON(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	tk, err := m.Request(t.Context(), request("s", 1))
	require.NoError(t, err)
	defer tk.Wait(context.Background()) //nolint:errcheck // releases the entry after CancelSession
	defer cancelSession(t, m, "s")
	b, err := json.Marshal(pendingList(t, m, "s")[0])
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &got))
	assert.JSONEq(t, `"`+tk.ApprovalID()+`"`, string(got["approval_id"]), "%s", b)
	assert.NotContains(t, got, "id")
}

// TestRequestDigestIsComputed: the record's digest is that of the
// request's arguments, whatever digest the request's call carries: a
// caller's wrong digest is never stored, and a Reply must name the real
// one.
func TestRequestDigestIsComputed(t *testing.T) {
	ctx := context.Background()
	m := startApprovals(t, person.ApprovalsConfig{})
	for _, carried := range []string{"", "sha256:0000", "wrong"} {
		req := request("s", len(carried))
		req.Call.ArgumentsDigest = carried
		tk, err := m.Request(ctx, req)
		require.NoError(t, err)
		ps := pendingList(t, m, "s")
		require.Len(t, ps, 1)
		assert.Equal(t, agent.ArgumentsDigest(req.Call.Arguments), ps[0].Call.ArgumentsDigest, "carried %q", carried)
		if carried != "" {
			r := reply("s", tk.ApprovalID(), req, agent.Decision{Approved: true})
			r.ArgumentsDigest = carried
			ok, err := m.Respond(ctx, r)
			assert.False(t, ok, "a reply naming the carried digest %q", carried)
			assert.Error(t, err)
		}
		require.Equal(t, 1, cancelSession(t, m, "s"))
		_, _ = tk.Wait(ctx)
	}
	assert.Equal(t, 0, m.Len())
}
