package person_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// The tests of this file run the agent with durable Approvals, against a
// scripted model on 127.0.0.1: the contract between the two.

// host is one process of a service: an agent whose approver is a durable
// Approvals on the shared store, and whose OnDecided resumes the turn, as a
// host does.
type host struct {
	m       *person.Approvals
	a       *agent.Agent
	resumed chan resumption
}

type resumption struct {
	chunks []agent.Chunk
	err    error
}

func drain(seq func(func(agent.Chunk, error) bool)) resumption {
	var r resumption
	for c, err := range seq {
		if err != nil {
			r.err = err
			break
		}
		r.chunks = append(r.chunks, c)
	}
	return r
}

// weather is get_weather, which needs approval; runs counts its runs.
func weather(runs *atomic.Int32) agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", Description: "Weather for a city"},
		Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			runs.Add(1)
			var a struct{ City string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return "sunny in " + a.City, nil
		},
	}
}

func newHost(t *testing.T, st *memory.MemStore, srv *agenttest.Server, runs *atomic.Int32, cfg person.ApprovalsConfig) *host {
	t.Helper()
	h := &host{resumed: make(chan resumption, 4)}
	cfg.Store, cfg.Notifier = st, st
	cfg.OnDecided = func(ap memory.Approval) {
		go func() { h.resumed <- drain(h.a.Resume(context.Background(), ap.SessionID)) }()
	}
	h.m = replica(t, cfg)
	tools, err := agent.NewToolRegistry(weather(runs))
	require.NoError(t, err)
	h.a, err = agent.New(agent.Config{
		BaseURL:    srv.URL(),
		APIKey:     "test-key",
		HTTPClient: srv.Client(),
		Model:      "test-model",
		Tools:      tools,
		Store:      st,
		Approver:   h.m,
	})
	require.NoError(t, err)
	return h
}

func scriptedModel(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
	})
	srv.Enqueue(
		agenttest.Reply().Text("Let me look that up. <need_tool>").Finish("stop"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
	)
	return srv
}

// TestAgentSuspendAfterThenMovedOn: an Approvals with SuspendAfter suspends a
// run nobody answers; a new message on the session rejects the open call
// (the user moved on) and cancels its approval, so a late answer to the old
// card is stale and resumes nothing.
func TestAgentSuspendAfterThenMovedOn(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := scriptedModel(t)
	var runs atomic.Int32
	h := newHost(t, st, srv, &runs, person.ApprovalsConfig{SuspendAfter: time.Millisecond})

	r := drain(h.a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, r.err)
	require.NotEmpty(t, r.chunks)
	assert.Equal(t, agent.KindSuspended, r.chunks[len(r.chunks)-1].Kind)
	listed := pendingList(t, h.m, "s1")
	require.Len(t, listed, 1)
	id := listed[0].ApprovalID

	srv.Enqueue(
		agenttest.Reply().Text("Fine. <no_tool>").Finish("stop"),
		agenttest.Reply().Text("Hello.").Finish("stop"),
	)
	r = drain(h.a.Run(ctx, agent.Input{SessionID: "s1", Message: "Never mind."}))
	require.NoError(t, r.err)
	require.NotEmpty(t, r.chunks)
	assert.Equal(t, agent.KindToolRejected, r.chunks[0].Kind)
	assert.Equal(t, agent.CauseMovedOn, r.chunks[0].Tool.Cause)

	a, err := st.GetApproval(ctx, id)
	require.NoError(t, err)
	assert.True(t, a.Decided)
	assert.Equal(t, string(agent.CauseMovedOn), a.Decision.Cause)
	pending, err := h.m.Respond(ctx, person.ReplyTo(listed[0], agent.Decision{Approved: true}))
	require.NoError(t, err)
	assert.False(t, pending, "the old card is stale")
	select {
	case r := <-h.resumed:
		t.Errorf("a resumption after the move on: %+v", r)
	default:
	}
	assert.Zero(t, runs.Load())
	assert.Empty(t, pendingList(t, h.m, "s1"))
}

