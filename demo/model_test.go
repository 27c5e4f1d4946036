package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/memory"
)

type call struct{ id, name, args string }

type reply struct {
	deltas    []string
	text      string
	reasoning string
	calls     []*call
	finish    string
	usage     int64
}

// ask sends msgs (with the demo tools named in tools) to a zero-delay
// demo model through openai-go's streaming client.
func ask(t *testing.T, msgs []openai.ChatCompletionMessageParamUnion, tools ...string) reply {
	t.Helper()
	return askModel(t, demo.Model{}, msgs, tools...)
}

// client returns an openai-go client whose requests m answers.
func client(m demo.Model) openai.Client {
	return openai.NewClient(option.WithBaseURL(demo.BaseURL), option.WithHTTPClient(m.Client()), option.WithMaxRetries(0))
}

func askModel(t *testing.T, m demo.Model, msgs []openai.ChatCompletionMessageParamUnion, tools ...string) reply {
	t.Helper()
	c := client(m)
	p := openai.ChatCompletionNewParams{Model: "demo", Messages: msgs}
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	for _, tool := range offerable(t) {
		d := tool.Definition()
		for _, name := range tools {
			if name == d.Name {
				p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name: d.Name, Description: openai.String(d.Description), Parameters: d.Parameters,
				}))
			}
		}
	}
	st := c.Chat.Completions.NewStreaming(context.Background(), p)
	defer st.Close()
	var r reply
	for st.Next() {
		ch := st.Current()
		if ch.JSON.Usage.Valid() {
			r.usage = ch.Usage.TotalTokens
		}
		for _, choice := range ch.Choices {
			if d := choice.Delta.Content; d != "" {
				r.deltas = append(r.deltas, d)
				r.text += d
			}
			if f, ok := choice.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				_ = json.Unmarshal([]byte(f.Raw()), &s)
				r.reasoning += s
			}
			for _, tc := range choice.Delta.ToolCalls {
				for len(r.calls) <= int(tc.Index) {
					r.calls = append(r.calls, &call{})
				}
				c := r.calls[tc.Index]
				if tc.ID != "" {
					c.id = tc.ID
				}
				c.name += tc.Function.Name
				c.args += tc.Function.Arguments
			}
			if choice.FinishReason != "" {
				r.finish = choice.FinishReason
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

var allTools = []string{"get_weather", "get_time", "run_command", "show_card"}

// planning is a planning request: the system prompt, the user message and
// a trailing planning prompt (the demo must not depend on its wording).
func planning(user string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are helpful."),
		openai.UserMessage(user),
		openai.SystemMessage("Answer in words first, then end with <no_tool> or <need_tool>."),
	}
}

// afterPlan is the working list after the planning round.
func afterPlan(user, plan string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are helpful."),
		openai.UserMessage(user),
		openai.AssistantMessage(plan),
		openai.UserMessage("[continue]"),
	}
}

func TestPlanning(t *testing.T) {
	tests := []struct {
		user     string
		tag      string
		contains []string
		voice    bool
	}{
		{"what's the weather in Paris?", "<need_tool>", []string{"weather in Paris"}, false},
		{"Weather in new york please", "<need_tool>", []string{"weather in New York"}, false},
		{"Research the weather in Oslo for me", "<need_tool>", []string{"weather in Oslo for you."}, false},
		{"weather in San Francisco then run ls", "<need_tool>", []string{"weather in San Francisco and run"}, false},
		{"what's the forecast", "<need_tool>", []string{"weather in Paris"}, false},
		{"What time is it in Tokyo, and run `echo hi`", "<need_tool>", []string{"time in Asia/Tokyo", "run `echo hi`"}, false},
		{"what time is it?", "<need_tool>", []string{"time in UTC"}, false},
		{"please run ls -la", "<need_tool>", []string{"run `ls -la`"}, false},
		{"show me a card about cats", "<need_tool>", []string{"card titled “cats”"}, false},
		{"hello there", "<no_tool>", []string{"Hello!"}, false},
		{"why is the sky blue", "<no_tool>", nil, false},
		{"say good night", "<no_tool>", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			r := ask(t, planning(tt.user))
			if !strings.HasSuffix(r.text, tt.tag) || strings.Count(r.text, "_tool>") != 1 {
				t.Errorf("plan %q does not end with exactly %s", r.text, tt.tag)
			}
			for _, c := range tt.contains {
				if !strings.Contains(r.text, c) {
					t.Errorf("plan %q lacks %q", r.text, c)
				}
			}
			if got := strings.HasPrefix(r.text, "<voice>"); got != tt.voice {
				t.Errorf("plan %q: voice %v, want %v", r.text, got, tt.voice)
			}
			if r.finish != "stop" || len(r.calls) != 0 || r.usage == 0 {
				t.Errorf("finish %q calls %d usage %d", r.finish, len(r.calls), r.usage)
			}
			// Streamed in small deltas; the tag never arrives whole.
			for _, d := range r.deltas {
				if len([]rune(d)) > 5 || strings.Contains(d, tt.tag) {
					t.Errorf("delta %q is too large or holds the whole tag", d)
				}
			}
		})
	}
}

