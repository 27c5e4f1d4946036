package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/openai/openai-go/v3"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
)

// skillFS holds two skills, pdf and haiku.
var skillFS = fstest.MapFS{
	"pdf/SKILL.md":   {Data: []byte("---\nname: pdf\ndescription: Read PDF files.\n---\nOpen the PDF, then read it page by page.\n")},
	"haiku/SKILL.md": {Data: []byte("---\nname: haiku\ndescription: Write haiku.\n---\nFive, seven, five syllables.\n")},
}

func loadSkills(t *testing.T) *skills.Set {
	t.Helper()
	set, err := skills.Load(skillFS)
	if err != nil || len(set.Skills()) != 2 {
		t.Fatalf("skills: %v %v", set.Skipped(), err)
	}
	return set
}

// offerable are the tools a test request may offer: the demo tools,
// ask_user_question, get_skill and the researcher.
func offerable(t *testing.T) []agent.Tool {
	t.Helper()
	r, err := demo.Researcher(demoConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	return append(demo.Tools(), interact.AskUserQuestion(), loadSkills(t).Tool(), r)
}

// demoConfig is an agent's Config on a zero-delay demo model.
func demoConfig(tools *agent.ToolRegistry) agent.Config {
	return agent.Config{BaseURL: demo.BaseURL, HTTPClient: demo.Model{}.Client(), Model: demo.ModelName, Tools: tools}
}

// skillsBlock is the system block a skills layer gives for pdf and haiku.
func skillsBlock() string {
	return skills.Intro + "\n\n- haiku: Write haiku.\n- pdf: Read PDF files."
}

func TestPlanningInteractiveTools(t *testing.T) {
	for _, tt := range []struct {
		user, want string
		system     string
	}{
		{"ask me a few things", "prepare a form with a few questions", ""},
		{"I have a question for you", "prepare a form with a few questions", ""},
		{"show me a form", "prepare a form with a few questions", ""},
		{"research the weather in Oslo", "ask the researcher to find the weather in Oslo", ""},
		{"delegate to a sub-agent: the time in Tokyo", "ask the researcher to find the time in Asia/Tokyo", ""},
		{"use a subagent", "ask the researcher to find the weather in Paris and the time in Europe/Paris", ""},
		{"read the pdf skill", "read the skill “pdf”", ""},
		{"use a skill", "read the skill “haiku”", skillsBlock()},
		{"use the pdf skill", "read the skill “pdf”", skillsBlock()},
	} {
		t.Run(tt.user, func(t *testing.T) {
			msgs := planning(tt.user)
			if tt.system != "" {
				msgs = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage(tt.system)}, msgs...)
			}
			r := ask(t, msgs)
			if !strings.Contains(r.text, tt.want) || !strings.HasSuffix(r.text, "<need_tool>") {
				t.Errorf("plan %q, want %q and <need_tool>", r.text, tt.want)
			}
			if strings.Contains(r.text, "card") {
				t.Errorf("plan %q: \"show\" asked for a form, not a card too", r.text)
			}
		})
	}
}

func TestAskUserQuestionCall(t *testing.T) {
	want := `{"title":"A few questions","questions":[` +
		`{"id":"colour","question":"Which colour do you like best?","kind":"single","options":["red","green","blue"]},` +
		`{"id":"days","question":"Which days suit you?","kind":"multiple","options":["Monday","Wednesday","Friday"]},` +
		`{"id":"note","question":"Anything else you would like to tell me?","kind":"text"}]}`
	for _, user := range []string{"ask me something", "Questions, please", "fill in a FORM"} {
		r := ask(t, afterPlan(user, "Sure! <need_tool>"), append(allTools, "ask_user_question")...)
		if len(r.calls) != 1 || r.calls[0].name != "ask_user_question" || r.calls[0].args != want {
			t.Errorf("%q: calls %v", user, r.calls)
		}
	}
	// Not offered: no call.
	if r := ask(t, afterPlan("ask me something", "Sure! <need_tool>"), allTools...); len(r.calls) != 0 {
		t.Errorf("ask_user_question not offered, but called: %v", r.calls)
	}
	// "ask" alone is no form.
	if r := ask(t, planning("can I ask you something")); !strings.HasSuffix(r.text, "<no_tool>") {
		t.Errorf("plan %q", r.text)
	}
}

