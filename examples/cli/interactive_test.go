package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
)

const (
	formPrompt     = "ask me a few questions"
	researchPrompt = "research the weather in Oslo and the time in Tokyo"
)

// demoServer is an agenttest server answered by the demo model, so that a
// test reads the requests the CLI sent; modelArgs point the CLI at it.
func demoServer(t *testing.T) (*agenttest.Server, []string) {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Respond(demo.Model{}.Respond)
	return srv, []string{"-base-url", srv.URL(), "-model", "m", "-retries", "0"}
}

// sideOf returns the side chunks of chunks whose side message has the type
// typ, decoded from the JSON log.
func sideOf(chunks []agent.Chunk, typ string) []map[string]any {
	var out []map[string]any
	for _, c := range chunks {
		if m, ok := c.Side.(map[string]any); ok && c.Kind == agent.KindSide && m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// toolResults returns the results of the calls of tool name in the
// requests srv recorded: the tool messages that answer its calls.
func toolResults(srv *agenttest.Server, name string) []string {
	var out []string
	seen := map[string]bool{}
	for _, req := range srv.Requests() {
		ids := map[string]bool{}
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if c.Name == name {
					ids[c.ID] = true
				}
			}
			if m.Role == "tool" && ids[m.ToolCallID] && !seen[m.ToolCallID] {
				seen[m.ToolCallID] = true
				out = append(out, m.Content)
			}
		}
	}
	return out
}

func TestFormAnsweredOnTerminalReachesModel(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv, model := demoServer(t)
	// A choice by number, two by numbers with a comma and a space, a line
	// of text.
	r := runCLI(t, "3\n1, 3\nsee you soon\n", append(model, "-json", formPrompt)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	chunks := parseChunks(t, r.stdout)
	forms := sideOf(chunks, "form_request")
	require.Len(t, forms, 1, "the -json log holds the form_request chunk")
	assert.Equal(t, "A few questions", forms[0]["title"])
	assert.NotEmpty(t, forms[0]["form_id"])

	results := toolResults(srv, "ask_user_question")
	require.Len(t, results, 1)
	var got struct {
		Answers []struct {
			ID     string `json:"id"`
			Answer any    `json:"answer"`
		} `json:"answers"`
	}
	require.NoError(t, json.Unmarshal([]byte(results[0]), &got), "result %q", results[0])
	want := map[string]any{"colour": "blue", "days": []any{"Monday", "Friday"}, "note": "see you soon"}
	require.Len(t, got.Answers, 3)
	for _, a := range got.Answers {
		assert.Equal(t, want[a.ID], a.Answer, "answer %s", a.ID)
	}
	assert.Contains(t, roundText(chunks, 2), `"answer":"blue"`, "the model's final answer quotes the answers")

	// The questions were asked on stderr, each with its options.
	for _, s := range []string{
		"Form: A few questions (3 questions; Ctrl-D cancels it)\n",
		"(1/3) Which colour do you like best?\n  1. red\n  2. green\n  3. blue\nchoose one [1-3]: ",
		"(2/3) Which days suit you?\n", "choose any, numbers separated by commas [1-3], empty for none: ",
		"(3/3) Anything else you would like to tell me?\nanswer: ",
	} {
		assert.Contains(t, r.stderr, s)
	}
}

func TestFormBadAnswersAreAskedAgain(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv, model := demoServer(t)
	// 9 and "pink" are no option, then "Green" by its text; "2,7" holds a
	// bad number, then an empty line chooses none; an empty text answer.
	r := runCLI(t, "9\npink\nGreen\n2,7\n\n\n", append(model, formPrompt)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, `  "9" is not one of the options: give a number from 1 to 3`+"\n")
	assert.Contains(t, r.stderr, `  "pink" is not one of the options: give a number from 1 to 3`+"\n")
	assert.Contains(t, r.stderr, `  "7" is not an option: give numbers from 1 to 3, separated by commas`+"\n")
	assert.Equal(t, 3, strings.Count(r.stderr, "choose one [1-3]: "), "asked until the answer fits")
	results := toolResults(srv, "ask_user_question")
	require.Len(t, results, 1)
	assert.Contains(t, results[0], `"answer":"green"`)
	assert.Contains(t, results[0], `"answer":[]`)
	assert.Contains(t, results[0], `"answer":""`)
	assert.Contains(t, r.stdout, "  ◆ form “A few questions” (3 questions): answer below\n")
}

func TestFormCancelledWhenInputEnds(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv, model := demoServer(t)
	r := runCLI(t, "2\n", append(model, "-json", formPrompt)...)
	assert.Equal(t, 1, r.code, "the form was not answered; stderr: %s", r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncli: the form was not answered: the input ended before its questions were answered (answer them on stdin)\n"), "stderr: %q", r.stderr)
	results := toolResults(srv, "ask_user_question")
	require.Len(t, results, 1, "the call returned, and the model read why")
	assert.Contains(t, results[0], "cancelled")
	tr := trace(parseChunks(t, r.stdout))
	assert.Equal(t, "round_end:2", tr[len(tr)-1], "the run went on to its final answer: %v", tr)
}

func TestCardDrawn(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", "show me a card about cats")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "  … executing\n"+
		"  ┌──────────────────────────────────────┐\n"+
		"  │ cats                                 │\n"+
		"  ├──────────────────────────────────────┤\n"+
		"  │ You asked: show me a card about cats │\n"+
		"  └──────────────────────────────────────┘\n"+
		"  ✓ result: ")
	j := runCLI(t, "", "-json", "show me a card about cats")
	require.Equal(t, 0, j.code, "stderr: %s", j.stderr)
	cards := sideOf(parseChunks(t, j.stdout), "card")
	require.Len(t, cards, 1)
	assert.Equal(t, map[string]any{"type": "card", "title": "cats", "body": "You asked: show me a card about cats"}, cards[0])
}

// writeFiles writes files (path → content) under a new temporary folder.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	return dir
}

