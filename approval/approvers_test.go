package approval_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/approval/approvaltest"
)

func call(session, tool string) agent.ApprovalRequest {
	r := request(session, 1)
	r.Call.Name = tool
	return r
}

func TestReadyApprovers(t *testing.T) {
	tests := []struct {
		name string
		a    agent.Approver
		want agent.Decision
	}{
		{"ApproveAll", approval.ApproveAll(), agent.Decision{Approved: true}},
		{"DenyAll", approval.DenyAll("no tools today"), agent.Decision{Reason: "no tools today"}},
		{"DenyAll default reason", approval.DenyAll(""), agent.Decision{Reason: approval.ReasonDenied}},
		{"Chain without policies", approval.Chain(approval.ApproveAll()), agent.Decision{Approved: true}},
		{"Chain nil next", approval.Chain(nil, approval.AllowTools("x")), agent.Decision{Reason: approval.ErrNilApprover.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Approve(context.Background(), call("s", "run_command"))
			if tt.want.Reason == approval.ErrNilApprover.Error() {
				assert.ErrorIs(t, err, approval.ErrNilApprover)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestChainPolicies(t *testing.T) {
	asked := 0
	next := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		asked++
		return agent.Decision{Reason: "asked a person"}, nil
	})
	a := approval.Chain(next,
		nil, // skipped
		approval.DenyTools("never", "rm_rf"),
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("", "read_file"), // shadowed by AllowTools
	)
	tests := []struct {
		tool      string
		want      agent.Decision
		wantAsked int
	}{
		{"read_file", agent.Decision{Approved: true}, 0},
		{"list_dir", agent.Decision{Approved: true}, 0},
		{"rm_rf", agent.Decision{Reason: "never"}, 0},
		{"run_command", agent.Decision{Reason: "asked a person"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			asked = 0
			got, err := a.Approve(context.Background(), call("s", tt.tool))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if asked != tt.wantAsked {
				t.Errorf("next asked %d times, want %d", asked, tt.wantAsked)
			}
		})
	}
	if _, ok := a.(agent.Preparer); ok {
		t.Error("Chain over a non-Preparer must not be a Preparer")
	}
}

// A Chain over a Manager forwards Prepare, and when a policy decides a
// prepared call it still releases the Manager's entry.
func TestChainForwardsPrepare(t *testing.T) {
	m := newManager(t, approval.ManagerConfig{})
	wrappers := []struct {
		name string
		a    agent.Approver
	}{
		{"Chain", approval.Chain(m, approval.AllowTools("read_file"))},
		{"AllowList.Wrap", approval.NewAllowList("read_file").Wrap(m)},
		{"WithTimeout", approval.WithTimeout(approval.Chain(m, approval.AllowTools("read_file")), time.Hour)},
	}
	for _, w := range wrappers {
		t.Run(w.name, func(t *testing.T) {
			p, ok := w.a.(agent.Preparer)
			require.True(t, ok, "must be a Preparer when it wraps one")

			// A policy decides: the Manager's entry is released.
			req := call("s", "read_file")
			id, err := p.Prepare(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, 1, m.Len(), "Prepare reaches the Manager")
			req.ApprovalID = id
			d, err := w.a.Approve(context.Background(), req)
			require.NoError(t, err)
			assert.True(t, d.Approved)
			assert.Equal(t, 0, m.Len(), "the policy's decision must release the Manager's entry")

			// No policy decides: the Manager's decision, even an early one,
			// comes through.
			req = call("s", "run_command")
			id, err = p.Prepare(context.Background(), req)
			require.NoError(t, err)
			req.ApprovalID = id
			pending, err := m.Respond("s", id, agent.Decision{Reason: "browser says no"})
			require.NoError(t, err)
			require.True(t, pending)
			d, err = w.a.Approve(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, agent.Decision{Reason: "browser says no"}, d)
			assert.Equal(t, 0, m.Len())
		})
	}
}

// A decision that a release discards must not leave a grant behind: the
// browser said "always" for a call a policy then decided.
func TestChainReleaseGrantsNothing(t *testing.T) {
	m := newManager(t, approval.ManagerConfig{})
	grants := approval.NewAllowList()
	a := approval.Chain(grants.Wrap(m), approval.DenyTools("no", "rm"))
	p := a.(agent.Preparer)
	req := call("s", "rm")
	id, err := p.Prepare(context.Background(), req)
	require.NoError(t, err)
	req.ApprovalID = id
	_, err = m.Respond("s", id, agent.Decision{Approved: true, Scope: agent.ScopeAlways})
	require.NoError(t, err)
	d, err := a.Approve(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, agent.Decision{Reason: "no"}, d)
	assert.Empty(t, grants.Tools("s"), "the discarded decision granted a tool")
	assert.Equal(t, 0, m.Len())
}

func TestWithTimeout(t *testing.T) {
	wait := agent.ApproverFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	})
	decideAfter := func(d time.Duration) agent.Approver {
		return agent.ApproverFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
			select {
			case <-time.After(d):
				return agent.Decision{Approved: true}, nil
			case <-ctx.Done():
				return agent.Decision{}, ctx.Err()
			}
		})
	}
	tests := []struct {
		name      string
		a         agent.Approver
		timeout   time.Duration
		callerEnd time.Duration // 0: the caller's context does not end
		want      agent.Decision
		wantErr   error
		wantAfter time.Duration
	}{
		{"times out", wait, time.Minute, 0, agent.Decision{Reason: "approval timed out after 1m0s"}, nil, time.Minute},
		{"decides in time", decideAfter(time.Second), time.Minute, 0, agent.Decision{Approved: true}, nil, time.Second},
		{"caller ends first", wait, time.Minute, time.Second, agent.Decision{}, context.DeadlineExceeded, time.Second},
		{"no timeout", decideAfter(time.Hour), 0, 0, agent.Decision{Approved: true}, nil, time.Hour},
		{"nil approver", nil, time.Minute, 0, agent.Decision{Reason: approval.ErrNilApprover.Error()}, approval.ErrNilApprover, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tt.callerEnd > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.callerEnd)
					defer cancel()
				}
				start := time.Now()
				got, err := approval.WithTimeout(tt.a, tt.timeout).Approve(ctx, call("s", "x"))
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				assert.Equal(t, tt.want, got)
				if took := time.Since(start); took != tt.wantAfter {
					t.Errorf("returned after %v, want %v", took, tt.wantAfter)
				}
			})
		})
	}
}

