package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

func TestPlanningRoundNeedToolRunsToolLoop(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"ci`, `ty":"Pa`, `ris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("It is sunny in Paris.").Usage(30, 6).Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "Weather in Paris?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"text", "tool:start:get_weather", "tool:approval_required:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, "Let me look that up. ", text(chunks, 0), "tags never visible")
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			assert.Equal(t, "sunny in Paris", c.Tool.Result)
			assert.JSONEq(t, `{"city":"Paris"}`, string(c.Tool.Arguments))
		}
	}

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	plan := reqs[0]
	assert.False(t, plan.HasTools(), "planning request carries no tools")
	withPrompt(t, plan, intent.DefaultDictionary().PlanningPrompt())
	assert.NotContains(t, plan.LastMessage().Content, "get_weather", "no tool descriptions in the planning prompt")

	for i, req := range reqs[1:] {
		assert.True(t, req.HasTools(), "tool-loop request %d has tools", i+1)
		var sawContinue bool
		for _, m := range req.Messages {
			assert.NotContains(t, m.Content, intent.DefaultDictionary().PlanningPrompt(), "planning prompt gone from later requests")
			if m.Role == "assistant" {
				assert.NotContains(t, m.Content, "<need_tool>", "no intent tag in later requests")
			}
			if m.Role == "user" && m.Content == intent.ContinueMessage {
				sawContinue = true
			}
		}
		assert.True(t, sawContinue, "request %d has the [continue] transition", i+1)
	}
	// The tool loop's second request answers the call.
	second := reqs[2].Messages
	require.GreaterOrEqual(t, len(second), 2)
	assert.Equal(t, "tool", second[len(second)-1].Role)
	assert.Equal(t, "call_1", second[len(second)-1].ToolCallID)
	assert.Equal(t, "sunny in Paris", second[len(second)-1].Content)

	msgs := turn.Messages()
	validHistory(t, msgs)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = string(m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "assistant", "tool", "assistant"}, roles)
	assert.Equal(t, "Let me look that up. <need_tool>", msgs[1].Content, "persisted text keeps raw tags")
	for _, c := range chunks {
		if c.Kind == agent.KindRoundEnd && c.Round == 0 {
			assert.Equal(t, agent.IntentNeedTool, c.Intent)
			assert.Equal(t, int64(10), c.Usage.PromptTokens, "usage per round")
		}
	}
	assert.Equal(t, int64(40), turn.Usage().PromptTokens)
}

func TestPlanningRoundNoToolContinues(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("The answer ", "is 42.").Finish("stop"))
	a := newAgent(t, srv, nil, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "What is the answer?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
	assert.Equal(t, "The answer is 42.", text(chunks, 1))

	reqs := srv.Requests()
	require.Len(t, reqs, 2, "exactly one continuation request")
	cont := reqs[1]
	assert.False(t, cont.HasTools())
	rest := withPrompt(t, cont, intent.ContinuationPrompt())
	n := len(rest)
	require.GreaterOrEqual(t, n, 2)
	assert.Equal(t, intent.ContinueMessage, rest[n-1].Content)
	assert.Equal(t, "Hello! I can answer that.", rest[n-2].Content, "tags stripped from the working list")
	for _, m := range cont.Messages {
		assert.NotContains(t, m.Content, intent.DefaultDictionary().PlanningPrompt())
	}
	msgs := turn.Messages()
	require.Len(t, msgs, 3)
	assert.Equal(t, "Hello! I can answer that.<no_tool>", msgs[1].Content)
	for _, m := range msgs {
		assert.NotEqual(t, intent.ContinueMessage, m.Content, "[continue] is never persisted")
	}
}

func TestPlanningRoundWithoutTagRunsToolLoop(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Text("Sure.").Finish("stop"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	a := newAgent(t, srv, nil, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:none", "text", "round_end:1"}, trace(chunks))
	assert.True(t, srv.Requests()[1].HasTools())
}

// TestPlanningRoundIgnoresToolCalls: a model that calls a tool in the
// planning round (which offers none) has the call ignored: no chunk, no
// history, nothing run.
func TestPlanningRoundIgnoresToolCalls(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		// A model that calls a tool it was not offered: the kit serves it
		// only when told to.
		agenttest.Reply().Text("On it. <need_tool>").Call(0, "call_p", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls").Unsolicited(),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	var ran atomic.Bool
	tool := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			ran.Store(true)
			return "", nil
		},
	}
	turn := newAgent(t, srv, nil, tool).NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:need_tool", "text", "round_end:1"}, trace(chunks))
	assert.False(t, ran.Load())
	for _, m := range turn.Messages() {
		assert.Empty(t, m.ToolCalls)
	}
	for _, m := range srv.Requests()[1].Messages {
		assert.Empty(t, m.ToolCalls, "the next request carries no planning-round call")
	}
}

// TestPlanningOffStartsWithToolLoop: with Config.DisablePlanning the run
// starts with the tool loop at round 1: no planning prompt, no round 0, no
// intent, no [continue].
func TestPlanningOffStartsWithToolLoop(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("It is sunny in Paris.").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, weatherTool())
	turn := a.NewTurn(agent.Input{Message: "Weather in Paris?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"text", "tool:start:get_weather", "tool:approval_required:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"text", "round_end:2",
	}, trace(chunks))
	for _, c := range chunks {
		assert.NotZero(t, c.Round, "no chunk of a planning round: %+v", c)
	}

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	first := reqs[0]
	assert.True(t, first.HasTools(), "the first request is a tool round")
	assert.Equal(t, agenttest.Message{Role: "user", Content: "Weather in Paris?"}, first.LastMessage(), "no temporary prompt")
	for _, req := range reqs {
		for _, m := range req.Messages {
			assert.NotContains(t, m.Content, intent.DefaultDictionary().PlanningPrompt())
			assert.NotEqual(t, intent.ContinueMessage, m.Content)
		}
	}

	msgs := turn.Messages()
	validHistory(t, msgs)
	assert.Equal(t, []string{"user:Weather in Paris?", "assistant:Checking.", "tool:sunny in Paris", "assistant:It is sunny in Paris."}, contents(msgs))
	assert.Equal(t, agent.History(chunks), strip(msgs[1:]))
}

