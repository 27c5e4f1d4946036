package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
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
		RequestOptions:  []option.RequestOption{option.WithMaxRetries(0)},
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
func managed(t *testing.T, ctx context.Context, a *agent.Agent, m *approval.Manager, session string, decide func(c agent.Chunk) *agent.Decision) ([]agent.Chunk, *agent.Turn) {
	t.Helper()
	turn := a.NewTurn(agent.Input{SessionID: session, Message: "go"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			require.NotEmpty(t, c.Tool.ApprovalID)
			if d := decide(c); d != nil {
				pending, err := m.Respond(session, c.Tool.ApprovalID, *d)
				require.NoError(t, err)
				assert.True(t, pending, "the approval of %s (depth %d) was pending", c.Tool.Name, c.Depth)
			}
		}
	}
	return chunks, turn
}

// A nested call's approval goes to the calling run's approval.Manager, under
// the calling run's session: its approval_required chunk reaches the host
// marked, and the decision given through the Manager by its approval id is
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
			m, err := approval.NewManager(approval.ManagerConfig{})
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
				p := m.Pending("s1")
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
		{"approval", "get_weather", agent.ReasonApprovalInterrupted, "First round."},
		{"execution", "tail", agent.ReasonInterrupted, "First round.\n\nWorking on it."},
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
			m, err := approval.NewManager(approval.ManagerConfig{})
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
					_, err := m.Respond("s1", c.Tool.ApprovalID, agent.Decision{Approved: true})
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
			assert.Equal(t, []string{"rejected:research:" + agent.ReasonInterrupted, "interrupted"}, tr[len(tr)-2:])
			rej := mine[len(mine)-2].Tool
			assert.Equal(t, tc.partial, rej.PartialResult)
			assert.Equal(t, agent.CauseInterrupted, rej.Cause)
			last := chunks[len(chunks)-1]
			assert.Equal(t, agent.KindInterrupted, last.Kind)
			assert.Zero(t, last.Depth, "the calling run's interrupted chunk is the last")
			msgs := turn.Messages()
			validHistory(t, msgs)
			assert.Equal(t, tc.partial+"\n["+agent.ReasonInterrupted+"]", msgs[len(msgs)-1].Content)
		})
	}
}
