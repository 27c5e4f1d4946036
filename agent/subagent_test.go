package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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

// subConfig is the Config of a sub-agent on srv with tools, without an
// Approver (it asks the calling run's) and without a planning round,
// shaped for the strict pass when it runs; mut, if not nil, edits it.
func subConfig(t *testing.T, srv *agenttest.Server, tools *agent.ToolRegistry, mut func(*agent.Config)) agent.Config {
	t.Helper()
	cfg := agent.Config{
		BaseURL:         srv.URL(),
		APIKey:          "test-key",
		HTTPClient:      srv.Client(),
		MaxRetries:      -1,
		Model:           "sub-model",
		Tools:           tools,
		DisablePlanning: true,
	}
	if strict {
		cfg.RequestShape = agent.ShapeStrict
	}
	if mut != nil {
		mut(&cfg)
	}
	return cfg
}

// newSubAgent makes a sub-agent or fails the test.
func newSubAgent(t *testing.T, name string, cfg agent.Config, opts ...agent.SubAgentOption) agent.Tool {
	t.Helper()
	sub, err := agent.NewSubAgent(name, "Researches a question.", cfg, opts...)
	require.NoError(t, err)
	return sub
}

// nested returns the chunks of the nested runs started by the call parent
// (a Chunk.Parent), with their marks removed: as the nested run yielded
// them.
func nested(chunks []agent.Chunk, parent string) []agent.Chunk {
	var out []agent.Chunk
	for _, c := range chunks {
		if c.Depth == 1 && c.Parent == parent {
			c.Agent, c.Depth, c.Parent = "", 0, ""
			out = append(out, c)
		}
	}
	return out
}

// own returns the chunks without a Depth: the run's own.
func own(chunks []agent.Chunk) []agent.Chunk {
	var out []agent.Chunk
	for _, c := range chunks {
		if c.Depth == 0 {
			out = append(out, c)
		}
	}
	return out
}

// The nested run's chunks come through the calling run's iterator between
// the call's executing chunk and its result, marked, in the order the nested
// run yielded them; the result is the nested run's answer, and only the call
// and its result are history. The nested agent sees the task alone and only
// its own tools.
func TestSubAgentChunksMarkedAndInOrder(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Text("Asking research.").Call(0, "call_1", "research", `{"task":"weather in Oslo?"}`).Finish("tool_calls"),
		// the sub-agent's two rounds
		agenttest.Reply().Text("Looking.").Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("It is ", "sunny in Oslo.").Usage(7, 3).Finish("stop"),
		agenttest.Reply().Text("Research says: sunny.").Finish("stop"),
	)
	subTools, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	research := newSubAgent(t, "research", subConfig(t, srv, subTools, nil))
	a := newAgent(t, srv, nil, research, cardTool())

	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "Weather in Oslo?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"text", "tool:start:research", "tool:approval_required:research", "tool:executing:research",
		"tool:result:research", "round_end:1",
		"text", "round_end:2",
	}, trace(own(chunks)))
	assert.Equal(t, []string{
		"text", "tool:start:get_weather", "tool:approval_required:get_weather", "tool:executing:get_weather",
		"tool:result:get_weather", "round_end:1", "text", "round_end:2",
	}, trace(nested(chunks, "call_1")))
	assert.Equal(t, "It is sunny in Oslo.", results(own(chunks))["call_1"])

	// Every nested chunk is marked, and comes while the call executes.
	var executing, result int
	for i, c := range chunks {
		switch {
		case c.Depth == 0 && c.Tool != nil && c.Tool.Name == "research" && c.Tool.State == agent.StateExecuting:
			executing = i
		case c.Depth == 0 && c.Tool != nil && c.Tool.Name == "research" && c.Tool.State == agent.StateResult:
			result = i
		case c.Depth != 0:
			assert.Equal(t, 1, c.Depth)
			assert.Equal(t, "research", c.Agent)
			assert.Equal(t, "call_1", c.Parent)
		}
	}
	for i, c := range chunks {
		assert.Equal(t, i > executing && i < result, c.Depth == 1, "chunk %d %+v", i, c)
	}

	// What the sub-agent's model saw: its task as the only user message, its
	// tools only, no planning prompt.
	reqs := srv.Requests()
	require.Len(t, reqs, 5)
	sub := reqs[2]
	assert.Equal(t, "sub-model", sub.Model)
	assert.Equal(t, []string{"get_weather"}, sub.ToolNames())
	require.Len(t, sub.Messages, 1)
	assert.Equal(t, agenttest.Message{Role: "user", Content: "weather in Oslo?"}, sub.Messages[0])
	// The caller's next request has the call and the answer, nothing of the
	// nested run's messages.
	last := reqs[4]
	tool, ok := last.LastMessageWithRole("tool")
	require.True(t, ok)
	assert.Equal(t, "It is sunny in Oslo.", tool.Content)
	for _, m := range last.Messages {
		assert.NotContains(t, m.Content, "Looking.")
	}

	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)), "History leaves the nested chunks out")
	validHistory(t, agent.History(nested(chunks, "call_1")))
}

