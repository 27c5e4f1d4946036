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

// The wrappers over a Manager pass its ticket through: a call no policy
// decides is registered with the Manager before the agent shows it, so an
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
			// A policy decides: nothing reaches the Manager.
			tk, err := w.a.Request(context.Background(), call("s", "read_file"))
			require.NoError(t, err)
			d, decided := tk.Decision()
			assert.True(t, decided && d.Approved, "decided at once: %+v", d)
			assert.Equal(t, 0, m.Len(), "a policy's decision registers nothing")

			// No policy decides: the Manager's ticket, and its early
			// decision, come through.
			tk, err = w.a.Request(context.Background(), call("s", "run_command"))
			require.NoError(t, err)
			_, decided = tk.Decision()
			require.False(t, decided)
			require.Len(t, pendingList(t, m, "s"), 1)
			assert.Equal(t, pendingList(t, m, "s")[0].ApprovalID, tk.ApprovalID(), "the Manager's approval id")
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

// WithTimeout around a Manager: the Manager's entry is released when the
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
		{"Manager", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return m
		}},
		{"Manager/durable", func() agent.Approver {
			st := &memory.MemStore{}
			m, _ := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st, SuspendAfter: time.Hour, OnDecided: func(memory.Approval) {}})
			return m // an io.Closer: the suite closes it
		}},
		{"Chain/Manager/durable", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{Store: &memory.MemStore{}})
			return approval.Chain(m, approval.AllowTools("read_file"))
		}},
		{"Chain/Manager", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.Chain(m, approval.AllowTools("read_file"))
		}},
		{"Chain/policy decides/Manager", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.Chain(m, approval.AllowTools("approvaltest_tool"))
		}},
		{"AllowList/Manager", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.NewAllowList().Wrap(m)
		}},
		{"WithTimeout/Manager", func() agent.Approver {
			m, _ := person.StartApprovals(person.ApprovalsConfig{})
			return approval.WithTimeout(m, time.Hour)
		}},
	}
	for _, a := range approvers {
		t.Run(a.name, func(t *testing.T) { approvaltest.Run(t, a.new) })
	}
}
