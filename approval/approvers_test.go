package approval_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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
		{"ApproveAll", approval.ApproveAll(), byPolicy("approve-all", agent.Decision{Approved: true})},
		{"DenyAll", approval.DenyAll("no tools today"), byPolicy("deny-all", agent.Decision{Reason: "no tools today"})},
		{"DenyAll default reason", approval.DenyAll(""), byPolicy("deny-all", agent.Decision{})}, // the agent says agent.CausePolicy.DefaultReason()
		{"Chain without policies", approval.Chain(approval.ApproveAll()), byPolicy("approve-all", agent.Decision{Approved: true})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, err := tt.a.Request(context.Background(), call("s", "run_command"))
			require.NoError(t, err)
			got, decided := tk.Decision()
			assert.True(t, decided, "a policy decides at once")
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("Chain nil next", func(t *testing.T) {
		_, err := approval.Chain(nil, approval.AllowTools("x")).Request(context.Background(), call("s", "run_command"))
		assert.ErrorIs(t, err, approval.ErrNilApprover)
	})
}

// counting counts the requests that reach a.
type counting struct {
	a agent.Approver
	n atomic.Int32
}

func (c *counting) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	c.n.Add(1)
	return c.a.Request(ctx, req)
}

func TestChainPolicies(t *testing.T) {
	next := &counting{a: person(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Reason: "asked a person"}, nil
	})}
	a := approval.Chain(next,
		nil, // skipped
		approval.DenyTools("never", "rm_rf"),
		approval.AllowTools("read_file", "list_dir"),
		approval.DenyTools("", "read_file"), // shadowed by AllowTools
	)
	tests := []struct {
		tool      string
		want      agent.Decision
		wantAsked bool
	}{
		{"read_file", byPolicy("allow-tools", agent.Decision{Approved: true}), false},
		{"list_dir", byPolicy("allow-tools", agent.Decision{Approved: true}), false},
		{"rm_rf", byPolicy("deny-tools", agent.Decision{Reason: "never"}), false},
		{"run_command", agent.Decision{Reason: "asked a person"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			next.n.Store(0)
			tk, err := a.Request(context.Background(), call("s", tt.tool))
			require.NoError(t, err)
			_, decided := tk.Decision()
			assert.Equal(t, !tt.wantAsked, decided, "a policy's decision is taken at once, a person's is pending")
			got, err := tk.Wait(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantAsked, next.n.Load() == 1, "next asked")
		})
	}
}

func TestWithTimeout(t *testing.T) {
	wait := person(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	})
	decideAfter := func(d time.Duration) agent.Approver {
		return person(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
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
		{"times out", wait, time.Minute, 0, timedOut("1m0s"), nil, time.Minute},
		{"decides in time", decideAfter(time.Second), time.Minute, 0, agent.Decision{Approved: true}, nil, time.Second},
		{"caller ends first", wait, time.Minute, time.Second, agent.Decision{}, context.DeadlineExceeded, time.Second},
		{"no timeout", decideAfter(time.Hour), 0, 0, agent.Decision{Approved: true}, nil, time.Hour},
		{"a policy passes through", approval.ApproveAll(), time.Minute, 0, byPolicy("approve-all", agent.Decision{Approved: true}), nil, 0},
		{"nil approver", nil, time.Minute, 0, agent.Decision{}, approval.ErrNilApprover, 0},
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
				got, err := decide(ctx, approval.WithTimeout(tt.a, tt.timeout), call("s", "x"))
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
	next := person(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
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
			d, err := decide(context.Background(), a, st.req)
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
}

func TestConformance(t *testing.T) {
	approvers := []struct {
		name string
		new  func() agent.Approver
	}{
		{"ApproveAll", approval.ApproveAll},
		{"DenyAll", func() agent.Approver { return approval.DenyAll("") }},
		{"Terminal", func() agent.Approver {
			r, _ := io.Pipe() // nobody answers; Close ends the reader goroutine
			return approval.NewTerminal(r, io.Discard)
		}},
	}
	for _, a := range approvers {
		t.Run(a.name, func(t *testing.T) { approvaltest.Run(t, a.new) })
	}
}
