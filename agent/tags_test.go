package agent_test

import (
	"context"
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

// TestTagOnlyPlanningReply: a planning reply that is only a tag becomes an
// empty assistant message once tags are stripped; no request may carry one
// (strict providers refuse it), in this turn or in a later one that loads
// the stored raw tag.
func TestTagOnlyPlanningReply(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			srv := newServer(t)
			srv.Enforce(serverChecks() | agenttest.CheckEmptyAssistant)
			srv.Enqueue(
				agenttest.Reply().Text("<need_", "tool>").Finish("stop"),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Sunny.").Finish("stop"),
				agenttest.Reply().Text(" <need_tool>\n").Finish("stop"),
				agenttest.Reply().Text("Still sunny.").Finish("stop"),
			)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st }, weatherTool())
			ctx := context.Background()
			turn := a.NewTurn(agent.Input{SessionID: "s", Message: "weather?"})
			_, err := collect(turn.Run(ctx))
			require.NoError(t, err)
			assert.Equal(t, "<need_tool>", turn.Messages()[1].Content, "the raw reply is kept")
			_, err = collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "and now?"}))
			require.NoError(t, err)

			reqs := srv.Requests()
			require.Len(t, reqs, 5)
			for _, req := range reqs {
				for i, m := range req.Messages {
					if m.Role == "assistant" {
						assert.True(t, m.Content != "" || len(m.ToolCalls) > 0, "request %d message %d is an empty assistant message", req.Seq, i)
					}
				}
			}
		})
	}
}

// TestCutTagNeverVisible: a tag held back when the stream breaks or the run
// is interrupted ("<need_") is not shown as text.
func TestCutTagNeverVisible(t *testing.T) {
	check := func(t *testing.T, chunks []agent.Chunk) {
		t.Helper()
		var shown, raw strings.Builder
		for _, c := range chunks {
			if c.Kind == agent.KindText {
				shown.WriteString(c.Text)
				raw.WriteString(c.Raw)
			}
		}
		assert.Equal(t, "Let me check. ", shown.String())
		assert.Equal(t, "Let me check. <need_", raw.String(), "the raw text keeps what arrived")
	}
	t.Run("cut", func(t *testing.T) {
		leaktest.Check(t)
		srv := newServer(t)
		srv.Enqueue(agenttest.Reply().Text("Let me check. ", "<need_", "tool>").Finish("stop").CutAfter(2))
		turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "go"})
		chunks, err := collect(turn.Run(context.Background()))
		require.Error(t, err)
		check(t, chunks)
		assert.Equal(t, "Let me check. <need_", turn.Messages()[1].Content)
	})
	t.Run("interrupt", func(t *testing.T) {
		leaktest.Check(t)
		srv := newServer(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The reasoning delta after "<need_" tells when the agent has read it.
		srv.Enqueue(agenttest.Reply().Text("Let me check. ", "<need_").Reasoning("hmm").Text("tool>").Finish("stop").HoldAfter(3))
		turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "go"})
		var chunks []agent.Chunk
		for c, err := range turn.Run(ctx) {
			require.NoError(t, err)
			chunks = append(chunks, c)
			if c.Kind == agent.KindReasoning {
				cancel()
			}
		}
		require.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
		check(t, chunks)
	})
}

// TestToolRoundTextReachesLaterRequestsWithoutTags: the text of a tool round
// goes into the next requests of the run with its intent tags stripped,
// like the planning reply; the stored message keeps them.
func TestToolRoundTextReachesLaterRequestsWithoutTags(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Text("Checking Oslo. <need_tool>").Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Now Lima.<need_tool>").Call(0, "call_2", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Both sunny.").Finish("stop"),
	)
	turn := newAgent(t, srv, nil, weatherTool()).NewTurn(agent.Input{Message: "Oslo and Lima?"})
	_, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	var contents []string
	for _, m := range reqs[3].Messages {
		if m.Role == "assistant" {
			contents = append(contents, m.Content)
			assert.False(t, intent.DefaultDictionary().Detect(m.Content).Found, "request 4 carries a tag: %q", m.Content)
		}
	}
	assert.Equal(t, []string{"Let me look that up.", "Checking Oslo.", "Now Lima."}, contents)
	var stored []string
	for _, m := range turn.Messages() {
		if m.Role == memory.RoleAssistant {
			stored = append(stored, m.Content)
		}
	}
	assert.Equal(t, []string{"Let me look that up. <need_tool>", "Checking Oslo. <need_tool>", "Now Lima.<need_tool>", "Both sunny."}, stored)
}

func TestHistoryTagsStrippedAfterPlanning(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	a := newAgent(t, srv, nil)
	history := []memory.Message{
		{Role: memory.RoleUser, Content: "earlier"},
		{Role: memory.RoleAssistant, Content: "Earlier answer.<no_tool>"},
	}
	_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "now"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	assert.Equal(t, "Earlier answer.<no_tool>", reqs[0].Messages[1].Content, "the planning round sees the examples")
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" {
			assert.NotContains(t, m.Content, "<no_tool>")
		}
	}
}

// TestVisibleTextIsWhatTheStreamShowed: VisibleText shows a stored reply as
// the run's text chunks showed it live: without the voice tag and the
// agent's own intent tags (a custom dictionary's, not the default ones),
// split across deltas, in the middle or cut short at the end.
func TestVisibleTextIsWhatTheStreamShowed(t *testing.T) {
	custom, err := intent.NewDictionary(
		intent.Tag{Name: "<chat>", SkipTools: true, Description: "you answered in words"},
		intent.Tag{Name: "<act>", Description: "you need a tool"},
	)
	require.NoError(t, err)
	for _, tt := range []struct {
		name    string
		dict    intent.Dictionary
		replies []agenttest.Response
	}{
		{"default", intent.DefaultDictionary(), []agenttest.Response{
			agenttest.Reply().Text("<voice>Hello! I can ", "answer that.<no_", "tool>").Finish("stop"),
			agenttest.Reply().Text("Here <need_tool>it is, <chat>. <no_").Finish("stop"),
		}},
		{"custom", custom, []agenttest.Response{
			agenttest.Reply().Text("<voice>Sure <need_tool> thing. <ch", "at>").Finish("stop"),
			agenttest.Reply().Text("Done <act>now.", " <no_tool> <a").Finish("stop"),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(tt.replies...)
			a := newAgent(t, srv, func(c *agent.Config) { c.Intents = tt.dict })
			turn := a.NewTurn(agent.Input{Message: "hi"})
			chunks, err := collect(turn.Run(context.Background()))
			require.NoError(t, err)
			var round int
			for _, m := range turn.Messages() {
				if m.Role != memory.RoleAssistant {
					continue
				}
				live := text(chunks, round)
				assert.Equal(t, live, a.VisibleText(m.Content), "round %d, stored %q", round, m.Content)
				round++
			}
			require.Equal(t, 2, round, "two assistant messages")
			assert.NotContains(t, a.VisibleText(turn.Messages()[1].Content), "<voice>")
		})
	}
}