// The wire form of a nested chunk: its marks after the round.
func TestSubAgentChunkJSON(t *testing.T) {
	c := agent.Chunk{Kind: agent.KindText, Round: 1, Agent: "research/search", Depth: 2, Parent: "call_1/call_7", Text: "hi"}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"text","round":1,"agent":"research/search","depth":2,"parent":"call_1/call_7","text":"hi"}`, string(b))
	assert.Equal(t, `{"kind":"text","round":1,"agent":"research/search","depth":2,"parent":"call_1/call_7","text":"hi"}`, string(b), "field order")
	var back agent.Chunk
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, c, back)
	b, err = json.Marshal(agent.Chunk{Kind: agent.KindText, Round: 1, Text: "hi"})
	require.NoError(t, err)
	assert.Equal(t, `{"kind":"text","round":1,"text":"hi"}`, string(b), "a run's own chunks are unchanged")
}

// managed runs a turn whose approvals go to m, answering each
// approval_required chunk as it comes with decide (nil: no answer, the test
// answers itself), and returns the chunks.
func managed(t *testing.T, ctx context.Context, a *agent.Agent, m *person.Approvals, session string, decide func(c agent.Chunk) *agent.Decision) ([]agent.Chunk, *agent.Turn) {
	t.Helper()
	turn := a.NewTurn(agent.Input{SessionID: session, Message: "go"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			require.NotEmpty(t, c.Tool.ApprovalID)
			if d := decide(c); d != nil {
				pending, err := m.Respond(context.Background(), replyTo(session, *c.Tool, *d))
				require.NoError(t, err)
				assert.True(t, pending, "the approval of %s (depth %d) was pending", c.Tool.Name, c.Depth)
			}
		}
	}
	return chunks, turn
}

// A nested call's approval goes to the calling run's approvals
// (person.Approvals, as a runner's), under the calling run's session: its
// approval_required chunk reaches the host marked, and the decision given
// through the approvals by its approval id is
// the one taken. A rejection there ends the nested run (its OnReject), and
// the model of the calling run reads why.
func TestSubAgentApprovalThroughCallersManager(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprintf("approved=%v", approve), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather in Oslo?"}`).Finish("tool_calls"),
				agenttest.Reply().Call(0, "call_9", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			)
			if approve {
				srv.Enqueue(agenttest.Reply().Text("Sunny.").Finish("stop"))
			}
			srv.Enqueue(agenttest.Reply().Text("Done.").Finish("stop"))
			m, err := person.StartApprovals(person.ApprovalsConfig{})
			require.NoError(t, err)
			var ran atomic.Int32
			weather := agent.FuncTool{Def: weatherTool().Definition(), Fn: func(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
				ran.Add(1)
				return weatherTool().Execute(ctx, args, p)
			}}
			subTools, err := agent.NewToolRegistry(weather)
			require.NoError(t, err)
			a := newAgent(t, srv, func(c *agent.Config) { c.Approver = m }, newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))

			var asked []string
			chunks, turn := managed(t, context.Background(), a, m, "s1", func(c agent.Chunk) *agent.Decision {
				asked = append(asked, fmt.Sprintf("%s@%d:%s", c.Tool.Name, c.Depth, c.Parent))
				if c.Depth == 0 {
					return &agent.Decision{Approved: true}
				}
				// The Manager holds it under the caller's session.
				p, err := m.Pending(context.Background(), "s1")
				require.NoError(t, err)
				require.Len(t, p, 1)
				if approve {
					return &agent.Decision{Approved: true}
				}
				return &agent.Decision{Reason: "not now"}
			})
			assert.Equal(t, []string{"research@0:", "get_weather@1:call_1"}, asked)
			assert.Zero(t, m.Len(), "nothing stays pending")
			res := results(own(chunks))["call_1"]
			if approve {
				assert.Equal(t, int32(1), ran.Load())
				assert.Equal(t, "Sunny.", res)
			} else {
				assert.Zero(t, ran.Load(), "a rejected nested call never runs")
				assert.Equal(t, "error: sub-agent research did not finish: its call of get_weather was rejected: not now", res)
				assert.Equal(t, []string{"tool:start:get_weather", "tool:approval_required:get_weather", "rejected:get_weather:not now", "interrupted"},
					trace(nested(chunks, "call_1")))
			}
			assert.Equal(t, "round_end:2", trace(chunks)[len(trace(chunks))-1], "the calling run goes on")
			validHistory(t, turn.Messages())
		})
	}
}

