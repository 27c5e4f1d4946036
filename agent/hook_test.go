package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// asked is one question a hook was asked.
type asked struct {
	at    agent.Checkpoint
	state agent.HookState
}

// everyGroup is a hook that injects, at every checkpoint, one injection of
// each group: "<checkpoint>/<role>/p" (persistent) and "<checkpoint>/<role>/t"
// (temporary), for the system and user roles; the system ones with the
// default (empty) role. It records what it was asked.
type everyGroup struct{ asked []asked }

func (h *everyGroup) Inject(_ context.Context, at agent.Checkpoint, st agent.HookState) ([]agent.Injection, error) {
	h.asked = append(h.asked, asked{at, st})
	return []agent.Injection{
		{Content: string(at) + "/user/t", Role: memory.RoleUser},
		{Content: string(at) + "/system/t"},
		{Content: string(at) + "/user/p", Role: memory.RoleUser, Persistent: true},
		{Content: string(at) + "/system/p", Role: memory.RoleSystem, Persistent: true},
		{Content: "  \n", Persistent: true}, // adds nothing
	}, nil
}

// second is a hook that adds "<checkpoint>/B" to the temporary system group.
var second = agent.HookFunc(func(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
	return []agent.Injection{{Content: string(at) + "/B"}}, nil
})

// checkpoints returns the checkpoints of asked with their rounds:
// "before_planning:0".
func checkpoints(as []asked) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s:%d", a.at, a.state.Round))
	}
	return out
}

// holding returns the messages of req whose content contains s.
func holding(req *agenttest.Request, s string) []agenttest.Message {
	var out []agenttest.Message
	for _, m := range req.Messages {
		if strings.Contains(m.Content, s) {
			out = append(out, m)
		}
	}
	return out
}

// checkInjected checks that req carries the persistent injections of the
// checkpoints persisted (once for each time it is listed) and the
// injections of temp, in messages of their role, and no other injection.
// In the default shape each group is a message of its own.
func checkInjected(t *testing.T, req *agenttest.Request, persisted, temp []agent.Checkpoint) {
	t.Helper()
	groups := func(cp agent.Checkpoint) map[string]string { // content -> role
		return map[string]string{
			string(cp) + "/system/p":                         "system",
			string(cp) + "/user/p":                           "user",
			string(cp) + "/system/t\n\n" + string(cp) + "/B": "system",
			string(cp) + "/user/t":                           "user",
		}
	}
	for _, cp := range []agent.Checkpoint{agent.BeforePlanning, agent.AfterPlanning, agent.BeforeToolRound, agent.AfterToolResults, agent.BeforeFinalAnswer} {
		for content, role := range groups(cp) {
			want := 0
			if slices.Contains(temp, cp) {
				want = 1
			}
			if strings.HasSuffix(content, "/p") {
				for _, p := range persisted {
					if p == cp {
						want++
					}
				}
			}
			in := holding(req, content)
			if strict && want > 1 && role == "system" {
				want = 1 // one leading system message holds them all
			}
			if !assert.Len(t, in, want, "request %d: %q", req.Seq, content) {
				continue
			}
			for _, m := range in {
				assert.Equal(t, role, m.Role, "request %d: %q", req.Seq, content)
				if !strict {
					assert.Equal(t, content, m.Content, "request %d: one message per group", req.Seq)
				}
			}
		}
	}
}