func TestPlanningIsDeterministic(t *testing.T) {
	a := ask(t, planning("weather in Oslo and the time in London"))
	b := ask(t, planning("weather in Oslo and the time in London"))
	if a.text != b.text || strings.Join(a.deltas, "|") != strings.Join(b.deltas, "|") {
		t.Errorf("two answers differ:\n%q\n%q", a.deltas, b.deltas)
	}
}

func TestContinuation(t *testing.T) {
	msgs := append(afterPlan("hello", "Hello! Nice to meet you. <no_tool>"), openai.SystemMessage("Now answer completely."))
	r := ask(t, msgs)
	if r.finish != "stop" || len(r.calls) != 0 {
		t.Fatalf("finish %q calls %d", r.finish, len(r.calls))
	}
	if strings.Contains(r.text, "_tool>") || strings.Count(r.text, ". ") < 2 || len(r.deltas) < 20 {
		t.Errorf("continuation %q: want a full answer of several sentences, no tag, many deltas", r.text)
	}
	r = ask(t, append(afterPlan("say good night", "<voice>Okay. <no_tool>"), openai.SystemMessage("Now answer.")))
	if !strings.HasPrefix(r.text, "<voice>Good night!") {
		t.Errorf("voice answer = %q", r.text)
	}
}

func TestToolCalls(t *testing.T) {
	user := "What's the weather in Berlin and the time in Tokyo?"
	r := ask(t, afterPlan(user, "Sure! <need_tool>"), allTools...)
	if r.finish != "tool_calls" || !strings.Contains(r.text, "get_weather and get_time") || r.reasoning == "" {
		t.Errorf("finish %q text %q reasoning %q", r.finish, r.text, r.reasoning)
	}
	want := []struct{ name, args string }{
		{"get_weather", `{"city":"Berlin"}`},
		{"get_time", `{"timezone":"Asia/Tokyo"}`},
	}
	if len(r.calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(r.calls), len(want))
	}
	for i, w := range want {
		c := r.calls[i]
		if c.name != w.name || c.args != w.args || c.id == "" {
			t.Errorf("call %d = %+v, want %s %s", i, *c, w.name, w.args)
		}
	}
	if r.calls[0].id == r.calls[1].id {
		t.Errorf("calls share id %q", r.calls[0].id)
	}

	// Only tools the request offers are called.
	r = ask(t, afterPlan(user, "Sure! <need_tool>"), "get_time")
	if len(r.calls) != 1 || r.calls[0].name != "get_time" {
		t.Errorf("with only get_time offered: %d calls", len(r.calls))
	}

	// Asked for nothing a tool does: words, no call.
	r = ask(t, afterPlan("why is the sky blue", "Hmm. <need_tool>"), allTools...)
	if len(r.calls) != 0 || r.finish != "stop" || r.text == "" {
		t.Errorf("no-tool question: calls %d finish %q text %q", len(r.calls), r.finish, r.text)
	}

	// A command and a card.
	r = ask(t, afterPlan("run `echo hi` and show me a card", "Sure! <need_tool>"), allTools...)
	if len(r.calls) != 2 || r.calls[0].args != `{"command":"echo hi"}` || r.calls[1].name != "show_card" {
		t.Errorf("calls = %v", r.calls)
	} else {
		var card map[string]string
		if err := json.Unmarshal([]byte(r.calls[1].args), &card); err != nil || card["title"] == "" || card["body"] == "" {
			t.Errorf("show_card args %s (%v)", r.calls[1].args, err)
		}
	}
}