// A sub-agent configured without an Approver, called by a run that has
// none, rejects the nested calls that need approval with a reason.
func TestSubAgentWithoutCallerApprover(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather?"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	subTools, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	reg, err := agent.NewToolRegistry(newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))
	require.NoError(t, err)
	require.NoError(t, reg.SetSkipApproval("research", true))
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = nil; c.Tools = reg; c.DisablePlanning = true })
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	n := nested(chunks, "call_1")
	require.NotEmpty(t, n)
	assert.Contains(t, trace(n), "rejected:get_weather:approval could not be requested: the sub-agent's calls are approved by the Approver of the run that called it, and that run has none")
	assert.Contains(t, results(own(chunks))["call_1"], "error: sub-agent research did not finish")
}

// Interrupting the calling run interrupts the nested one, during its
// tool's execution and during its approval: its chunks end with its
// rejected and interrupted chunks, the call is rejected as interrupted with
// the nested run's text so far, nothing stays pending, and both histories
// are valid.
func TestSubAgentInterrupt(t *testing.T) {
	for _, tc := range []struct {
		during, lastCall, reason, partial string
	}{
		{"approval", "get_weather", agent.CauseApprovalInterrupted.DefaultReason(), "First round."},
		{"execution", "tail", agent.CauseInterrupted.DefaultReason(), "First round.\n\nWorking on it."},
	} {
		t.Run(tc.during, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "research", `{"task":"tail the log"}`).Finish("tool_calls"),
				agenttest.Reply().Text("First round.").Call(0, "call_2", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Working on it.").Call(0, "call_3", "tail", `{}`).Finish("tool_calls"),
			)
			tail := agent.FuncTool{
				Def: agent.ToolDefinition{Name: "tail", SkipApproval: true},
				Fn: func(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
					p.WriteString("line 1\n")
					<-ctx.Done()
					return "", ctx.Err()
				},
			}
			m, err := person.StartApprovals(person.ApprovalsConfig{})
			require.NoError(t, err)
			subTools, err := agent.NewToolRegistry(weatherTool(), tail)
			require.NoError(t, err)
			a := newAgent(t, srv, func(c *agent.Config) { c.Approver = m }, newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "go"})
			var chunks []agent.Chunk
			for c, err := range turn.Run(ctx) {
				require.NoError(t, err)
				chunks = append(chunks, c)
				switch {
				case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired:
					if c.Depth == 1 && tc.during == "approval" {
						cancel() // stop pressed while the nested card waits
						continue
					}
					_, err := m.Respond(context.Background(), replyTo("s1", *c.Tool, agent.Decision{Approved: true}))
					require.NoError(t, err)
				case c.Depth == 1 && c.Kind == agent.KindToolCall && c.Tool.Name == "tail" && c.Tool.PartialResult != "":
					cancel() // stop pressed while the nested tool runs
				}
			}
			assert.Zero(t, m.Len(), "nothing stays pending")

			n := nested(chunks, "call_1")
			tr := trace(n)
			require.GreaterOrEqual(t, len(tr), 2, "%v", trace(chunks))
			assert.Equal(t, []string{"rejected:" + tc.lastCall + ":" + tc.reason, "interrupted"}, tr[len(tr)-2:])
			validHistory(t, agent.History(n))

			mine := own(chunks)
			tr = trace(mine)
			assert.Equal(t, []string{"rejected:research:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
			rej := mine[len(mine)-2].Tool
			assert.Equal(t, tc.partial, rej.PartialResult)
			assert.Equal(t, agent.CauseInterrupted, rej.Cause)
			last := chunks[len(chunks)-1]
			assert.Equal(t, agent.KindInterrupted, last.Kind)
			assert.Zero(t, last.Depth, "the calling run's interrupted chunk is the last")
			msgs := turn.Messages()
			validHistory(t, msgs)
			assert.Equal(t, tc.partial+"\n["+agent.CauseInterrupted.DefaultReason()+"]", msgs[len(msgs)-1].Content)
		})
	}
}

