package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
)

// TestRejectionCauses: every way a call can end without running gives its
// rejected chunk a typed cause beside the human reason, and the chunk's JSON
// carries it as a stable string. History rebuilds the turn from the chunks.
func TestRejectionCauses(t *testing.T) {
	oneCall := agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls")
	blocking := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather"},
		Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
			p.WriteString("looking\n")
			<-ctx.Done()
			return "", ctx.Err()
		},
	}
	tests := []struct {
		name    string
		replies []agenttest.Response
		cfg     func(c *agent.Config, cancel context.CancelFunc)
		tool    agent.Tool
		// stop, when set, cancels the run at the chunk it matches.
		stop       func(c agent.Chunk) bool
		wantCause  agent.Cause
		wantReason string // "" checks only that there is one
		wantErr    bool
	}{
		{"a person rejects", []agenttest.Response{oneCall}, func(c *agent.Config, _ context.CancelFunc) {
			c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{}, nil
			})
		}, nil, nil, agent.CauseUser, agent.CauseUser.DefaultReason(), false},
		{"a policy rejects", []agenttest.Response{oneCall}, func(c *agent.Config, _ context.CancelFunc) {
			c.Approver = approval.DenyAll("")
		}, nil, nil, agent.CausePolicy, agent.CausePolicy.DefaultReason(), false},
		{"nobody answers in time", []agenttest.Response{oneCall}, func(c *agent.Config, _ context.CancelFunc) {
			m, err := person.StartApprovals(person.ApprovalsConfig{Timeout: 20 * time.Millisecond})
			require.NoError(t, err)
			c.Approver = m
		}, nil, nil, agent.CauseTimeout, "approval timed out after 20ms", false},
		{"interrupted while waiting for approval", []agenttest.Response{oneCall}, func(c *agent.Config, cancel context.CancelFunc) {
			c.Approver = personFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
				cancel()
				<-ctx.Done()
				return agent.Decision{}, ctx.Err()
			})
		}, nil, nil, agent.CauseApprovalInterrupted, agent.CauseApprovalInterrupted.DefaultReason(), false},
		{"interrupted while running", []agenttest.Response{oneCall}, nil, blocking, func(c agent.Chunk) bool {
			return c.Kind == agent.KindToolCall && c.Tool.PartialResult != ""
		}, agent.CauseInterrupted, agent.CauseInterrupted.DefaultReason(), false},
		{"not run after a rejection", []agenttest.Response{agenttest.Reply().
			Call(0, "call_0", "get_weather", `{"city":"Bergen"}`).
			Call(1, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls")}, func(c *agent.Config, _ context.CancelFunc) {
			c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Reason: "no"}, nil
			})
		}, nil, nil, agent.CauseNotRun, agent.CauseNotRun.DefaultReason(), false},
		{"the response did not finish", []agenttest.Response{
			agenttest.Reply().Call(0, "call_1", "get_weather", `{"ci`, `ty":"Oslo"}`).Finish("tool_calls").CutAfter(1),
		}, nil, nil, nil, agent.CauseIncomplete, agent.CauseIncomplete.DefaultReason(), true},
		{"invalid arguments", []agenttest.Response{
			agenttest.Reply().Call(0, "call_1", "get_weather", `["Oslo"]`).Finish("tool_calls"),
			agenttest.Reply().Text("Sorry.").Finish("stop"),
		}, nil, nil, nil, agent.CauseInvalidArguments, "", false},
		{"unknown tool", []agenttest.Response{
			agenttest.Reply().Call(0, "call_1", "get_wether", `{}`).Finish("tool_calls").Unsolicited(),
			agenttest.Reply().Text("Sorry.").Finish("stop"),
		}, nil, nil, nil, agent.CauseUnknownTool, "", false},
		{"the approver fails", []agenttest.Response{oneCall}, func(c *agent.Config, _ context.CancelFunc) {
			c.Approver = approval.Chain(nil) // fails every request
		}, nil, nil, agent.CauseApprovalFailed, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := newServer(t)
			srv.Enqueue(append([]agenttest.Response{planNeedTool()}, tt.replies...)...)
			tool := tt.tool
			if tool == nil {
				tool = weatherTool()
			}
			a := newAgent(t, srv, func(c *agent.Config) {
				if tt.cfg != nil {
					tt.cfg(c, cancel)
				}
			}, tool)
			turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "weather in Oslo"})
			var (
				chunks []agent.Chunk
				runErr error
			)
			for c, err := range turn.Run(ctx) {
				if err != nil {
					runErr = err
					break
				}
				chunks = append(chunks, c)
				if tt.stop != nil && tt.stop(c) {
					cancel()
				}
			}
			assert.Equal(t, tt.wantErr, runErr != nil, "run error: %v", runErr)
			rej := rejection(t, chunks, "call_1")
			assert.Equal(t, tt.wantCause, rej.Cause)
			assert.NotEmpty(t, rej.Reason)
			if tt.wantReason != "" {
				assert.Equal(t, tt.wantReason, rej.Reason)
			}
			b, err := json.Marshal(agent.Chunk{Kind: agent.KindToolRejected, Tool: rej})
			require.NoError(t, err)
			assert.Contains(t, string(b), `"cause":"`+string(tt.wantCause)+`"`)
			var back agent.Chunk
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.wantCause, back.Tool.Cause)

			msgs := turn.Messages()
			validHistory(t, msgs)
			closedCards(t, chunks)
			assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)))
		})
	}
}

