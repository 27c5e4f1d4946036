package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestRunKeepsItsTools: a registry changed while a run goes on (a tool
// removed, one added, SkipApproval switched) does not change that run: its
// later rounds offer and run the tools it started with, and ask for
// approval as they did. The next run sees the change.
func TestRunKeepsItsTools(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_2", "show_card", `{}`).Call(1, "call_3", "get_weather", `{"city":"Rome"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	reg, err := agent.NewToolRegistry(weatherTool(), cardTool())
	require.NoError(t, err)
	ping := agent.NewTool("ping", "Answers pong.", func(context.Context, struct{}, agent.Progress) (string, error) { return "pong", nil })
	var asked []string
	cfg := agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "test-model",
		Tools:      reg,
		Approver: agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
			asked = append(asked, req.Call.ID)
			if req.Call.ID == "call_1" {
				// The host changes the registry while the run goes on.
				assert.True(t, reg.Remove("show_card"))
				assert.NoError(t, reg.SetSkipApproval("get_weather", true))
				assert.NoError(t, reg.Add(ping))
			}
			return agent.Decision{Approved: true}, nil
		}),
	}
	if strict {
		cfg.RequestShape = agent.ShapeStrict
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)

	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "weather"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []string{"get_weather", "show_card"}, reqs[1].ToolNames())
	assert.Equal(t, []string{"get_weather", "show_card"}, reqs[2].ToolNames(), "the run's later rounds offer the same tools")
	assert.Equal(t, []string{"get_weather", "show_card"}, reqs[3].ToolNames())
	assert.Equal(t, map[string]string{"call_1": "sunny in Oslo", "call_2": "shown", "call_3": "sunny in Rome"}, results(chunks),
		"a tool removed meanwhile still runs in the run that offered it")
	assert.Equal(t, []string{"call_1", "call_3"}, asked, "get_weather still needs approval in this run")

	// The next run sees the changes.
	srv.Enqueue(
		planNeedTool(),
		// show_card, removed, is no longer offered: the model calls it anyway.
		agenttest.Reply().Call(0, "call_4", "get_weather", `{"city":"Lima"}`).Call(1, "call_5", "show_card", `{}`).Finish("tool_calls").Unsolicited(),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	asked = nil
	chunks, err = collect(a.Run(context.Background(), agent.Input{Message: "again"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"get_weather", "ping"}, srv.Requests()[5].ToolNames())
	assert.Empty(t, asked, "get_weather skips approval now")
	assert.Equal(t, "sunny in Lima", results(chunks)["call_4"])
	rej := rejection(t, chunks, "call_5")
	assert.Equal(t, agent.CauseUnknownTool, rej.Cause)
	assert.Equal(t, `error: unknown tool "show_card"`, rej.Reason)
}

// TestNoTruncateToolAddedAfterNew: a NoTruncate tool added to the registry
// after New is kept whole in the requests of the runs that have it.
func TestNoTruncateToolAddedAfterNew(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	long := strings.Repeat("x", 1000)
	history := []memory.Message{
		{Role: memory.RoleUser, Content: "before"},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "get_skill", Arguments: json.RawMessage(`{}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c1", Name: "get_skill", Content: long},
		{Role: memory.RoleAssistant, Content: "done"},
	}
	var reg *agent.ToolRegistry
	a := newAgent(t, srv, func(c *agent.Config) { reg = c.Tools }, weatherTool())
	require.NoError(t, reg.Add(agent.NewTool("get_skill", "A skill's text.", func(context.Context, struct{}, agent.Progress) (string, error) {
		return long, nil
	}, agent.WithSkipApproval(), agent.WithNoTruncate())))
	_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "now"}))
	require.NoError(t, err)
	var got string
	for _, m := range srv.Requests()[0].Messages {
		if m.Role == "tool" {
			got = m.Content
		}
	}
	assert.Equal(t, long, got, "NoTruncate tools are kept whole")
}

// TestRegistryChangedDuringRuns: runs share a registry that another
// goroutine keeps changing. Each run offers, looks up and runs the tools
// it started with: every call the model makes of an offered tool runs.
// Under the race detector this also checks the registry's locking.
func TestRegistryChangedDuringRuns(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.KeepRequests(0)
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("<need_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("Done.").Finish("stop")
		}
		// The model calls every tool it is offered.
		b := agenttest.Reply()
		for i, name := range req.ToolNames() {
			args := `{}`
			if name == "get_weather" {
				args = `{"city":"Oslo"}`
			}
			b = b.Call(i, fmt.Sprintf("call_%d_%d", req.Seq, i), name, args)
		}
		return b.Finish("tool_calls")
	})
	flaky := func(n int) agent.Tool {
		return agent.FuncTool{
			Def: agent.ToolDefinition{Name: "flaky", Parameters: map[string]any{"type": "object", "maxProperties": n}},
			Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
				return "flaky ran", nil
			},
		}
	}
	reg, err := agent.NewToolRegistry(weatherTool(), flaky(0))
	require.NoError(t, err)
	cfg := agent.Config{
		BaseURL:       srv.URL(),
		HTTPClient:    srv.Client(),
		Model:         "test-model",
		Tools:         reg,
		Approver:      agent.ApproverFunc(approveAll),
		ParallelTools: true,
	}
	if strict {
		cfg.RequestShape = agent.ShapeStrict
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	var changes atomic.Int32
	var mutator sync.WaitGroup
	mutator.Go(func() {
		for i := 0; i < 20_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			reg.Remove("flaky")
			_ = reg.Names()
			assert.NoError(t, reg.Add(flaky(i%3)))
			_ = reg.SetSkipApproval("flaky", i%2 == 0)
			_, _, _ = reg.Lookup("flaky")
			_ = reg.Definitions()
			changes.Add(1)
		}
	})

	const runners, runsEach = 4, 5
	var runs sync.WaitGroup
	var calls atomic.Int32
	for g := range runners {
		runs.Go(func() {
			for i := range runsEach {
				turn := a.NewTurn(agent.Input{Message: fmt.Sprintf("run %d.%d", g, i)})
				chunks, err := collect(turn.Run(ctx))
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, agent.KindRoundEnd, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
				for id, res := range results(chunks) {
					calls.Add(1)
					assert.NotContains(t, res, "error", "call %s: every offered tool runs", id)
				}
				validHistory(t, turn.Messages())
			}
		})
	}
	runs.Wait()
	close(done)
	mutator.Wait()
	// A run that started while flaky was out offered get_weather alone.
	assert.GreaterOrEqual(t, calls.Load(), int32(runners*runsEach), "every run called a tool")
	t.Logf("%d registry changes during %d runs", changes.Load(), runners*runsEach)
}

// TestRegistryReplace: Replace swaps tools in one change: concurrent
// readers see the old set or the new one, never a set without either; a
// refused tool or a name that stays registered changes nothing.
func TestRegistryReplace(t *testing.T) {
	tool := func(name string) agent.Tool {
		return agent.FuncTool{Def: agent.ToolDefinition{Name: name}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return name, nil }}
	}
	r, err := agent.NewToolRegistry(tool("own"), tool("a"), tool("b"))
	require.NoError(t, err)

	require.Error(t, r.Replace([]string{"a"}, tool("own")), "a name that stays registered")
	require.Error(t, r.Replace([]string{"a"}, tool("c"), tool("c")), "a name twice")
	require.Error(t, r.Replace([]string{"a"}, tool("bad name!")), "a refused tool")
	assert.Equal(t, []string{"a", "b", "own"}, r.Names(), "a failed Replace changed the registry")

	// Readers while the tools are swapped back and forth: every set they
	// see has own and either a and b, or c.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				names := strings.Join(r.Names(), ",")
				if names != "a,b,own" && names != "c,own" { // Names sorts
					t.Errorf("a reader saw %q", names)
					return
				}
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			require.NoError(t, r.Replace([]string{"a", "b", "absent"}, tool("c")))
		} else {
			require.NoError(t, r.Replace([]string{"c"}, tool("a"), tool("b")))
		}
	}
	close(stop)
	wg.Wait()
	assert.Equal(t, []string{"a", "b", "own"}, r.Names())
	got, _, ok := r.Lookup("b")
	require.True(t, ok)
	out, err := got.Execute(context.Background(), nil, nil)
	assert.Equal(t, "b", out)
	assert.NoError(t, err)
}

// TestRegistryOverridesOutliveReplace: the host's choices outlive a source
// of tools that swaps its tools (Replace): a SkipApproval it set stands,
// also for a tool gone from the source's list for a while; a tool it
// removed is not registered again; registering a tool of its own under a
// name (Add) starts that name afresh.
func TestRegistryOverridesOutliveReplace(t *testing.T) {
	tool := func(name string, skip bool) agent.Tool {
		return agent.FuncTool{Def: agent.ToolDefinition{Name: name, SkipApproval: skip}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return name, nil }}
	}
	skips := func(r *agent.ToolRegistry, name string) bool {
		_, def, ok := r.Lookup(name)
		require.True(t, ok, "%s is registered", name)
		for _, d := range r.Definitions() {
			if d.Name == name {
				assert.Equal(t, def.SkipApproval, d.SkipApproval, "Definitions and Lookup of %s agree", name)
			}
		}
		return def.SkipApproval
	}
	r, err := agent.NewToolRegistry()
	require.NoError(t, err)
	require.NoError(t, r.Replace(nil, tool("wipe", true), tool("read", false), tool("gone", false)))
	require.NoError(t, r.SetSkipApproval("wipe", false))
	require.NoError(t, r.SetSkipApproval("read", true))
	assert.True(t, r.Remove("gone"))

	require.NoError(t, r.Replace([]string{"wipe", "read", "gone"}, tool("wipe", true), tool("read", false), tool("gone", false)))
	assert.Equal(t, []string{"read", "wipe"}, r.Names(), "the removed tool came back")
	assert.False(t, skips(r, "wipe"), "wipe's SkipApproval came back")
	assert.True(t, skips(r, "read"), "read's SkipApproval override was lost")

	// Out of the list, then back.
	require.NoError(t, r.Replace([]string{"wipe", "read"}))
	require.NoError(t, r.Replace(nil, tool("wipe", true), tool("read", false), tool("gone", false)))
	assert.Equal(t, []string{"read", "wipe"}, r.Names())
	assert.False(t, skips(r, "wipe"), "wipe's SkipApproval came back after it was gone a while")

	// A sub-agent's subset keeps the host's choice too.
	sub, err := r.Subset("wipe")
	require.NoError(t, err)
	require.NoError(t, sub.Replace([]string{"wipe"}, tool("wipe", true)))
	assert.False(t, skips(sub, "wipe"), "the subset lost the override")

	// The host's own tool under a removed name, then a source's.
	require.NoError(t, r.Add(tool("gone", false)))
	assert.True(t, r.Remove("wipe"))
	require.NoError(t, r.Add(tool("wipe", true)))
	assert.True(t, skips(r, "wipe"), "the host's own tool took an override made for another")
	assert.Equal(t, []string{"gone", "read", "wipe"}, r.Names())
}