func TestResearcherCall(t *testing.T) {
	all := append(allTools, demo.ResearcherName)
	for _, tt := range []struct{ user, task string }{
		{"research the weather in Oslo and the time in Tokyo", "Find the weather in Oslo and the time in Asia/Tokyo."},
		{"delegate the forecast for Rome", "Find the weather in Rome."},
		{"ask a sub-agent", "Find the weather in Paris and the time in Europe/Paris."},
	} {
		r := ask(t, afterPlan(tt.user, "Sure! <need_tool>"), all...)
		task, _ := json.Marshal(map[string]string{"task": tt.task})
		if len(r.calls) != 1 || r.calls[0].name != demo.ResearcherName || r.calls[0].args != string(task) {
			t.Errorf("%q: calls %v, want researcher %s", tt.user, r.calls, task)
		}
	}
	// Research and a command: both.
	r := ask(t, afterPlan("research the weather and run `echo hi`", "Sure! <need_tool>"), all...)
	if len(r.calls) != 2 || r.calls[0].name != demo.ResearcherName || r.calls[1].name != "run_command" {
		t.Errorf("calls %v", r.calls)
	}
	// Without the researcher the weather and the time are looked up
	// directly.
	r = ask(t, afterPlan("research the weather in Oslo and the time in Tokyo", "Sure! <need_tool>"), allTools...)
	if len(r.calls) != 2 || r.calls[0].name != "get_weather" || r.calls[1].name != "get_time" {
		t.Errorf("without the researcher: calls %v", r.calls)
	}
}

func TestGetSkillCall(t *testing.T) {
	all := append(allTools, skills.ToolName)
	withBlock := func(user string) []openai.ChatCompletionMessageParamUnion {
		return append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are helpful.\n\n" + skillsBlock() + "\n\n- not: a skill")},
			afterPlan(user, "Sure! <need_tool>")[1:]...)
	}
	for _, tt := range []struct {
		user, name string
		block      bool
	}{
		{"use a skill", "haiku", true},            // the first listed
		{"use the pdf skill.", "pdf", true},       // named
		{"skills: PDF", "pdf", true},              // named, any case
		{"use the `notes` skill", "notes", false}, // no block: a name in the message
		{"use the notes skill", "notes", false},
		{"use the skill named notes", "notes", false},
	} {
		msgs := afterPlan(tt.user, "Sure! <need_tool>")
		if tt.block {
			msgs = withBlock(tt.user)
		}
		r := ask(t, msgs, all...)
		if len(r.calls) != 1 || r.calls[0].name != skills.ToolName || r.calls[0].args != `{"name":"`+tt.name+`"}` {
			t.Errorf("%q: calls %v, want get_skill %s", tt.user, r.calls, tt.name)
		}
	}
	// The model reads the first 100 skills of a block.
	var big strings.Builder
	big.WriteString(skills.Intro + "\n")
	for i := range 1000 {
		fmt.Fprintf(&big, "\n- s%d: skill %d", i, i)
	}
	for user, want := range map[string]string{"use the s99 skill": "s99", "use the s100 skill": "s0"} {
		msgs := append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage(big.String())}, afterPlan(user, "Sure! <need_tool>")[1:]...)
		if r := ask(t, msgs, all...); len(r.calls) != 1 || r.calls[0].args != `{"name":"`+want+`"}` {
			t.Errorf("%q with 1000 skills: calls %v, want %s", user, r.calls, want)
		}
	}
	// No block and no name: no call.
	if r := ask(t, afterPlan("use a skill", "Sure! <need_tool>"), all...); len(r.calls) != 0 {
		t.Errorf("calls %v", r.calls)
	}
}

// run runs a with msg in session s1 and returns its chunks; onChunk, when
// not nil, sees each chunk as it comes; forms, when not nil, ask the
// person.
func run(t *testing.T, a *agent.Agent, msg string, forms *person.Forms, onChunk func(agent.Chunk)) []agent.Chunk {
	t.Helper()
	var chunks []agent.Chunk
	ctx := t.Context()
	if forms != nil {
		ctx = interact.WithAsker(ctx, forms) // no runner: the test's forms ask
	}
	for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
		if onChunk != nil {
			onChunk(c)
		}
	}
	return chunks
}