func TestHooksToolPath(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny in Paris.").Finish("stop"),
	)
	h := &everyGroup{}
	a := newAgent(t, srv, func(c *agent.Config) { c.Hooks = []agent.Hook{h, second} }, weatherTool())
	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "Weather in Paris?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.NotContains(t, trace(chunks), "warning")

	assert.Equal(t, []string{
		"before_planning:0",
		"after_planning:1", "before_tool_round:1",
		"after_tool_results:2", "before_tool_round:2", "before_final_answer:2",
	}, checkpoints(h.asked))
	for _, a := range h.asked {
		assert.Equal(t, "s1", a.state.SessionID)
		assert.Equal(t, "Weather in Paris?", a.state.Message)
		if a.at == agent.BeforePlanning {
			assert.Empty(t, a.state.Intent)
		} else {
			assert.Equal(t, agent.IntentNeedTool, a.state.Intent, a.at)
		}
		if a.at != agent.AfterToolResults {
			assert.Nil(t, a.state.Calls, a.at)
			assert.Nil(t, a.state.Results, a.at)
		}
	}
	atr := h.asked[3].state
	require.Len(t, atr.Calls, 1)
	assert.Equal(t, "get_weather", atr.Calls[0].Name)
	assert.JSONEq(t, `{"city":"Paris"}`, string(atr.Calls[0].Arguments))
	require.Len(t, atr.Results, 1)
	assert.Equal(t, "call_1", atr.Results[0].ToolCallID)
	assert.Equal(t, "sunny in Paris", atr.Results[0].Content)

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	checkInjected(t, reqs[0], nil, []agent.Checkpoint{agent.BeforePlanning})
	checkInjected(t, reqs[1], []agent.Checkpoint{agent.BeforePlanning}, []agent.Checkpoint{agent.AfterPlanning, agent.BeforeToolRound})
	checkInjected(t, reqs[2], []agent.Checkpoint{agent.BeforePlanning, agent.AfterPlanning, agent.BeforeToolRound},
		[]agent.Checkpoint{agent.AfterToolResults, agent.BeforeToolRound, agent.BeforeFinalAnswer})

	if !strict {
		// The order: the persistent groups where they were injected, the
		// temporary ones after the conversation, before the prompt.
		plan := withPrompt(t, reqs[0], intent.DefaultDictionary().PlanningPrompt())
		assert.Equal(t, []string{
			"user:Weather in Paris?",
			"system:before_planning/system/p",
			"user:before_planning/user/p",
			"system:before_planning/system/t\n\nbefore_planning/B",
			"user:before_planning/user/t",
		}, requestContents(plan[len(plan)-5:]))
		last := requestContents(reqs[2].Messages)
		assert.Equal(t, []string{
			"tool:sunny in Paris",
			"system:after_tool_results/system/p",
			"user:after_tool_results/user/p",
			"system:before_tool_round/system/p",
			"user:before_tool_round/user/p",
			"system:before_final_answer/system/p",
			"user:before_final_answer/user/p",
			"system:after_tool_results/system/t\n\nafter_tool_results/B",
			"user:after_tool_results/user/t",
			"system:before_tool_round/system/t\n\nbefore_tool_round/B",
			"user:before_tool_round/user/t",
			"system:before_final_answer/system/t\n\nbefore_final_answer/B",
			"user:before_final_answer/user/t",
		}, last[len(last)-13:])
	}

	// The turn keeps the persistent injections, flagged, where they were
	// injected.
	msgs := turn.Messages()
	validHistory(t, msgs)
	require.NoError(t, memory.ValidateMessages(msgs))
	assert.Equal(t, strip(msgs), strip(memory.Repair(msgs)), "valid history: Repair changes nothing")
	var got []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + m.Content
		if m.Hook {
			s = "hook " + s
		}
		got = append(got, s)
	}
	assert.Equal(t, []string{
		"user:Weather in Paris?",
		"hook system:before_planning/system/p",
		"hook user:before_planning/user/p",
		"assistant:Let me look that up. <need_tool>",
		"hook system:after_planning/system/p",
		"hook user:after_planning/user/p",
		"hook system:before_tool_round/system/p",
		"hook user:before_tool_round/user/p",
		"assistant:",
		"tool:sunny in Paris",
		"hook system:after_tool_results/system/p",
		"hook user:after_tool_results/user/p",
		"hook system:before_tool_round/system/p",
		"hook user:before_tool_round/user/p",
		"hook system:before_final_answer/system/p",
		"hook user:before_final_answer/user/p",
		"assistant:Sunny in Paris.",
	}, got)
	// History rebuilds the turn from its chunks, which carry no injection.
	var shown []memory.Message
	for _, m := range msgs[1:] {
		if !m.Hook {
			shown = append(shown, m)
		}
	}
	assert.Equal(t, strip(shown), strip(agent.History(chunks)))
}

// requestContents renders msgs as "role:content".
func requestContents(msgs []agenttest.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ":" + m.Content
	}
	return out
}

func TestHooksNoToolPath(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hello.").Finish("stop"))
	h := &everyGroup{}
	a := newAgent(t, srv, func(c *agent.Config) { c.Hooks = []agent.Hook{h, second} })
	turn := a.NewTurn(agent.Input{Message: "hi"})
	_, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"before_planning:0", "after_planning:1", "before_final_answer:1"}, checkpoints(h.asked))
	assert.Equal(t, agent.IntentNoTool, h.asked[1].state.Intent)
	assert.Equal(t, agent.IntentNoTool, h.asked[2].state.Intent)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	checkInjected(t, reqs[0], nil, []agent.Checkpoint{agent.BeforePlanning})
	checkInjected(t, reqs[1], []agent.Checkpoint{agent.BeforePlanning}, []agent.Checkpoint{agent.AfterPlanning, agent.BeforeFinalAnswer})
	if !strict {
		// The temporary injections come right before the continuation
		// prompt.
		cont := withPrompt(t, reqs[1], intent.ContinuationPrompt())
		assert.Equal(t, "user:before_final_answer/user/t", requestContents(cont[len(cont)-1:])[0])
	}
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, strip(msgs), strip(memory.Repair(msgs)))
}

