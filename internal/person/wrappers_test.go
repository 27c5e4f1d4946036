package person_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/approval/approvaltest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

func call(session, tool string) agent.ApprovalRequest {
	r := request(session, 1)
	r.Call.Name = tool
	return r
}

// The wrappers over an Approvals pass its ticket through: a call no policy
// decides is registered with the Approvals before the agent shows it, so an
// early decision lands; a call a policy decides registers nothing.
func TestWrappersPassTheTicket(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	grants := approval.NewAllowList()
	wrappers := []struct {
		name string
		a    agent.Approver
	}{
		{"Chain", approval.Chain(m, approval.AllowTools("read_file"))},
		{"AllowList.Wrap", approval.NewAllowList("read_file").Wrap(m)},
		{"WithTimeout", approval.WithTimeout(approval.Chain(m, approval.AllowTools("read_file")), time.Hour)},
		{"Chain/AllowList.Wrap", approval.Chain(grants.Wrap(m), approval.AllowTools("read_file"))},
	}
	for _, w := range wrappers {
		t.Run(w.name, func(t *testing.T) {
			// A policy decides: nothing reaches the Approvals.
			tk, err := w.a.Request(context.Background(), call("s", "read_file"))
			require.NoError(t, err)
			d, decided := tk.Decision()
			assert.True(t, decided && d.Approved, "decided at once: %+v", d)
			assert.Equal(t, 0, m.Len(), "a policy's decision registers nothing")

			// No policy decides: the Approvals' ticket, and its early
			// decision, come through.
			tk, err = w.a.Request(context.Background(), call("s", "run_command"))
			require.NoError(t, err)
			_, decided = tk.Decision()
			require.False(t, decided)
			require.Len(t, pendingList(t, m, "s"), 1)
			assert.Equal(t, pendingList(t, m, "s")[0].ApprovalID, tk.ApprovalID(), "the Approvals' approval id")
			pending, err := respond(m, "s", tk.ApprovalID(), call("s", "run_command"), agent.Decision{Approved: true, Scope: agent.ScopeAlways})
			require.NoError(t, err)
			require.True(t, pending)
			d, err = tk.Wait(context.Background())
			require.NoError(t, err)
			assert.Equal(t, byPerson(agent.Decision{Approved: true, Scope: agent.ScopeAlways}), d)
			assert.Equal(t, 0, m.Len())
		})
	}
	assert.Equal(t, []string{"run_command"}, grants.Tools("other session"), "the wrapped AllowList saw the grant")
}

// WithTimeout around an Approvals: the Approvals' entry is released when the
// wrapper's time is up, and the rejection is a timeout.
func TestWithTimeoutReleasesTheManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startApprovals(t, person.ApprovalsConfig{})
		d, err := decide(t.Context(), approval.WithTimeout(m, time.Minute), call("s", "x"))
		require.NoError(t, err)
		assert.Equal(t, timedOut("1m0s"), d)
		assert.Equal(t, 0, m.Len())
	})
}

// TestConformance runs approvaltest's suite on the Approvals, alone and
// wrapped by the approvers of package approval.
func TestConformance(t *testing.T) {
	approvers := []struct {
		name string
		new  func() agent.Approver
	}{
		{"Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return m
		}},
		{"Approvals/durable", func() agent.Approver {
			st := &memory.MemStore{}
			m, _ := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st, SuspendAfter: time.Hour, OnDecided: func(memory.Approval) {}})
			return m // an io.Closer: the suite closes it
		}},
		{"Chain/Approvals/durable", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{Store: &memory.MemStore{}})
			return approval.Chain(m, approval.AllowTools("read_file"))
		}},
		{"Chain/Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.Chain(m, approval.AllowTools("read_file"))
		}},
		{"Chain/policy decides/Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.Chain(m, approval.AllowTools("approvaltest_tool"))
		}},
		{"AllowList/Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.NewAllowList().Wrap(m)
		}},
		{"Approver/Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return m.Approver(approval.AllowTools("read_file"))
		}},
		{"Approver/policy decides/Approvals/durable", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{Store: &memory.MemStore{}})
			return m.Approver(approval.AllowTools("approvaltest_tool"))
		}},
		{"WithTimeout/Approvals", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.WithTimeout(m, time.Hour)
		}},
	}
	for _, a := range approvers {
		t.Run(a.name, func(t *testing.T) { approvaltest.Run(t, a.new) })
	}
}

// TestApproverMustAsk: the Approver's policies never approve a call that
// must be asked about (agent.ToolCall.MustAsk): a policy's approval of it
// counts as abstaining, the next policy is asked, and with none left the
// call waits for a person, registered with the approvals; a policy's
// rejection of it stands, and is recorded for the audit. A nil policy is
// skipped.
func TestApproverMustAsk(t *testing.T) {
	m := startApprovals(t, person.ApprovalsConfig{})
	approveAll := approval.Named("approve", func(context.Context, agent.ApprovalRequest) (agent.Decision, bool) {
		return agent.Decision{Approved: true}, true
	})
	a := m.Approver(nil, approveAll, approval.DenyTools("never", "rm"))

	plain := call("s", "ls")
	d, err := decide(t.Context(), a, plain)
	require.NoError(t, err)
	assert.Equal(t, agent.Decision{Approved: true, By: "policy:approve", Via: approval.ViaPolicy}, d, "a call that need not ask")

	mustAsk := call("s", "ls")
	mustAsk.Call.ID, mustAsk.Call.MustAsk = "call_must", true
	tk, err := a.Request(t.Context(), mustAsk)
	require.NoError(t, err)
	_, decided := tk.Decision()
	require.False(t, decided, "a policy's approval of a call that must ask counts as abstaining")
	require.Len(t, pendingList(t, m, "s"), 1)
	assert.Equal(t, tk.ApprovalID(), pendingList(t, m, "s")[0].ApprovalID)
	ok, err := respond(m, "s", tk.ApprovalID(), mustAsk, agent.Decision{Reason: "not now", By: "alice"})
	require.NoError(t, err)
	require.True(t, ok)
	d, err = tk.Wait(t.Context())
	require.NoError(t, err)
	assert.False(t, d.Approved)
	assert.Equal(t, "alice", d.By)

	rm := call("s", "rm")
	rm.Call.ID, rm.Call.MustAsk = "call_rm", true
	a = m.Approver(approval.DenyTools("never", "rm"), approveAll)
	d, err = decide(t.Context(), a, rm)
	require.NoError(t, err)
	assert.False(t, d.Approved, "a policy's rejection of a call that must ask stands")
	assert.Equal(t, "policy:deny-tools", d.By)

	var by []string
	for r, err := range m.Decisions(t.Context(), approval.DecisionQuery{SessionID: "s"}) {
		require.NoError(t, err)
		by = append(by, r.Tool+" "+r.Decision.By)
	}
	assert.Equal(t, []string{"ls policy:approve", "ls alice", "rm policy:deny-tools"}, by, "the audit")
	assert.Equal(t, 0, m.Len())
}
