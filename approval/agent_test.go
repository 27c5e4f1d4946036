package approval_test

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
	"github.com/planround/planround/memory"
)

// The tests of this file run the agent with durable Managers, against a
// scripted model on 127.0.0.1: the contract between the two.

// host is one process of a service: an agent whose approver is a durable
// Manager on the shared store, and whose OnDecided resumes the turn, as a
// host does.
type host struct {
	m       *approval.Manager
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

func newHost(t *testing.T, st *memory.MemStore, srv *agenttest.Server, runs *atomic.Int32, cfg approval.ManagerConfig) *host {
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

// TestAgentSuspendAfterThenMovedOn: a Manager with SuspendAfter suspends a
// run nobody answers; a new message on the session rejects the open call
// (the user moved on) and cancels its approval, so a late answer to the old
// card is stale and resumes nothing.
func TestAgentSuspendAfterThenMovedOn(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st := &memory.MemStore{}
	srv := scriptedModel(t)
	var runs atomic.Int32
	h := newHost(t, st, srv, &runs, approval.ManagerConfig{SuspendAfter: time.Millisecond})

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
	pending, err := h.m.Respond(ctx, listed[0].Reply(agent.Decision{Approved: true}))
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