func TestHooksWithoutPlanning(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_2", "get_weather", `{"city":"Rome"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	h := &everyGroup{}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.DisablePlanning = true
		c.Hooks = []agent.Hook{h, second}
	}, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"before_tool_round:1",
		"after_tool_results:2", "before_tool_round:2", "before_final_answer:2",
		"after_tool_results:3", "before_tool_round:3", "before_final_answer:3",
	}, checkpoints(h.asked))
	for _, a := range h.asked {
		assert.Empty(t, a.state.Intent)
	}
	assert.Equal(t, "sunny in Rome", h.asked[4].state.Results[0].Content, "the results of the round just ended")
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	checkInjected(t, reqs[0], nil, []agent.Checkpoint{agent.BeforeToolRound})
	checkInjected(t, reqs[2],
		[]agent.Checkpoint{agent.BeforeToolRound, agent.AfterToolResults, agent.BeforeToolRound, agent.BeforeFinalAnswer},
		[]agent.Checkpoint{agent.AfterToolResults, agent.BeforeToolRound, agent.BeforeFinalAnswer})
}

// The last round Config.MaxToolRounds allows has no request after it: its
// results are not given to the hooks.
func TestHooksMaxToolRounds(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	h := &everyGroup{}
	a := newAgent(t, srv, func(c *agent.Config) {
		c.MaxToolRounds = 1
		c.Hooks = []agent.Hook{h}
	}, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, agent.WarnMaxToolRounds, chunks[len(chunks)-1].Code)
	assert.Equal(t, []string{"before_planning:0", "after_planning:1", "before_tool_round:1"}, checkpoints(h.asked))
	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, memory.RoleTool, msgs[len(msgs)-1].Role, "nothing after the last results")
}

// AfterToolResults gets every call of the round in call order, with what
// the model reads: a result, an error, a rejection; the same with
// ParallelTools.
func TestHooksSeeToolResults(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().
					Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
					Call(1, "call_2", "no_such_tool", `{}`).
					Call(2, "call_3", "get_weather", `{"city":"Rome"}`).
					Finish("tool_calls").Unsolicited(), // no_such_tool is not offered
				agenttest.Reply().Text("Done.").Finish("stop"),
			)
			var got agent.HookState
			h := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, st agent.HookState) ([]agent.Injection, error) {
				if at == agent.AfterToolResults {
					got = st
					return []agent.Injection{{Content: "Cite the tools you used."}}, nil
				}
				return nil, nil
			})
			a := newAgent(t, srv, func(c *agent.Config) {
				c.ParallelTools = parallel
				c.Hooks = []agent.Hook{h}
			}, weatherTool())
			_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "go"}))
			require.NoError(t, err)
			assert.Equal(t, 2, got.Round)
			var calls, results []string
			for _, c := range got.Calls {
				calls = append(calls, c.ID+":"+c.Name)
			}
			for _, m := range got.Results {
				results = append(results, m.ToolCallID+":"+m.Content)
			}
			assert.Equal(t, []string{"call_1:get_weather", "call_2:no_such_tool", "call_3:get_weather"}, calls)
			assert.Equal(t, []string{"call_1:sunny in Oslo", `call_2:error: unknown tool "no_such_tool"`, "call_3:sunny in Rome"}, results)
			reqs := srv.Requests()
			require.Len(t, reqs, 3)
			assert.Len(t, holding(reqs[2], "Cite the tools you used."), 1)
		})
	}
}