// Sub-agents may call sub-agents down to the depth bound: the chunks of a
// run two or more deep carry the names and the calls of every level, and a
// call that would go deeper is refused with an error the model reads. The
// smallest bound of the sub-agents a call is inside holds.
func TestSubAgentDepth(t *testing.T) {
	for _, tc := range []struct {
		name               string
		outerMax, innerMax int // WithMaxDepth; 0: the default
		refusedAt, limit   int // the depth of the run whose call is refused, and the bound it meets
	}{
		{"default", 0, 0, 2, 2},
		{"outer bound 1", 1, 0, 1, 1},
		{"inner bound 1", 0, 1, 1, 1},
		{"bounds 3", 3, 3, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			// Each run calls its sub-agent once, then answers. The top run
			// calls outer; outer and inner call inner.
			var ids atomic.Int32
			srv.Respond(func(req *agenttest.Request) agenttest.Response {
				if req.LastMessage().Role == "tool" {
					return agenttest.Reply().Text("answer of " + req.Model).Finish("stop")
				}
				name := "inner"
				if req.Model == "test-model" {
					name = "outer"
				}
				return agenttest.Reply().Call(0, fmt.Sprintf("call_%d", ids.Add(1)), name, `{"task":"go deeper"}`).Finish("tool_calls")
			})
			opts := func(n int) []agent.SubAgentOption {
				if n == 0 {
					return nil
				}
				return []agent.SubAgentOption{agent.WithMaxDepth(n)}
			}
			innerTools, err := agent.NewToolRegistry()
			require.NoError(t, err)
			inner := newSubAgent(t, "inner", subConfig(t, srv, innerTools, func(c *agent.Config) { c.Model = "inner" }), opts(tc.innerMax)...)
			require.NoError(t, innerTools.Add(inner)) // it calls itself
			outerTools, err := agent.NewToolRegistry(inner)
			require.NoError(t, err)
			outer := newSubAgent(t, "outer", subConfig(t, srv, outerTools, func(c *agent.Config) { c.Model = "outer" }), opts(tc.outerMax)...)
			a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, outer)

			chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}))
			require.NoError(t, err)
			var refused []agent.Chunk
			deepest := 0
			for _, c := range chunks {
				deepest = max(deepest, c.Depth)
				if c.Depth > 0 {
					assert.Equal(t, "outer"+strings.Repeat("/inner", c.Depth-1), c.Agent)
					ids := make([]string, c.Depth)
					for i := range ids {
						ids[i] = fmt.Sprintf("call_%d", i+1)
					}
					assert.Equal(t, strings.Join(ids, "/"), c.Parent)
				}
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult && strings.Contains(c.Tool.Result, "cannot run") {
					refused = append(refused, c)
				}
			}
			require.Len(t, refused, 1, "%v", trace(chunks))
			assert.Equal(t, tc.refusedAt, refused[0].Depth)
			assert.Equal(t, fmt.Sprintf("error: sub-agent inner cannot run here: sub-agents nest at most %d deep, and this call would run %d deep", tc.limit, tc.refusedAt+1), refused[0].Tool.Result)
			assert.Equal(t, tc.refusedAt, deepest)
			assert.Equal(t, "answer of outer", results(own(chunks))["call_1"])
		})
	}
}