func finalText(chunks []agent.Chunk) string {
	last := 0
	for _, c := range chunks {
		if c.Kind == agent.KindText && c.Depth == 0 {
			last = max(last, c.Round)
		}
	}
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindText && c.Depth == 0 && c.Round == last {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// The form the demo model asks for is answered from the range loop, and the
// answers reach its final answer.
func TestDemoFormAnswered(t *testing.T) {
	leaktest.Check(t)
	forms, err := person.StartForms(person.FormsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agent.NewToolRegistry(interact.AskUserQuestion())
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(demoConfig(tools))
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	chunks := run(t, a, "ask me a few questions", forms, func(c agent.Chunk) {
		fr, ok := c.Side.(interact.FormRequest)
		if c.Kind != agent.KindSide || !ok {
			return
		}
		asked++
		if len(fr.Questions) != 3 {
			t.Errorf("questions %+v", fr.Questions)
		}
		if _, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: fr.FormID,
			Answers: interact.Answers{"colour": {"blue"}, "days": {"Monday", "Friday"}, "note": {"hi there"}}, By: "tester", Via: "test"}); err != nil {
			t.Error(err)
		}
	})
	if asked != 1 {
		t.Fatalf("%d forms shown", asked)
	}
	final := finalText(chunks)
	for _, want := range []string{"ask_user_question:", `"answer":"blue"`, `"answer":["Monday","Friday"]`, `"answer":"hi there"`} {
		if !strings.Contains(final, want) {
			t.Errorf("final answer %q lacks %q", final, want)
		}
	}
	if forms.Len() != 0 {
		t.Errorf("%d forms left", forms.Len())
	}
}

// The researcher's nested calls are asked of the calling run's approver,
// through the approvals a runner keeps (person.Approvals), and its chunks
// come marked.
func TestDemoResearcherNested(t *testing.T) {
	leaktest.Check(t)
	m, err := person.StartApprovals(person.ApprovalsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := demoConfig(nil)
	cfg.Approver = m
	r, err := demo.Researcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agent.NewToolRegistry(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.SetSkipApproval(demo.ResearcherName, true); err != nil {
		t.Fatal(err)
	}
	cfg.Tools = tools
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var approvals []string
	chunks := run(t, a, "research the weather in Oslo and the time in Tokyo", nil, func(c agent.Chunk) {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			approvals = append(approvals, c.Agent+":"+c.Tool.Name)
			if _, err := m.Respond(t.Context(), person.Reply{SessionID: "s1", ApprovalID: c.Tool.ApprovalID,
				CallID: c.Tool.ID, Tool: c.Tool.Name, ArgumentsDigest: c.Tool.ArgumentsDigest, Decision: agent.Decision{Approved: true}}); err != nil {
				t.Error(err)
			}
		}
	})
	if strings.Join(approvals, ",") != "researcher:get_weather,researcher:get_time" {
		t.Errorf("approvals %v", approvals)
	}
	nested := 0
	for _, c := range chunks {
		if c.Depth > 0 {
			nested++
			if c.Agent != demo.ResearcherName || c.Depth != 1 || c.Parent == "" {
				t.Errorf("nested chunk marked %q %d %q", c.Agent, c.Depth, c.Parent)
			}
		}
	}
	if nested == 0 {
		t.Error("no nested chunk")
	}
	final := finalText(chunks)
	for _, want := range []string{"researcher:", "get_weather: Oslo:", "get_time:", "Asia/Tokyo"} {
		if !strings.Contains(final, want) {
			t.Errorf("final answer %q lacks %q", final, want)
		}
	}
	if m.Len() != 0 {
		t.Errorf("%d approvals left", m.Len())
	}
}

// get_skill returns the skill the demo model picked from the skills block,
// and the final answer quotes it.
func TestDemoSkillRead(t *testing.T) {
	leaktest.Check(t)
	set := loadSkills(t)
	tools, err := agent.NewToolRegistry(set.Tool())
	if err != nil {
		t.Fatal(err)
	}
	cfg := demoConfig(tools)
	cfg.Layers = append(cfg.Layers, set.Layer())
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	final := finalText(run(t, a, "use the pdf skill", nil, nil))
	if !strings.Contains(final, "get_skill:") || !strings.Contains(final, "Open the PDF, then read it page by page.") {
		t.Errorf("final answer %q", final)
	}
	// Only haiku enabled: the model reads that one.
	ctx := skills.WithEnabled(context.Background(), "haiku")
	var b strings.Builder
	for c, err := range a.Run(ctx, agent.Input{Message: "use a skill"}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			b.WriteString(c.Tool.Result)
		}
	}
	if !strings.Contains(b.String(), "Five, seven, five") {
		t.Errorf("get_skill returned %q", b.String())
	}
}