// A hook that fails (an error, a panic, an injection of a role it cannot
// have) is a warning; the run goes on with the other hooks' injections, and
// with the valid injections of a hook whose other injection had a bad role.
func TestHookFailureIsAWarning(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Hello.").Finish("stop"))
	failing := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
		if at == agent.BeforePlanning {
			return []agent.Injection{{Content: "dropped with the error"}}, errors.New("rules file unreadable")
		}
		return nil, nil
	})
	panicking := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
		if at == agent.AfterPlanning {
			panic("bug in hook")
		}
		return nil, nil
	})
	badRole := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
		if at == agent.BeforeFinalAnswer {
			return []agent.Injection{
				{Role: memory.RoleAssistant, Content: "I said so."},
				{Role: memory.RoleUser, Content: "kept despite its neighbour"},
			}, nil
		}
		return nil, nil
	})
	good := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
		return []agent.Injection{{Content: "good at " + string(at)}}, nil
	})
	var nilFunc agent.HookFunc
	a := newAgent(t, srv, func(c *agent.Config) { c.Hooks = []agent.Hook{failing, panicking, badRole, good, nilFunc} })
	turn := a.NewTurn(agent.Input{Message: "hi"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	var warnings []string
	for _, c := range chunks {
		if c.Kind == agent.KindWarning {
			assert.Equal(t, agent.WarnHookFailed, c.Code)
			warnings = append(warnings, fmt.Sprintf("%d:%s", c.Round, c.Text))
		}
	}
	assert.Equal(t, []string{
		"0:hook 0 failed at before_planning: rules file unreadable",
		"0:hook 4 failed at before_planning: hook panicked: runtime error: invalid memory address or nil pointer dereference",
		"1:hook 1 failed at after_planning: hook panicked: bug in hook",
		"1:hook 4 failed at after_planning: hook panicked: runtime error: invalid memory address or nil pointer dereference",
		`1:hook 2 failed at before_final_answer: injection 0 has role "assistant", want "system" or "user"`,
		"1:hook 4 failed at before_final_answer: hook panicked: runtime error: invalid memory address or nil pointer dereference",
	}, warnings)
	assert.Equal(t, []string{"warning", "warning", "text", "round_end:0:no_tool", "warning", "warning", "warning", "warning", "text", "round_end:1"}, trace(chunks))
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, holding(reqs[0], "dropped with the error"))
	assert.Len(t, holding(reqs[0], "good at before_planning"), 1)
	assert.Len(t, holding(reqs[1], "good at after_planning"), 1)
	assert.Len(t, holding(reqs[1], "kept despite its neighbour"), 1)
	assert.Empty(t, holding(reqs[1], "I said so."))
	validHistory(t, turn.Messages())
}

func TestNewRefusesANilHook(t *testing.T) {
	_, err := agent.New(agent.Config{Model: "m", Hooks: []agent.Hook{second, nil}})
	assert.EqualError(t, err, "agent: Config.Hooks[1] is nil")
}

// Persistent injections are stored flagged as hook messages and sent again
// in later turns; temporary ones are neither.
func TestHooksPersistentInTheStore(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Sunny in Lima.").Finish("stop"),
				planNoTool(),
				agenttest.Reply().Text("You asked about Lima.").Finish("stop"),
			)
			turnNo := 0
			h := agent.HookFunc(func(_ context.Context, at agent.Checkpoint, s agent.HookState) ([]agent.Injection, error) {
				switch at {
				case agent.BeforePlanning:
					turnNo++
					return []agent.Injection{{Content: fmt.Sprintf("temporary %d", turnNo)}}, nil
				case agent.AfterToolResults:
					return []agent.Injection{
						{Role: memory.RoleUser, Content: "The user is in Peru.", Persistent: true},
						{Content: "Rules: be brief.", Persistent: true},
					}, nil
				}
				return nil, nil
			})
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Store = st
				c.Hooks = []agent.Hook{h}
			}, weatherTool())
			ctx := context.Background()
			_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
			require.NoError(t, err)
			_, err = collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "What did I ask?"}))
			require.NoError(t, err)

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			var got []string
			for _, m := range msgs {
				s := string(m.Role) + ":" + m.Content
				if m.Hook {
					s = "hook " + s
				}
				got = append(got, s)
			}
			assert.Equal(t, []string{
				"user:Weather in Lima?",
				"assistant:Let me look that up. <need_tool>",
				"assistant:",
				"tool:sunny in Lima",
				"hook system:Rules: be brief.",
				"hook user:The user is in Peru.",
				"assistant:Sunny in Lima.",
				"user:What did I ask?",
				"assistant:Hello! I can answer that.<no_tool>",
				"assistant:You asked about Lima.",
			}, got)

			// The second turn's planning request carries the persistent
			// injections of the first turn, not its temporary one.
			plan2 := srv.Requests()[3]
			assert.Len(t, holding(plan2, "The user is in Peru."), 1)
			assert.Len(t, holding(plan2, "Rules: be brief."), 1)
			assert.Empty(t, holding(plan2, "temporary 1"))
			assert.Len(t, holding(plan2, "temporary 2"), 1)
			// A hook's user message does not start a turn: the truncation
			// of old tool traffic sees the turns as they were.
			assert.Equal(t, 7, memory.CurrentTurn(msgs))
		})
	}
}