func TestFinalAnswer(t *testing.T) {
	msgs := afterPlan("weather in Berlin and time in Tokyo", "Sure! <need_tool>")
	msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
			{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "c1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Berlin"}`}}},
			{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "c2", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_time", Arguments: `{"timezone":"Asia/Tokyo"}`}}},
		},
	}}, openai.ToolMessage("Berlin: sunny, 20 °C", "c1"), openai.ToolMessage("09:00 in Asia/Tokyo", "c2"))
	r := ask(t, msgs, allTools...)
	if len(r.calls) != 0 || r.finish != "stop" {
		t.Fatalf("calls %d finish %q", len(r.calls), r.finish)
	}
	for _, want := range []string{"get_weather: Berlin: sunny, 20 °C", "get_time: 09:00 in Asia/Tokyo"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("final %q lacks %q", r.text, want)
		}
	}

	// A new user turn after that one: planning again (no tools), or calls
	// (tools), never a final answer about the old results.
	next := append(msgs, openai.AssistantMessage(r.text), openai.UserMessage("and the weather in Rome?"))
	if p := ask(t, append(next, openai.SystemMessage("plan"))); !strings.HasSuffix(p.text, "<need_tool>") {
		t.Errorf("next turn planning = %q", p.text)
	}
	if c := ask(t, append(next, openai.AssistantMessage("ok <need_tool>"), openai.UserMessage("[continue]")), allTools...); len(c.calls) != 1 || c.calls[0].args != `{"city":"Rome"}` {
		t.Errorf("next turn calls = %v", c.calls)
	}
}

func TestNonStreaming(t *testing.T) {
	c := client(demo.Model{})
	got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris"), openai.SystemMessage("Summarise.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; !strings.Contains(text, "weather in Paris") {
		t.Errorf("summary = %q", text)
	}
}

// TestDelayStreams: a model with a delay streams the same reply, in the
// same deltas.
func TestDelayStreams(t *testing.T) {
	want := ask(t, planning("hi"))
	r := askModel(t, demo.Model{Delay: time.Millisecond}, planning("hi"))
	if !strings.HasSuffix(r.text, "<no_tool>") || !slices.Equal(r.deltas, want.deltas) {
		t.Errorf("plan = %q, want %q", r.deltas, want.deltas)
	}
}

func TestFinalAnswerQuotesLongOutputBriefly(t *testing.T) {
	var out strings.Builder
	for i := range 40 {
		fmt.Fprintf(&out, "line %d\n", i)
	}
	msgs := afterPlan("run `seq 40`", "Sure! <need_tool>")
	msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
			{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "c1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "run_command", Arguments: `{"command":"seq 40"}`}}},
		},
	}}, openai.ToolMessage(out.String(), "c1"))
	r := ask(t, msgs, allTools...)
	if !strings.Contains(r.text, "line 11\n…") {
		t.Errorf("final does not stop after 12 lines: %q", r.text)
	}
	if strings.Contains(r.text, "line 12") {
		t.Errorf("final quotes more than 12 lines: %q", r.text)
	}
}

// The agent's summary request streams, like a round's: the demo model
// answers it with a summary of the user's messages in the transcript, not
// with a plan.
func TestAgentSummary(t *testing.T) {
	m := demo.Model{}
	a, err := agent.New(agent.Config{BaseURL: demo.BaseURL, HTTPClient: m.Client(), Model: demo.ModelName, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.SummaryModel().Summarize(t.Context(), []memory.Message{
		{Role: memory.RoleUser, Content: "weather in Paris"},
		{Role: memory.RoleAssistant, Content: "Let me check. <need_tool>"},
		{Role: memory.RoleUser, Content: "and in Rome?"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Summary: the user asked: weather in Paris; and in Rome?."; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}