// TestPlanningOffWithoutTools: an agent without tools and without the
// planning round answers in one request.
func TestPlanningOffWithoutTools(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(agenttest.Reply().Text("Hello!").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true })
	turn := a.NewTurn(agent.Input{Message: "hi"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:1"}, trace(chunks))
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.False(t, reqs[0].HasTools())
	assert.Equal(t, []string{"user:hi", "assistant:Hello!"}, contents(turn.Messages()))
}

// TestPlanningOffStripsEarlierTags: intent tags that earlier turns (with
// the planning round) left in the history do not reach the tool loop.
func TestPlanningOffStripsEarlierTags(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(agenttest.Reply().Text("Fine.").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true })
	history := []memory.Message{
		{Role: memory.RoleUser, Content: "hi"},
		{Role: memory.RoleAssistant, Content: "Hello!<no_tool>"},
	}
	_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "how are you?"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	m, ok := reqs[0].LastMessageWithRole("assistant")
	require.True(t, ok)
	assert.Equal(t, "Hello!", m.Content)
}

// TestPlanningOffMaxToolRounds: without the planning round, the rounds are
// still numbered from 1 and Config.MaxToolRounds counts them all.
func TestPlanningOffMaxToolRounds(t *testing.T) {
	srv := newServer(t)
	for i := range 2 {
		srv.Enqueue(agenttest.Reply().Call(0, fmt.Sprintf("call_%d", i), "show_card", `{}`).Finish("tool_calls"))
	}
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true; c.MaxToolRounds = 2 }, cardTool())
	turn := a.NewTurn(agent.Input{Message: "loop"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	last := chunks[len(chunks)-1]
	assert.Equal(t, agent.WarnMaxToolRounds, last.Code)
	assert.Equal(t, 2, last.Round)
	assert.Len(t, srv.Requests(), 2)
	validHistory(t, turn.Messages())
}

// TestPlanningOffWithStore: turns without the planning round keep a valid
// conversation in the Store, with no [continue] anywhere, and the next turn
// sees the last.
func TestPlanningOffWithStore(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			srv := newServer(t)
			srv.Enqueue(
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Sunny in Lima.").Finish("stop"),
				agenttest.Reply().Text("You asked about Lima.").Finish("stop"),
			)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.DisablePlanning = true }, weatherTool())
			ctx := context.Background()
			_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
			require.NoError(t, err)
			chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "What did I ask?"}))
			require.NoError(t, err)
			assert.Equal(t, []string{"text", "round_end:1"}, trace(chunks))

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, []string{
				"user:Weather in Lima?",
				"assistant:",
				"tool:sunny in Lima",
				"assistant:Sunny in Lima.",
				"user:What did I ask?",
				"assistant:You asked about Lima.",
			}, contents(msgs))

			reqs := srv.Requests()
			require.Len(t, reqs, 3)
			assert.Contains(t, contentsOf(reqs[2].Messages), "tool:sunny in Lima", "the second turn sees the first")
			for _, req := range reqs {
				assert.NotContains(t, contentsOf(req.Messages), "user:"+intent.ContinueMessage)
			}
		})
	}
}

// contentsOf renders request messages as "role:content".
func contentsOf(msgs []agenttest.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ":" + m.Content
	}
	return out
}

// TestPlanningOffBreakAfterEveryChunk breaks out of a run without the
// planning round, whose answer the token limit cuts, after chunk 1, 2, ...
// N: no leak, valid history that keeps all the text the consumer saw.
func TestPlanningOffBreakAfterEveryChunk(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			agenttest.Reply().Text("Checking.").Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny, ", "22").Finish("length"),
		)
	}
	mut := func(c *agent.Config) { c.DisablePlanning = true }
	srv := newServer(t)
	script(srv)
	all, err := collect(newAgent(t, srv, mut, weatherTool()).Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	require.Equal(t, []string{
		"text", "tool:start:get_weather", "tool:approval_required:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"text", "warning", "round_end:2",
	}, trace(all))
	for n := 1; n <= len(all); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			script(srv)
			turn := newAgent(t, srv, mut, weatherTool()).NewTurn(agent.Input{Message: "go"})
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
			var seen, kept strings.Builder
			for _, c := range got {
				if c.Kind == agent.KindText {
					seen.WriteString(c.Raw)
				}
			}
			for _, m := range msgs {
				if m.Role == memory.RoleAssistant {
					kept.WriteString(m.Content)
				}
			}
			assert.True(t, strings.HasPrefix(kept.String(), seen.String()), "kept %q, saw %q", kept.String(), seen.String())
		})
	}
}