// A hook that is waiting when the run is interrupted returns with its
// context; the run ends as interrupted, with no warning and valid history.
func TestHookInterrupted(t *testing.T) {
	for _, at := range []agent.Checkpoint{agent.BeforePlanning, agent.AfterPlanning, agent.AfterToolResults} {
		t.Run(string(at), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := agent.HookFunc(func(ctx context.Context, cp agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
				if cp == at {
					cancel() // the user presses stop while the hook works
					<-ctx.Done()
					return []agent.Injection{{Content: "late", Persistent: true}}, ctx.Err()
				}
				return []agent.Injection{{Content: "kept " + string(cp), Persistent: true}}, nil
			})
			a := newAgent(t, srv, func(c *agent.Config) { c.Hooks = []agent.Hook{h} }, weatherTool())
			turn := a.NewTurn(agent.Input{Message: "go"})
			chunks, err := collect(turn.Run(ctx))
			require.NoError(t, err)
			tr := trace(chunks)
			assert.Equal(t, "interrupted", tr[len(tr)-1])
			assert.NotContains(t, tr, "warning")
			msgs := turn.Messages()
			validHistory(t, msgs)
			require.NoError(t, memory.ValidateMessages(msgs))
			for _, m := range msgs {
				assert.NotEqual(t, "late", m.Content)
			}
		})
	}
}

func TestPreviewAsksTheHooks(t *testing.T) {
	h := &everyGroup{}
	for _, off := range []bool{false, true} {
		h.asked = nil
		a, err := agent.New(agent.Config{Model: "m", DisablePlanning: off, Hooks: []agent.Hook{h, second}})
		require.NoError(t, err)
		msgs, err := a.Preview(context.Background(), agent.Input{Message: "hi"})
		require.NoError(t, err)
		at := agent.BeforePlanning
		if off {
			at = agent.BeforeToolRound
		}
		assert.Equal(t, []string{fmt.Sprintf("%s:%d", at, map[bool]int{false: 0, true: 1}[off])}, checkpoints(h.asked))
		got := contents(msgs)
		if !off {
			got = got[:len(got)-1] // the planning prompt
		}
		assert.Equal(t, []string{
			"user:hi",
			"system:" + string(at) + "/system/p",
			"user:" + string(at) + "/user/p",
			"system:" + string(at) + "/system/t\n\n" + string(at) + "/B",
			"user:" + string(at) + "/user/t",
		}, got)
	}
	// A failing hook is left out of a preview; it has nowhere to warn.
	failing := agent.HookFunc(func(context.Context, agent.Checkpoint, agent.HookState) ([]agent.Injection, error) {
		return nil, errors.New("broken")
	})
	a, err := agent.New(agent.Config{Model: "m", Hooks: []agent.Hook{failing, second}})
	require.NoError(t, err)
	msgs, err := a.Preview(context.Background(), agent.Input{Message: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "system:before_planning/B", contents(msgs)[1])
}

// A consumer that leaves after any chunk of a run with hooks (one of them
// failing, so that warnings are among the chunks) leaves nothing running
// and valid history.
func TestHooksBreakAfterEveryChunk(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Done.").Finish("stop"),
		)
	}
	failing := agent.HookFunc(func(context.Context, agent.Checkpoint, agent.HookState) ([]agent.Injection, error) {
		return nil, errors.New("broken")
	})
	hooks := func() []agent.Hook { return []agent.Hook{&everyGroup{}, failing} }
	srv := newServer(t)
	script(srv)
	all, err := collect(newAgent(t, srv, func(c *agent.Config) { c.Hooks = hooks() }, weatherTool()).Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	require.Greater(t, len(all), 10)
	for n := 1; n <= len(all); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			script(srv)
			turn := newAgent(t, srv, func(c *agent.Config) { c.Hooks = hooks() }, weatherTool()).NewTurn(agent.Input{Message: "go"})
			var got []agent.Chunk
			for c, err := range turn.Run(context.Background()) {
				require.NoError(t, err)
				got = append(got, c)
				if len(got) == n {
					break
				}
			}
			require.Len(t, got, n)
			msgs := turn.Messages()
			validHistory(t, msgs)
			require.NoError(t, memory.ValidateMessages(msgs))
		})
	}
}