// systemText is the text of the system messages of req.
func systemText(req *agenttest.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "system" {
			b.WriteString(m.Content + "\n")
		}
	}
	return b.String()
}

func TestSkillsEnabledChangeTheRequest(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	dir := writeFiles(t, map[string]string{
		"pdf/SKILL.md":    "---\nname: pdf\ndescription: Read PDF files.\n---\nOpen the PDF, then read it page by page.\n",
		"haiku/SKILL.md":  "---\nname: haiku\ndescription: Write haiku.\n---\nFive, seven, five.\n",
		"broken/SKILL.md": "---\nname: [oops\n---\n",
	})
	for _, tc := range []struct {
		name   string
		args   []string
		listed []string
		absent []string
	}{
		{"no -skills", nil, nil, []string{"- pdf:", "- haiku:"}},
		{"all enabled", []string{"-skills", dir}, []string{"- haiku: Write haiku.", "- pdf: Read PDF files."}, nil},
		{"one enabled", []string{"-skills", dir, "-enable-skill", "pdf"}, []string{"- pdf: Read PDF files."}, []string{"- haiku:"}},
		{"two enabled", []string{"-skills", dir, "-enable-skill", "pdf", "-enable-skill", "haiku"}, []string{"- haiku:", "- pdf:"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, model := demoServer(t)
			r := runCLI(t, "", append(append(model, tc.args...), "-json", "use the pdf skill")...)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			reqs := srv.Requests()
			require.NotEmpty(t, reqs)
			for _, req := range reqs {
				sys := systemText(req)
				assert.Equal(t, tc.listed != nil, strings.Contains(sys, skills.Intro), "skills block: %q", sys)
				for _, s := range tc.listed {
					assert.Contains(t, sys, s)
				}
				for _, s := range tc.absent {
					assert.NotContains(t, sys, s)
				}
			}
			if tc.listed == nil {
				assert.False(t, reqs[1].HasTool(skills.ToolName), "no get_skill without -skills")
				return
			}
			assert.Contains(t, r.stderr, "cli: -skills: broken left out: ", "a malformed skill is said, the others load")
			assert.True(t, reqs[1].HasTool(skills.ToolName))
			results := toolResults(srv, skills.ToolName)
			require.Len(t, results, 1)
			assert.Contains(t, results[0], "Open the PDF, then read it page by page.", "get_skill returned the skill")
		})
	}

	t.Run("a disabled skill is not returned", func(t *testing.T) {
		srv, model := demoServer(t)
		r := runCLI(t, "", append(model, "-skills", dir, "-enable-skill", "haiku", "-json", "use the pdf skill")...)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		results := toolResults(srv, skills.ToolName)
		require.Len(t, results, 1)
		assert.Contains(t, results[0], "Five, seven, five.", "the demo model reads the skill listed: haiku")
	})
	t.Run("bad flags", func(t *testing.T) {
		r := runCLI(t, "", "-enable-skill", "pdf", "hi")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "cli: -enable-skill needs -skills")
		r = runCLI(t, "", "-skills", dir, "-enable-skill", "nope", "hi")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "cli: -enable-skill nope: no skill of that name in "+dir+" (found: haiku, pdf)")
		r = runCLI(t, "", "-skills", filepath.Join(dir, "missing"), "hi")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "cli: -skills ")
		assert.Empty(t, r.stdout)
	})
}