// A sub-agent runs with its subset of the host's tools only: a call of a
// tool outside it is an unknown tool to the nested run, and never runs.
func TestSubAgentToolSubset(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "research", `{"task":"clean up"}`).Finish("tool_calls"),
		// delete_all is not in the sub-agent's subset: the model calls it anyway.
		agenttest.Reply().Call(0, "call_1", "delete_all", `{}`).Finish("tool_calls").Unsolicited(),
		agenttest.Reply().Text("I may not.").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	var deleted atomic.Bool
	deleteAll := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "delete_all", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			deleted.Store(true)
			return "deleted", nil
		},
	}
	host, err := agent.NewToolRegistry(weatherTool(), deleteAll)
	require.NoError(t, err)
	subTools, err := host.Subset("get_weather")
	require.NoError(t, err)
	// A copy of the host's Config with the subset: its Store is not used.
	hostStore := &memory.MemStore{}
	subCfg := subConfig(t, srv, subTools, func(c *agent.Config) { c.Store = hostStore })
	require.NoError(t, host.Add(newSubAgent(t, "research", subCfg)))
	a := newAgent(t, srv, func(c *agent.Config) { c.Tools = host; c.DisablePlanning = true })

	chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}))
	require.NoError(t, err)
	assert.False(t, deleted.Load())
	sessions, err := hostStore.Sessions(context.Background())
	require.NoError(t, err)
	assert.Empty(t, sessions, "the nested run stores nothing")
	assert.Equal(t, []string{"tool:start:delete_all", `rejected:delete_all:error: unknown tool "delete_all"`, "round_end:1", "text", "round_end:2"},
		trace(nested(chunks, "call_1")))
	assert.Equal(t, "I may not.", results(own(chunks))["call_1"])
	assert.Equal(t, []string{"get_weather"}, srv.Requests()[1].ToolNames())
}

func TestToolRegistrySubset(t *testing.T) {
	reg, err := agent.NewToolRegistry(weatherTool(), cardTool(), agent.FuncTool{Def: agent.ToolDefinition{Name: "third"}})
	require.NoError(t, err)
	require.NoError(t, reg.SetSkipApproval("get_weather", true))

	sub, err := reg.Subset("third", "get_weather", "third")
	require.NoError(t, err)
	var names []string
	for _, d := range sub.Definitions() {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"get_weather", "third"}, names, "the registry's order")
	_, def, ok := sub.Lookup("get_weather")
	require.True(t, ok)
	assert.True(t, def.SkipApproval, "overrides are kept")

	// They change apart.
	require.NoError(t, sub.Add(agent.FuncTool{Def: agent.ToolDefinition{Name: "more"}}))
	assert.True(t, reg.Remove("third"))
	assert.Equal(t, []string{"get_weather", "more", "third"}, sub.Names())
	assert.Equal(t, []string{"get_weather", "show_card"}, reg.Names())

	_, err = reg.Subset("get_weather", "nope")
	assert.EqualError(t, err, `agent: no tool "nope" to take into a subset`)
	empty, err := reg.Subset()
	require.NoError(t, err)
	assert.Empty(t, empty.Names())
}

