// Package upgradetest holds the checks the SQLite and PostgreSQL stores'
// tests share on what their migrations bring from an older schema.
package upgradetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// ApprovalsFromBeforeDigests checks, through the runner's approvals
// (person.Approvals) on st, the approvals a store's migration brought from
// the schema before approvals had kinds, keys and digests: "old-pending"
// (pending, for call c1 running {"command": "ls -l"}) and "old-decided"
// (denied, "not that", for c2 running {"command": "rm x"}), whose calls are
// in the assistant message msg of session "s". The card shows the digest of
// the stored arguments, a resumed turn finds both by key, and a decision
// binds by the digest.
func ApprovalsFromBeforeDigests(t *testing.T, st memory.ApprovalStore, msg int64) {
	ctx := t.Context()
	m, err := person.StartApprovals(person.ApprovalsConfig{Store: st})
	require.NoError(t, err)
	args := json.RawMessage(`{"command":"ls -l"}`)
	digest := agent.ArgumentsDigest(args)

	list, err := m.Pending(ctx, "s")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "old-pending", list[0].ApprovalID)
	assert.Equal(t, digest, list[0].Call.ArgumentsDigest, "the card shows the digest of the stored arguments")

	// The turn resumed after the upgrade asks about its calls by key.
	req := func(id, command string) agent.ApprovalRequest {
		a := json.RawMessage(`{"command":"` + command + `"}`)
		return agent.ApprovalRequest{SessionID: "s", Round: 1, Key: fmt.Sprint(msg, "/", id),
			Call: agent.ToolCall{ID: id, Name: "run_command", Arguments: a, ArgumentsDigest: agent.ArgumentsDigest(a)}}
	}
	decided, err := m.Request(ctx, req("c2", "rm x"))
	require.NoError(t, err)
	d, ok := decided.Decision()
	require.True(t, ok, "the decided approval's decision, not a new card")
	assert.False(t, d.Approved)
	assert.Equal(t, "not that", d.Reason)
	tk, err := m.Request(ctx, req("c1", "ls -l"))
	require.NoError(t, err)
	require.Equal(t, "old-pending", tk.ApprovalID(), "the pending approval, not a second one")

	reply := person.Reply{SessionID: "s", ApprovalID: "old-pending", CallID: "c1", Tool: "run_command",
		Decision: agent.Decision{Approved: true, By: "alice"}}
	reply.ArgumentsDigest = agent.ArgumentsDigest(json.RawMessage(`{"command":"rm -rf /"}`))
	pending, err := m.Respond(ctx, reply)
	require.ErrorIs(t, err, approval.ErrMismatch, "a decision on other arguments")
	assert.False(t, pending)
	reply.ArgumentsDigest = digest
	pending, err = m.Respond(ctx, reply)
	require.NoError(t, err)
	assert.True(t, pending, "decided by the digest of its arguments")
	got, err := tk.Wait(ctx)
	require.NoError(t, err)
	assert.True(t, got.Approved)
	assert.Equal(t, "alice", got.By)
	assert.Zero(t, m.Len())
	list, err = m.Pending(ctx, "s")
	require.NoError(t, err)
	assert.Empty(t, list)
}