// TestAgentDecisionIsBound: the agent shows an approval_required chunk; a
// decision for another arguments digest, call id or tool is refused with
// ErrMismatch, one through another session with ErrWrongSession: the tool
// does not run and the approval stays pending. The decision bound to the
// chunk's call runs the tool once, and the audit records alice's approval
// and the channel it came through.
func TestAgentDecisionIsBound(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	srv := scriptedModel(t)
	srv.Enqueue(agenttest.Reply().Text("It is sunny in Lima.").Finish("stop"))
	m := startApprovals(t, person.ApprovalsConfig{})
	var runs atomic.Int32
	tools, err := agent.NewToolRegistry(weather(&runs))
	require.NoError(t, err)
	a, err := agent.New(agent.Config{BaseURL: srv.URL(), APIKey: "test-key", HTTPClient: srv.Client(), Model: "test-model", Tools: tools, Approver: m})
	require.NoError(t, err)

	cards := make(chan agent.ToolCall, 1)
	done := make(chan resumption, 1)
	go func() {
		done <- drain(func(yield func(agent.Chunk, error) bool) {
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}) {
				if err == nil && c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
					cards <- *c.Tool
				}
				if !yield(c, err) {
					return
				}
			}
		})
	}()
	var card agent.ToolCall
	select {
	case card = <-cards:
	case <-time.After(10 * time.Second):
		t.Fatal("no approval_required chunk")
	}
	require.NotEmpty(t, card.ArgumentsDigest, "the chunk carries the digest a decision must name")
	right := person.Reply{SessionID: "s1", ApprovalID: card.ApprovalID, CallID: card.ID, Tool: card.Name,
		ArgumentsDigest: card.ArgumentsDigest, Decision: agent.Decision{Approved: true, By: "alice", Via: "web"}}

	for _, tc := range []struct {
		name string
		edit func(r *person.Reply)
		err  error
	}{
		{"another arguments digest", func(r *person.Reply) {
			r.ArgumentsDigest = agent.ArgumentsDigest(json.RawMessage(`{"city":"Paris"}`))
		}, approval.ErrMismatch},
		{"another call id", func(r *person.Reply) { r.CallID = "call_2" }, approval.ErrMismatch},
		{"another tool", func(r *person.Reply) { r.Tool = "delete_files" }, approval.ErrMismatch},
		{"another session", func(r *person.Reply) { r.SessionID = "s2" }, approval.ErrWrongSession},
	} {
		rep := right
		tc.edit(&rep)
		pending, err := m.Respond(ctx, rep)
		assert.ErrorIs(t, err, tc.err, tc.name)
		assert.False(t, pending, tc.name)
		assert.Zero(t, runs.Load(), "%s: the tool ran", tc.name)
		list := pendingList(t, m, "s1")
		require.Len(t, list, 1, "%s: the approval stays pending", tc.name)
		assert.Equal(t, card.ApprovalID, list[0].ApprovalID)
	}
	select {
	case r := <-done:
		t.Fatalf("the run ended on a refused decision: %+v", r)
	default:
	}

	pending, err := m.Respond(ctx, right)
	require.NoError(t, err)
	require.True(t, pending)
	var res resumption
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end after the approval")
	}
	require.NoError(t, res.err)
	assert.Equal(t, int32(1), runs.Load(), "the approved call runs once")
	var records []approval.DecisionRecord
	for rec, err := range m.Decisions(ctx, approval.DecisionQuery{SessionID: "s1"}) {
		require.NoError(t, err)
		records = append(records, rec)
	}
	require.Len(t, records, 1)
	assert.Equal(t, "alice", records[0].Decision.By)
	assert.Equal(t, "web", records[0].Decision.Via)
	assert.Equal(t, card.ArgumentsDigest, records[0].ArgumentsDigest)
	assert.Equal(t, 0, m.Len())
}