// With ParallelTools, the nested chunks of a later call are not held back
// by an earlier call that still runs: here the earlier call's nested tool
// waits until the later call's nested approval card has been shown and
// answered, which would never happen if the chunks came in call order.
func TestSubAgentParallelCallsDoNotWaitForEachOther(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		done := req.LastMessage().Role == "tool"
		if req.Model == "test-model" {
			if done {
				return agenttest.Reply().Text("Both done.").Finish("stop")
			}
			return agenttest.Reply().
				Call(0, "call_1", "research", `{"task":"wait"}`).
				Call(1, "call_2", "research", `{"task":"ask"}`).Finish("tool_calls")
		}
		task := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				task = m.Content
				break
			}
		}
		switch {
		case done:
			return agenttest.Reply().Text("finished " + task).Finish("stop")
		case task == "wait":
			return agenttest.Reply().Call(0, "call_w", "block", `{}`).Finish("tool_calls")
		}
		return agenttest.Reply().Call(0, "call_a", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls")
	})
	release := make(chan struct{})
	block := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "block", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
	}
	m, err := person.StartApprovals(person.ApprovalsConfig{})
	require.NoError(t, err)
	subTools, err := agent.NewToolRegistry(block, weatherTool())
	require.NoError(t, err)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Approver = m
		c.ParallelTools = true
		c.DisablePlanning = true
	}, newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	chunks, turn := managed(t, ctx, a, m, "s1", func(c agent.Chunk) *agent.Decision {
		if c.Parent == "call_2" {
			close(release)
		}
		return &agent.Decision{Approved: true}
	})
	require.NoError(t, ctx.Err(), "the run was stuck")
	assert.Equal(t, map[string]string{"call_1": "finished wait", "call_2": "finished ask"}, results(own(chunks)))
	var order []string
	for _, c := range chunks {
		if c.Tool != nil && (c.Tool.State == agent.StateResult || c.Tool.State == agent.StateApprovalRequired) {
			order = append(order, fmt.Sprintf("%s:%s:%s", c.Parent, c.Tool.Name, c.Tool.State))
		}
	}
	assert.Equal(t, []string{
		":research:approval_required", ":research:approval_required",
		"call_2:get_weather:approval_required",
		// the rest of the two nested runs interleave
	}, order[:3])
	var mine []string
	for _, c := range own(chunks) {
		if c.Tool != nil {
			mine = append(mine, c.Tool.ID+":"+string(c.Tool.State))
		}
	}
	assert.Equal(t, []string{
		"call_1:start", "call_2:start", "call_1:approval_required", "call_2:approval_required",
		"call_1:executing", "call_2:executing", "call_1:result", "call_2:result",
	}, mine, "the calling run's own chunks keep their call order")
	assert.Zero(t, m.Len())
	validHistory(t, turn.Messages())
}

// A nested run that does not end with an answer gives the calling model an
// error that says why, and the calling run goes on.
func TestSubAgentEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		task   string
		sub    []agenttest.Response
		mut    func(*agent.Config)
		result string
	}{
		{
			name:   "answer",
			task:   "weather?",
			sub:    []agenttest.Response{agenttest.Reply().Text("Sunny.").Finish("stop")},
			result: "Sunny.",
		},
		{
			name:   "no answer",
			task:   "weather?",
			sub:    []agenttest.Response{agenttest.Reply().Text("<no_tool>").Finish("stop")},
			result: "(sub-agent research finished without writing an answer)",
		},
		{
			name:   "model failure",
			task:   "weather?",
			sub:    []agenttest.Response{agenttest.Reply().Text("Let me").Finish("stop").ErrorAfter(1, "overloaded")},
			result: "error: sub-agent research failed: agent: round 1: provider error: overloaded (type server_error); what it wrote so far:\nLet me",
		},
		{
			name: "maximum tool rounds",
			task: "weather?",
			sub: []agenttest.Response{
				agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			},
			mut:    func(c *agent.Config) { c.MaxToolRounds = 1 },
			result: "error: sub-agent research did not finish: it reached its maximum number of tool rounds; what it wrote so far:\nChecking.",
		},
		{
			name:   "empty task",
			task:   " ",
			result: "error: the task of research is empty: say what it should do",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(agenttest.Reply().Call(0, "call_1", "research", fmt.Sprintf(`{"task":%q}`, tc.task)).Finish("tool_calls"))
			srv.Enqueue(tc.sub...)
			srv.Enqueue(agenttest.Reply().Text("Done.").Finish("stop"))
			subTools, err := agent.NewToolRegistry(weatherTool())
			require.NoError(t, err)
			a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, newSubAgent(t, "research", subConfig(t, srv, subTools, tc.mut)))
			turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "go"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)
			assert.Equal(t, tc.result, results(own(chunks))["call_1"])
			assert.Equal(t, "Done.", text(own(chunks), 2))
			validHistory(t, turn.Messages())
		})
	}
}