func TestAllowList(t *testing.T) {
	l := approval.NewAllowList("read_file")
	var mu sync.Mutex
	var answer agent.Decision
	asked := 0
	next := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return answer, nil
	})
	a := l.Wrap(next)
	steps := []struct {
		name      string
		req       agent.ApprovalRequest
		answer    agent.Decision // what the person says, if asked
		wantOK    bool
		wantAsked bool
	}{
		{"preset tool", call("s1", "read_file"), agent.Decision{}, true, false},
		{"ask once", call("s1", "shell"), agent.Decision{Approved: true}, true, true},
		{"once is not remembered", call("s1", "shell"), agent.Decision{Approved: true, Scope: agent.ScopeSession}, true, true},
		{"session grant", call("s1", "shell"), agent.Decision{}, true, false},
		{"not in another session", call("s2", "shell"), agent.Decision{Reason: "no", Scope: agent.ScopeAlways}, false, true},
		{"a rejection grants nothing", call("s2", "shell"), agent.Decision{Approved: true, Scope: agent.ScopeAlways}, true, true},
		{"always grant", call("s3", "shell"), agent.Decision{}, true, false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mu.Lock()
			answer, asked = st.answer, 0
			mu.Unlock()
			d, err := a.Approve(context.Background(), st.req)
			require.NoError(t, err)
			if d.Approved != st.wantOK {
				t.Errorf("Approved = %v, want %v", d.Approved, st.wantOK)
			}
			if (asked > 0) != st.wantAsked {
				t.Errorf("asked = %v, want %v", asked > 0, st.wantAsked)
			}
		})
	}
	assert.Equal(t, []string{"read_file", "shell"}, l.Tools("s1"))
	l.Revoke("shell")
	l.AllowInSession("s1", "edit")
	assert.False(t, l.Allowed("s1", "shell"))
	assert.True(t, l.Allowed("s1", "edit"))
	l.ForgetSession("s1")
	assert.False(t, l.Allowed("s1", "edit"))
	assert.Equal(t, []string{"read_file"}, l.Tools("s1"))
	if _, ok := a.(agent.Preparer); ok {
		t.Error("AllowList.Wrap over a non-Preparer must not be a Preparer")
	}
}

func TestConformance(t *testing.T) {
	approvers := []struct {
		name string
		new  func() agent.Approver
	}{
		{"Manager", func() agent.Approver {
			m, _ := approval.NewManager(approval.ManagerConfig{})
			return m
		}},
		{"ApproveAll", approval.ApproveAll},
		{"DenyAll", func() agent.Approver { return approval.DenyAll("") }},
		{"Chain/Manager", func() agent.Approver {
			m, _ := approval.NewManager(approval.ManagerConfig{})
			return approval.Chain(m, approval.AllowTools("read_file"))
		}},
		{"Chain/policy decides/Manager", func() agent.Approver {
			m, _ := approval.NewManager(approval.ManagerConfig{})
			return approval.Chain(m, approval.AllowTools("approvaltest_tool"))
		}},
		{"AllowList/Manager", func() agent.Approver {
			m, _ := approval.NewManager(approval.ManagerConfig{})
			return approval.NewAllowList().Wrap(m)
		}},
		{"WithTimeout/Manager", func() agent.Approver {
			m, _ := approval.NewManager(approval.ManagerConfig{})
			return approval.WithTimeout(m, time.Hour)
		}},
		{"Terminal", func() agent.Approver {
			r, _ := io.Pipe() // nobody answers; Close ends the reader goroutine
			return approval.NewTerminal(r, io.Discard)
		}},
	}
	for _, a := range approvers {
		t.Run(a.name, func(t *testing.T) { approvaltest.Run(t, a.new) })
	}
}