// TestHistoryFromJSONLeavesIncompleteCallsOut: a chunk log read back from
// JSON (such as the CLI's -json output) tells an incomplete call by its
// cause, so History leaves it out as it does for the chunks themselves.
func TestHistoryFromJSONLeavesIncompleteCallsOut(t *testing.T) {
	log := `{"kind":"text","round":1,"text":"Checking.","raw":"Checking."}
{"kind":"tool_call","round":1,"tool":{"id":"call_1","name":"get_weather","state":"start"}}
{"kind":"tool_rejected","round":1,"tool":{"id":"call_1","name":"get_weather","state":"rejected","reason":"the stream broke","cause":"incomplete"}}
`
	var chunks []agent.Chunk
	dec := json.NewDecoder(strings.NewReader(log))
	for dec.More() {
		var c agent.Chunk
		require.NoError(t, dec.Decode(&c))
		chunks = append(chunks, c)
	}
	msgs := agent.History(chunks)
	require.Len(t, msgs, 1)
	assert.Equal(t, "Checking.", msgs[0].Content)
	assert.Empty(t, msgs[0].ToolCalls, "the incomplete call never ran")
}

// TestPolicyDecisionsShowNoCard: a decision taken without asking anybody
// (ApproverFunc, approval.ApproveAll, a policy in front of a person) yields
// no approval_required chunk: an approval goes straight to executing, a
// rejection to the rejected chunk with cause policy. Calls that reach a
// person show their card.
func TestPolicyDecisionsShowNoCard(t *testing.T) {
	m, err := person.StartApprovals(person.ApprovalsConfig{})
	require.NoError(t, err)
	tests := []struct {
		name     string
		approver agent.Approver
		want     []string // the round's tool chunks
	}{
		{"ApproveAll", approval.ApproveAll(), []string{
			"tool:executing:get_weather", "tool:result:get_weather",
			"tool:executing:get_weather", "tool:result:get_weather"}},
		{"ApproverFunc rejects", agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Reason: "not here"}, nil
		}), []string{"rejected:get_weather:not here", "rejected:get_weather:not here"}},
		{"policy in front of a person", m.Approver(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
			return agent.Decision{Approved: true}, req.Call.ID == "call_1"
		}), []string{
			"tool:executing:get_weather", "tool:result:get_weather",
			"tool:approval_required:get_weather", "tool:executing:get_weather", "tool:result:get_weather"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Call(1, "call_2", "get_weather", `{"city":"Rome"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"))
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Approver = tt.approver
				c.OnReject = agent.RejectContinue
			}, weatherTool())
			var chunks []agent.Chunk
			for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
					// The person answers the card as soon as it shows.
					ok, err := m.Respond(context.Background(), replyTo("s1", *c.Tool, agent.Decision{Approved: true}))
					require.NoError(t, err)
					assert.True(t, ok, "card of %s: the Manager holds no approval for it", c.Tool.ID)
				}
			}
			tr := trace(chunks)
			assert.Equal(t, tt.want, tr[4:4+len(tt.want)], "%v", tr)
			for _, c := range chunks {
				if c.Kind == agent.KindToolRejected {
					assert.Equal(t, agent.CausePolicy, c.Tool.Cause)
				}
			}
			assert.Zero(t, m.Len())
		})
	}
}

// TestCauseDefaultReason pins the default reasons: they are on the wire (in
// chunks, tool messages and stored histories), so changing one is a change
// of behaviour, not a refactoring.
func TestCauseDefaultReason(t *testing.T) {
	for _, tt := range []struct {
		cause agent.Cause
		want  string
	}{
		{agent.CauseUser, "rejected by user"},
		{agent.CausePolicy, "denied by policy"},
		{agent.CauseTimeout, "approval timed out"},
		{agent.CauseApprovalInterrupted, "interrupted while waiting for approval"},
		{agent.CauseInterrupted, "tool call interrupted"},
		{agent.CauseNotRun, "tool call not run: the run ended first"},
		{agent.CauseIncomplete, "tool call not run: the model's response did not finish"},
		{agent.CauseNoApprover, "the tool needs approval and the agent has no Approver"},
		{agent.CauseApprovalFailed, "approval failed"},
		{agent.CauseStopped, "tool call stopped: the process stopped while it ran, and it is not run again"},
		{agent.CauseMovedOn, "rejected: the user moved on without deciding"},
		{agent.CauseUnknownTool, "rejected by user"},
		{"from_a_newer_version", "rejected by user"},
	} {
		t.Run(string(tt.cause), func(t *testing.T) {
			assert.Equal(t, tt.want, tt.cause.DefaultReason())
		})
	}
}