// A host that stops ranging at any chunk, a nested one included, ends the
// nested run too: no panic, nothing pending, no goroutine left.
func TestSubAgentConsumerLeaves(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Text("Asking.").Call(0, "call_1", "research", `{"task":"weather?"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Looking.").Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny.").Finish("stop"),
			agenttest.Reply().Text("Done.").Finish("stop"),
		)
	}
	run := func(t *testing.T, stopAt int) (n int) {
		srv := newServer(t)
		script(srv)
		var m *person.Approvals
		m, err := person.StartApprovals(person.ApprovalsConfig{OnRegister: func(p approval.PendingApproval) {
			// A browser that approves at once.
			_, _ = m.Respond(context.Background(), person.ReplyTo(p, agent.Decision{Approved: true}))
		}})
		require.NoError(t, err)
		subTools, err := agent.NewToolRegistry(weatherTool())
		require.NoError(t, err)
		a := newAgent(t, srv, func(c *agent.Config) { c.Approver = m }, newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))
		for _, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}) {
			require.NoError(t, err)
			n++
			if n == stopAt {
				break
			}
		}
		assert.Zero(t, m.Len())
		return n
	}
	total := run(t, -1)
	require.Greater(t, total, 15)
	for stopAt := 1; stopAt <= total; stopAt++ {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			leaktest.Check(t)
			assert.Equal(t, stopAt, run(t, stopAt))
		})
	}
}

// A nested run's calls name a conversation of their own, and what a tool
// registers with AfterSubAgent is called when that run ends, before the
// sub-agent's result is yielded; a call of the host's run belongs to no
// sub-agent run.
func TestSubAgentConversationAndAfterSubAgent(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "state", `{}`).Call(1, "call_2", "research", `{"task":"go"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_1", "state", `{}`).Call(1, "call_2", "state", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sub done.").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	var (
		events   []string
		captured context.Context
	)
	state := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "state", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
			call, ok := agent.CallFromContext(ctx)
			require.True(t, ok)
			conv := call.Conversation()
			registered := agent.AfterSubAgent(ctx, func() { events = append(events, "released "+conv+" by "+call.CallID) })
			events = append(events, fmt.Sprintf("%s in %s, registered %v", call.CallID, conv, registered))
			captured = ctx
			return conv, nil
		},
	}
	subTools, err := agent.NewToolRegistry(state)
	require.NoError(t, err)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, state, newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))
	for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}) {
		require.NoError(t, err)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult && c.Depth == 0 {
			events = append(events, "result of "+c.Tool.ID)
		}
	}
	assert.Equal(t, []string{
		"call_1 in s1, registered false",
		"result of call_1",
		"call_1 in s1/call_2, registered true",
		"call_2 in s1/call_2, registered true",
		"released s1/call_2 by call_2", // latest first
		"released s1/call_2 by call_1",
		"result of call_2",
	}, events)

	// Registered once the run has ended: called at once.
	events = nil
	assert.True(t, agent.AfterSubAgent(captured, func() { events = append(events, "late") }))
	assert.Equal(t, []string{"late"}, events)
	assert.False(t, agent.AfterSubAgent(context.Background(), func() { t.Error("called") }))
}

func TestCallInfoConversation(t *testing.T) {
	top := agent.CallInfo{SessionID: "s1", CallID: "call_1"}
	mid := agent.CallInfo{SessionID: "s1", CallID: "call_7", Parent: &top}
	deep := agent.CallInfo{SessionID: "s1", CallID: "call_9", Parent: &mid}
	assert.Equal(t, "s1", top.Conversation())
	assert.Equal(t, "s1/call_1", mid.Conversation())
	assert.Equal(t, "s1/call_1/call_7", deep.Conversation())
	assert.Empty(t, agent.CallInfo{CallID: "call_3", Parent: &top}.Conversation(), "no session, no conversation")
}

// TestCallInfoRootSession: a call of a nested run belongs to the session
// of the host's run, whatever its own run has.
func TestCallInfoRootSession(t *testing.T) {
	top := agent.CallInfo{SessionID: "s1", CallID: "call_1"}
	mid := agent.CallInfo{CallID: "call_7", Parent: &top}
	deep := agent.CallInfo{SessionID: "sub", CallID: "call_9", Parent: &mid}
	assert.Equal(t, "s1", top.RootSession())
	assert.Equal(t, "s1", mid.RootSession())
	assert.Equal(t, "s1", deep.RootSession())
	assert.Empty(t, agent.CallInfo{CallID: "call_3", Parent: &agent.CallInfo{CallID: "call_1"}}.RootSession())
}

