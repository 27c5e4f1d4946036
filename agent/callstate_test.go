package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// jobTool starts a job as a long MCP task call does: the first time it
// saves the job's id with agent.SaveCallState, writes "started" and waits
// until its context ends; run again with a state, it returns the job's
// result. It is not resumable: the saved state alone brings it back.
type jobTool struct {
	mu    sync.Mutex
	runs  []agent.CallInfo
	saves []error
}

func (j *jobTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: "run_job", Description: "Run a long job"}
}

func (j *jobTool) Execute(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
	info, _ := agent.CallFromContext(ctx)
	j.mu.Lock()
	j.runs = append(j.runs, info)
	j.mu.Unlock()
	if info.State != "" {
		return "result of " + info.State, nil
	}
	err := agent.SaveCallState(ctx, "job-1")
	j.mu.Lock()
	j.saves = append(j.saves, err)
	j.mu.Unlock()
	if err != nil {
		return "ran without a record: " + err.Error(), nil
	}
	p.WriteString("started")
	<-ctx.Done()
	return "", context.Cause(ctx)
}

func (j *jobTool) calls() ([]agent.CallInfo, []error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]agent.CallInfo(nil), j.runs...), append([]error(nil), j.saves...)
}

func jobTurn(srv *agenttest.Server) {
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "run_job", `{}`).Finish("tool_calls"))
}

// TestSaveCallStateSuspendsAndResumes: a call whose tool saved a state is
// held, executing with its state, when the host shuts down (the run's
// context cancelled with the cause ErrSuspended), although its tool is not
// resumable; the resumed turn runs it again with CallInfo.State, without
// asking the Approver again, and its result reaches the model.
func TestSaveCallStateSuspendsAndResumes(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			log := st.(memory.CallLog)
			srv := newServer(t)
			jobTurn(srv)
			job := &jobTool{}
			ap := &countingApprover{}
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = ap }, job)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var chunks []agent.Chunk
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Run the job"}) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				if c.Kind == agent.KindToolCall && c.Tool.PartialResult == "started" {
					cancel(fmt.Errorf("shutting down: %w", agent.ErrSuspended))
				}
			}
			assert.Equal(t, []string{"text", "round_end:0:need_tool", "tool:start:run_job", "tool:approval_required:run_job",
				"tool:executing:run_job", "tool:progress:run_job", "suspended"}, trace(chunks))
			open, err := log.OpenCalls(context.Background(), "s1")
			require.NoError(t, err)
			require.Len(t, open, 1)
			assert.True(t, open[0].Executing)
			assert.Equal(t, "job-1", open[0].State)

			srv.Enqueue(agenttest.Reply().Text("Done.").Finish("stop"))
			chunks, err = collect(a.Resume(context.Background(), "s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"tool:executing:run_job", "tool:result:run_job", "round_end:1", "text", "round_end:2"}, trace(chunks))
			assert.Equal(t, int32(1), ap.asked.Load(), "approved once, before the call first started")
			runs, saves := job.calls()
			require.Len(t, runs, 2)
			assert.Empty(t, runs[0].State)
			assert.Equal(t, "job-1", runs[1].State)
			assert.Equal(t, runs[0].Key, runs[1].Key)
			assert.Equal(t, []error{nil}, saves)
			msgs, err := st.Messages(context.Background(), "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, "tool:result of job-1", contents(msgs)[3])
			open, err = log.OpenCalls(context.Background(), "s1")
			require.NoError(t, err)
			assert.Empty(t, open)
		})
	}
}

// TestResumeRerunsACallWithState: after a crash, a call found executing
// whose record holds a state runs again with it, while one without a state
// is rejected as stopped.
func TestResumeRerunsACallWithState(t *testing.T) {
	for _, state := range []string{"job-7", ""} {
		t.Run(fmt.Sprintf("state %q", state), func(t *testing.T) {
			leaktest.Check(t)
			ctx := context.Background()
			st := &memory.MemStore{}
			_, err := st.CreateSession(ctx, memory.Session{ID: "s1"})
			require.NoError(t, err)
			stored, err := st.Append(ctx, "s1",
				memory.Message{Role: memory.RoleUser, Content: "Run the job"},
				memory.Message{Role: memory.RoleAssistant, Content: "Running. <need_tool>"},
				memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "call_1", Name: "run_job", Arguments: json.RawMessage(`{}`)}}})
			require.NoError(t, err)
			require.NoError(t, st.SaveCall(ctx, "s1", memory.OpenCall{MessageID: stored[2].ID, CallID: "call_1", Round: 1, Executing: true, State: state}))
			srv := newServer(t)
			srv.Enqueue(agenttest.Reply().Text("Ok.").Finish("stop"))
			job := &jobTool{}
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = &countingApprover{} }, job)
			chunks, err := collect(a.Resume(ctx, "s1"))
			require.NoError(t, err)
			runs, _ := job.calls()
			if state == "" {
				assert.Equal(t, []string{"rejected:run_job:" + agent.CauseStopped.DefaultReason(), "round_end:1", "text", "round_end:2"}, trace(chunks))
				assert.Empty(t, runs, "never run again")
				return
			}
			assert.Equal(t, []string{"tool:executing:run_job", "tool:result:run_job", "round_end:1", "text", "round_end:2"}, trace(chunks))
			require.Len(t, runs, 1)
			assert.Equal(t, state, runs[0].State)
			assert.Equal(t, fmt.Sprintf("%d/call_1", stored[2].ID), runs[0].Key)
		})
	}
}

// TestSaveCallStateWithoutRecord: without a CallLog, or outside a call,
// SaveCallState reports ErrNoCallRecord and the call runs on; a state
// beyond memory.MaxCallState is refused.
func TestSaveCallStateWithoutRecord(t *testing.T) {
	leaktest.Check(t)
	assert.ErrorIs(t, agent.SaveCallState(context.Background(), "x"), agent.ErrNoCallRecord)

	srv := newServer(t)
	jobTurn(srv)
	srv.Enqueue(agenttest.Reply().Text("Ok.").Finish("stop"))
	job := &jobTool{}
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = &countingApprover{} }, job)
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "Run the job"}))
	require.NoError(t, err)
	assert.Contains(t, trace(chunks), "tool:result:run_job")
	_, saves := job.calls()
	require.Len(t, saves, 1)
	assert.ErrorIs(t, saves[0], agent.ErrNoCallRecord)

	var big error
	tool := agent.NewTool("big", "Save a big state", func(ctx context.Context, _ struct{}, _ agent.Progress) (string, error) {
		big = agent.SaveCallState(ctx, strings.Repeat("x", memory.MaxCallState+1))
		return "ok", nil
	})
	srv.Enqueue(agenttest.Reply().Call(0, "call_2", "big", `{}`).Finish("tool_calls"), agenttest.Reply().Text("Ok.").Finish("stop"))
	st := &memory.MemStore{}
	b := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = &countingApprover{}; c.DisablePlanning = true }, tool)
	_, err = collect(b.Run(context.Background(), agent.Input{SessionID: "s2", Message: "Save"}))
	require.NoError(t, err)
	require.Error(t, big)
	assert.False(t, errors.Is(big, agent.ErrNoCallRecord))
}
