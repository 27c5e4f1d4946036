package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

// openCall describes one open call of a session for TestResumableSessions.
type openCall struct {
	executing bool
	approval  string // "" none, "pending", "decided", "lost" (unknown id), "foreign" (another session's)
}

func TestResumableSessions(t *testing.T) {
	tests := []struct {
		name  string
		calls []openCall
		want  bool
	}{
		{"executing", []openCall{{executing: true, approval: "decided"}}, true},
		{"executing without approval", []openCall{{executing: true}}, true},
		{"decided", []openCall{{approval: "decided"}}, true},
		{"waiting for a person", []openCall{{approval: "pending"}}, false},
		{"waiting, and a call not asked yet", []openCall{{approval: "pending"}, {}}, false},
		{"a call not asked yet", []openCall{{}}, true},
		{"decided, then not asked yet", []openCall{{approval: "decided"}, {}}, true},
		{"decided and waiting", []openCall{{approval: "decided"}, {approval: "pending"}}, true},
		{"approval lost", []openCall{{approval: "lost"}}, true},
		{"approval lost, another waiting", []openCall{{approval: "lost"}, {approval: "pending"}}, false},
		{"another session's approval id", []openCall{{approval: "foreign"}}, true},
		{"executing and waiting", []openCall{{approval: "pending"}, {executing: true}}, true},
	}
	ctx := context.Background()
	st := &memory.MemStore{}
	_, err := st.CreateSession(ctx, memory.Session{ID: "elsewhere"})
	require.NoError(t, err)
	foreign := memory.Approval{ID: "foreign", SessionID: "elsewhere", CallID: "c", Tool: "t"}
	require.NoError(t, st.CreateApproval(ctx, foreign))
	var want []string
	for i, tt := range tests {
		s := fmt.Sprintf("s%02d", i)
		_, err := st.CreateSession(ctx, memory.Session{ID: s, Title: tt.name})
		require.NoError(t, err)
		for j, c := range tt.calls {
			oc := memory.OpenCall{MessageID: 1, CallID: fmt.Sprint("call_", j), Round: 1, Executing: c.executing}
			switch c.approval {
			case "pending", "decided":
				oc.ApprovalID = fmt.Sprintf("%s-%d", s, j)
				require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: oc.ApprovalID, SessionID: s, CallID: oc.CallID, Tool: "t"}))
				if c.approval == "decided" {
					_, err := st.DecideApproval(ctx, s, oc.ApprovalID, memory.ApprovalDecision{Approved: true})
					require.NoError(t, err)
				}
			case "lost":
				oc.ApprovalID = "nobody-knows"
			case "foreign":
				oc.ApprovalID = foreign.ID
			}
			require.NoError(t, st.SaveCall(ctx, s, oc))
		}
		if tt.want {
			want = append(want, s)
		}
	}
	_, err = st.CreateSession(ctx, memory.Session{ID: "closed"}) // no open calls
	require.NoError(t, err)

	got, err := resumableSessions(ctx, st, st)
	require.NoError(t, err)
	assert.Equal(t, want, got, "sorted")
	for i, tt := range tests {
		s := fmt.Sprintf("s%02d", i)
		assert.Equal(t, tt.want, contains(got, s), "%s (%s)", tt.name, s)
	}

	t.Run("store fails", func(t *testing.T) {
		_, err := resumableSessions(ctx, st, brokenApprovals{st})
		require.ErrorIs(t, err, errStoreDown)
		assert.Contains(t, err.Error(), "approval ")
		_, err = resumableSessions(ctx, brokenLog{st}, st)
		require.ErrorIs(t, err, errStoreDown)
		assert.Contains(t, err.Error(), "sessions with open calls")
	})
	t.Run("session deleted meanwhile", func(t *testing.T) {
		got, err := resumableSessions(ctx, vanishingLog{st}, st)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// errStoreDown is the error of a store that fails.
var errStoreDown = errors.New("store down")

// brokenApprovals is an ApprovalStore that cannot read an approval.
type brokenApprovals struct{ *memory.MemStore }

func (brokenApprovals) GetApproval(context.Context, string) (memory.Approval, error) {
	return memory.Approval{}, errStoreDown
}

// brokenLog is a CallLog that cannot list its sessions.
type brokenLog struct{ *memory.MemStore }

func (brokenLog) OpenSessions(context.Context) ([]string, error) { return nil, errStoreDown }

// vanishingLog is a CallLog whose sessions are deleted between the listing
// and the reading of their calls.
type vanishingLog struct{ *memory.MemStore }

func (vanishingLog) OpenCalls(_ context.Context, id string) ([]memory.OpenCall, error) {
	return nil, fmt.Errorf("open calls of %q: %w", id, memory.ErrNotFound)
}