func TestNewSubAgentRefuses(t *testing.T) {
	ok := agent.Config{Model: "m", DisablePlanning: true}
	for _, tc := range []struct {
		name string
		sub  string
		cfg  agent.Config
		opts []agent.SubAgentOption
		want string
	}{
		{"bad name", "re search", ok, nil, `agent: tool name "re search" has ' '; use letters, digits, '_' and '-'`},
		{"no model", "research", agent.Config{}, nil, `agent: sub-agent "research": Config.Model is required`},
		{"depth 0", "research", ok, []agent.SubAgentOption{agent.WithMaxDepth(0)}, `agent: sub-agent "research": maximum depth 0, want >= 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agent.NewSubAgent(tc.sub, "", tc.cfg, tc.opts...)
			assert.EqualError(t, err, tc.want)
		})
	}

	// A Store in the Config (a copy of the host's) is not used, and the
	// tool describes itself.
	sub, err := agent.NewSubAgent("research", "", agent.Config{Model: "m", Store: &memory.MemStore{}, SummarizeAt: 4})
	require.NoError(t, err)
	def := sub.Definition()
	assert.Equal(t, "research", def.Name)
	assert.Equal(t, "Runs the sub-agent research on a task and returns its answer.", def.Description)
	assert.False(t, def.SkipApproval)
	assert.Equal(t, []any{"task"}, def.Parameters["required"])
}

// The arguments come from the model: whatever they are, Execute answers
// with a result or an error, and never panics.
func FuzzSubAgentArguments(f *testing.F) {
	for _, s := range []string{`{"task":"weather?"}`, `{}`, `{"task":1}`, `null`, `[`, `{"task":"   "}`, `{"task":"\u0000"}`, `{"task":"x","more":true}`} {
		f.Add([]byte(s))
	}
	model := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("ok").Finish("stop")
	})
	sub, err := agent.NewSubAgent("research", "", agent.Config{
		BaseURL:         "http://model.invalid/v1",
		HTTPClient:      &http.Client{Transport: model},
		Model:           "m",
		DisablePlanning: true,
	})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := sub.Execute(context.Background(), args, nil)
		if err == nil && out != "ok" {
			t.Fatalf("result %q without error", out)
		}
		if err != nil && out != "" {
			t.Fatalf("result %q with error %v", out, err)
		}
	})
}

// A nested run goes on only once the host has handled its chunk, as a run
// does with its own: the wait for a nested call's approval starts after
// the host's loop has finished with that call's approval_required chunk, so
// a host that asks a person in the wait (a terminal prompt) never asks
// before it has drawn the call.
func TestSubAgentWaitsForTheHostToHandleItsChunks(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather?"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_9", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny.").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	var handled atomic.Bool // the host finished with the nested approval_required chunk
	var early atomic.Bool   // a wait started before that
	ap := approverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
		if req.Call.Name != "get_weather" {
			return agent.Decided(agent.Decision{Approved: true}), nil
		}
		return agent.Pending("ap_1", func(ctx context.Context) (agent.Decision, error) {
			early.Store(!handled.Load())
			return agent.Decision{Approved: true}, nil
		}), nil
	})
	subTools, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	a := newAgent(t, srv, func(c *agent.Config) { c.Approver = ap; c.DisablePlanning = true },
		newSubAgent(t, "research", subConfig(t, srv, subTools, nil)))
	var kinds []string
	for c, err := range a.Run(context.Background(), agent.Input{Message: "go"}) {
		require.NoError(t, err)
		if c.Depth == 1 && c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			// A host that takes its time to draw the call: without the
			// acknowledgement, the nested run's wait starts meanwhile.
			time.Sleep(30 * time.Millisecond)
			handled.Store(true)
		}
		kinds = append(kinds, string(c.Kind))
	}
	require.True(t, handled.Load(), "the nested approval_required chunk came: %v", kinds)
	assert.False(t, early.Load(), "the nested run waited for its approval before the host had handled the call's approval_required chunk")
}
