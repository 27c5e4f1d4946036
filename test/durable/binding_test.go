package durable

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// TestDecisionBindingAcrossReplicas: a turn on A waits for an approval; B
// refuses decisions that name another arguments digest (409), another
// call id (409), another tool (409) or another session (403), the tool
// does not run and the approval stays pending; the decision that names the
// call A shows, posted to B, runs the tool once.
func TestDecisionBindingAcrossReplicas(t *testing.T) {
	checkLeaks(t)
	a, b, effects := twoReplicas(t)
	ctx := testContext(t, 60*time.Second)

	turn := a.turn(ctx, t, "s1", "k1")
	call := turn.waitFor(ctx, t, "approval_required", isState(agent.StateApprovalRequired)).tool()
	require.NotEmpty(t, call.ArgumentsDigest, "approval_required without an arguments digest")
	right := decisionFor("s1", call, true)

	otherDigest := agent.ArgumentsDigest(json.RawMessage(`{"key":"k2"}`))
	require.NotEqual(t, call.ArgumentsDigest, otherDigest)
	for _, c := range []struct {
		name   string
		change func(*decision)
		status int
	}{
		{"another arguments digest", func(d *decision) { d.ArgumentsDigest = otherDigest }, http.StatusConflict},
		{"no arguments digest", func(d *decision) { d.ArgumentsDigest = "" }, http.StatusBadRequest},
		{"another call id", func(d *decision) { d.CallID = "call_other" }, http.StatusConflict},
		{"another tool", func(d *decision) { d.Tool = "slow" }, http.StatusConflict},
		{"another session", func(d *decision) { d.SessionID = "s2" }, http.StatusForbidden},
	} {
		d := right
		c.change(&d)
		status, body, err := b.approve(ctx, d)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.status, status, "%s: %s", c.name, body)
		if c.status == http.StatusConflict {
			assert.Contains(t, body, "not for the call the approval shows", "%s: refused as a mismatch", c.name)
		}
	}

	// Nothing ran, and the approval waits as before: A's run shows no
	// decision, and the store lists the approval as pending.
	assert.Empty(t, executions(t, effects, "k1"), "a refused decision ran the tool")
	var pending []memory.Approval
	require.NoError(t, b.get(ctx, "/approvals?session=s1", &pending))
	if assert.Len(t, pending, 1, "the pending approvals after the refused decisions") {
		assert.Equal(t, call.ApprovalID, pending[0].ID)
		assert.False(t, pending[0].Decided)
	}
	for _, e := range turn.buffered() {
		if e.tool() != nil && e.tool().State != agent.StateApprovalRequired {
			t.Errorf("a refused decision moved A's run: %s", e)
		}
	}

	b.mustApprove(ctx, t, right)
	turn.waitFor(ctx, t, "the result on A", isState(agent.StateResult))
	turn.waitFor(ctx, t, "the end of A's turn", isEnd("turn"))
	got := executions(t, effects, "k1")
	if assert.Len(t, got, 1, "executions of k1") {
		assert.Equal(t, "A", got[0].Holder)
	}
	// A refused decision posted after the right one changes nothing.
	d := right
	d.Approved = false
	status, body, err := b.approve(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status, "a second decision: %s", body)
	assert.False(t, taken(status, body), "a second decision: %s", body)
	checkHistory(t, a.history(ctx, t, "s1"))
}