func TestHooksFromFolderReachTheRequest(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	dir := writeFiles(t, map[string]string{
		"hooks.json": `{"hooks": [
			{"name": "rules", "at": "before_planning", "file": "rules.md"},
			{"at": "after_tool_results", "role": "user", "text": "HOOK: say which tools you used."}
		]}`,
		"rules.md": "HOOK: answer like a pirate.\n",
	})
	srv, model := demoServer(t)
	r := runCLI(t, "", append(model, "-hooks", dir, "-yes", "-json", weatherPrompt)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	reqs := srv.Requests()
	require.Len(t, reqs, 3, "planning, tool round, final")
	has := func(req *agenttest.Request, role, text string) bool {
		for _, m := range req.Messages {
			if m.Role == role && strings.Contains(m.Content, text) {
				return true
			}
		}
		return false
	}
	assert.True(t, has(reqs[0], "system", "HOOK: answer like a pirate."), "before_planning in the planning request")
	assert.False(t, has(reqs[1], "system", "HOOK: answer like a pirate."), "a temporary injection is sent once")
	assert.True(t, has(reqs[2], "user", "HOOK: say which tools you used."), "after_tool_results in the request after the results")

	bad := writeFiles(t, map[string]string{"hooks.json": `{"hooks": [{"at": "whenever", "text": "x"}]}`})
	r = runCLI(t, "", "-hooks", bad, "hi")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cli: -hooks "+bad+": ")
	assert.Contains(t, r.stderr, "whenever")
	assert.Empty(t, r.stdout)
}

func TestSubAgentIndentedAndAskedOnTerminal(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "y\ny\n", researchPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	// The researcher's own call is not asked; its two calls are.
	assert.Equal(t, 2, strings.Count(r.stderr, "approve [y] / reject [n]"), "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "Tool call get_weather wants to run")
	assert.Contains(t, r.stderr, "Tool call get_time wants to run")
	for _, s := range []string{
		"⏺ researcher {\"task\":\"Find the weather in Oslo and the time in Asia/Tokyo.\"}\n  … executing\n",
		"  researcher │ ⏺ get_weather {\"city\":\"Oslo\"}\n  researcher │   … executing\n  researcher │   ✓ result: Oslo: ",
		"  researcher │ ⏺ get_time {\"timezone\":\"Asia/Tokyo\"}\n",
		"  researcher │ Here is what I found:\n  researcher │ - get_weather: Oslo: ",
		"  researcher │ That's everything you asked for.\n  ✓ result: Here is what I found:\n",
	} {
		assert.Contains(t, r.stdout, s)
	}

	// The JSON log keeps the chunks as they are: marked, not indented.
	j := runCLI(t, "y\ny\n", "-json", researchPrompt)
	require.Equal(t, 0, j.code, "stderr: %s", j.stderr)
	var nested []string
	for _, c := range parseChunks(t, j.stdout) {
		if c.Depth > 0 {
			assert.Equal(t, demo.ResearcherName, c.Agent)
			assert.Equal(t, 1, c.Depth)
			assert.NotEmpty(t, c.Parent)
			if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
				nested = append(nested, c.Tool.Name)
			}
		}
	}
	assert.Equal(t, []string{"get_weather", "get_time"}, nested, "the nested calls' approvals, marked")

	// Rejected at the terminal: the researcher's run ends, and says so;
	// the host's run goes on (its model reads why) and finishes.
	n := runCLI(t, "n not now\n", researchPrompt)
	require.Equal(t, exitOK, n.code, "stderr: %s", n.stderr)
	assert.Contains(t, n.stdout, "  researcher │   ✗ rejected by user: not now\n")
	assert.Contains(t, n.stdout, "  researcher │ ⏹ stopped: the tool call was rejected\n")
}

// Ctrl-C while a form is asked interrupts the run: the call is rejected as
// interrupted, and the CLI ends with exit status 130.
func TestBinaryCtrlCDuringForm(t *testing.T) {
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	p := startCLI(ctx, t, "-json", formPrompt)
	p.await(ctx, t, "form_request chunk", func(c agent.Chunk) bool { return c.Kind == agent.KindSide })
	for !strings.Contains(p.stderr.String(), "choose one [1-3]: ") {
		require.NoError(t, ctx.Err(), "no question; stderr: %s", p.stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	chunks, err := p.wait(t)
	require.NoError(t, ctx.Err(), "the CLI did not end after Ctrl-C; stderr: %s", p.stderr.String())
	requireExit(t, exitInterrupted, err, p)
	tr := trace(chunks)
	require.GreaterOrEqual(t, len(tr), 2)
	assert.Equal(t, []string{"rejected:ask_user_question:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	assert.NotContains(t, p.stderr.String(), "the form was not answered", "an interrupt is not the end of the input")
}
