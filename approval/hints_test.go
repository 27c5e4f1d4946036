package approval_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// TestReadOnlyHints: the policy approves a trusted read-only, closed-world
// tool at once and leaves everything else to a person: untrusted hints, a
// destructive or open-world tool, no hints, and a call that must be asked
// about, which no policy of a Chain approves (AllowList's neither).
func TestReadOnlyHints(t *testing.T) {
	safe := agent.ToolHints{ReadOnly: true, Trusted: true}
	tests := []struct {
		name      string
		hints     *agent.ToolHints
		mustAsk   bool
		wantAsked bool
	}{
		{"trusted read-only", &safe, false, false},
		{"untrusted read-only", &agent.ToolHints{ReadOnly: true}, false, true},
		{"trusted read-only open world", &agent.ToolHints{ReadOnly: true, OpenWorld: true, Trusted: true}, false, true},
		{"trusted destructive", &agent.ToolHints{Destructive: true, Trusted: true}, false, true},
		{"trusted, destructive and read-only", &agent.ToolHints{ReadOnly: true, Destructive: true, Trusted: true}, false, true},
		{"no hints", nil, false, true},
		{"trusted read-only, must ask", &safe, true, true},
	}
	next := &counting{a: person(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Reason: "asked a person"}, nil
	})}
	a := approval.NewAllowList("lookup").Wrap(approval.Chain(next, approval.ReadOnlyHints()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next.n.Store(0)
			req := call("s", "read_db")
			req.Call.Hints, req.Call.MustAsk = tt.hints, tt.mustAsk
			tk, err := a.Request(context.Background(), req)
			require.NoError(t, err)
			d, err := tk.Wait(context.Background())
			require.NoError(t, err)
			if tt.wantAsked {
				assert.Equal(t, agent.Decision{Reason: "asked a person"}, d)
				assert.Equal(t, int32(1), next.n.Load())
			} else {
				assert.Equal(t, byPolicy("read-only-hints", agent.Decision{Approved: true}), d)
				assert.Equal(t, int32(0), next.n.Load())
			}
		})
	}
	t.Run("allow-listed tool that must ask", func(t *testing.T) {
		next.n.Store(0)
		req := call("s", "lookup")
		req.Call.MustAsk = true
		tk, err := a.Request(context.Background(), req)
		require.NoError(t, err)
		d, err := tk.Wait(context.Background())
		require.NoError(t, err)
		assert.Equal(t, agent.Decision{Reason: "asked a person"}, d)
		assert.Equal(t, int32(1), next.n.Load())
	})
	t.Run("a policy's rejection stands", func(t *testing.T) {
		req := call("s", "rm_rf")
		req.Call.MustAsk = true
		tk, err := approval.Chain(next, approval.DenyTools("never", "rm_rf")).Request(context.Background(), req)
		require.NoError(t, err)
		d, decided := tk.Decision()
		assert.True(t, decided)
		assert.Equal(t, byPolicy("deny-tools", agent.Decision{Reason: "never"}), d)
	})
}

// TestTerminalShowsHintsAndDetails: the prompt shows a call's hints and
// details, and a call that must be asked about is asked even for a tool
// answered "always".
func TestTerminalShowsHintsAndDetails(t *testing.T) {
	term, w, out := pipeTerminal(t)
	go io.WriteString(w, "a\n")
	req := commandCall()
	req.Call.Hints = &agent.ToolHints{Destructive: true, OpenWorld: true}
	d, err := decide(context.Background(), term, req)
	require.NoError(t, err)
	require.True(t, d.Approved)
	assert.Contains(t, out.String(), "hints: destructive, open world, untrusted hints")

	req.Call.MustAsk = true
	req.Call.Details = []string{"description changed: \"a\" → \"b\""}
	go io.WriteString(w, "y\n")
	tk, err := term.Request(context.Background(), req)
	require.NoError(t, err)
	_, decided := tk.Decision()
	assert.False(t, decided, "asked despite the always grant")
	d, err = tk.Wait(context.Background())
	require.NoError(t, err)
	assert.True(t, d.Approved)
	assert.Equal(t, 2, strings.Count(out.String(), "approve [y]"))
	assert.Contains(t, out.String(), "\n  description changed: \"a\" → \"b\"\napprove [y]")
}

func TestHintLabels(t *testing.T) {
	assert.Nil(t, approval.HintLabels(nil))
	assert.Equal(t, []string{"read-only", "idempotent", "closed world"}, approval.HintLabels(&agent.ToolHints{ReadOnly: true, Idempotent: true, Trusted: true}))
	assert.Equal(t, []string{"closed world", "untrusted hints"}, approval.HintLabels(&agent.ToolHints{}))
}
