package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/hooks"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
)

// newModelHarness starts a Server on the model of o (BaseURL, HTTPClient,
// Model), with the demo tools unless o.Tools is set. Call leaktest.Check
// before it.
func newModelHarness(t *testing.T, o Options) *harness {
	t.Helper()
	if o.Tools == nil {
		o.Tools = demo.Tools()
	}
	srv, err := NewServer(o)
	require.NoError(t, err)
	h := &harness{srv: srv, ts: httptest.NewServer(srv), token: o.Token} // 127.0.0.1
	t.Cleanup(h.close)
	h.client = h.newBrowser(t)
	return h
}

// onModel returns o set to talk to the scripted model.
func onModel(model *agenttest.Server, o Options) Options {
	o.BaseURL, o.HTTPClient, o.Model = model.URL(), model.Client(), "m"
	return o
}

// recordingDemo is the demo model, in process, keeping the requests it
// answered.
type recordingDemo struct {
	mu   sync.Mutex
	reqs []*agenttest.Request
}

// options returns o set to talk to the recording demo model.
func (d *recordingDemo) options(o Options) Options {
	o.BaseURL, o.Model = demo.BaseURL, demo.ModelName
	o.HTTPClient = &http.Client{Transport: agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		d.mu.Lock()
		d.reqs = append(d.reqs, req)
		d.mu.Unlock()
		return demo.Model{}.Respond(req)
	})}
	return o
}

// since returns the requests after the first n.
func (d *recordingDemo) since(n int) []*agenttest.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*agenttest.Request(nil), d.reqs[n:]...)
}

func (d *recordingDemo) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

// testSkills is a folder of two skills.
func testSkills(t *testing.T) *skills.Set {
	t.Helper()
	set, err := skills.Load(fstest.MapFS{
		"forecasts/SKILL.md": {Data: []byte("---\nname: forecaster\ndescription: Reads weather forecasts like a radio host.\n---\n# Forecasts\nSpeak of the sky first.\n")},
		"poems/SKILL.md":     {Data: []byte("---\nname: poet\ndescription: Answers in short rhyming verse.\nlicense: MIT\n---\nRhyme every second line.\n")},
	})
	require.NoError(t, err)
	require.Len(t, set.Skills(), 2)
	return set
}

// skillsBlock returns the request's system message that lists skills, or
// "" when it has none.
func skillsBlock(req *agenttest.Request) string {
	for _, m := range req.Messages {
		if m.Role == "system" && strings.HasPrefix(m.Content, skills.Intro) {
			return m.Content
		}
	}
	return ""
}

// TestSkills: GET /api/skills lists the loaded skills; a chat message
// enables exactly the skills it names (all of them when it names none),
// as the requests recorded show, and a name the server does not have is
// refused; get_skill is offered.
func TestSkills(t *testing.T) {
	leaktest.Check(t)
	model := &recordingDemo{}
	h := newModelHarness(t, model.options(Options{Skills: testSkills(t), SystemPrompt: "You are a test."}))
	status, body := getAs(t, h.client, h.ts.URL+"/api/skills")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `[{"name":"forecaster","description":"Reads weather forecasts like a radio host."},
		{"name":"poet","description":"Answers in short rhyming verse."}]`, body)

	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	turn := func(body string) []*agenttest.Request {
		t.Helper()
		n := model.count()
		status, out := h.post(t, "/api/chat", body)
		require.Equal(t, http.StatusAccepted, status, "%v", out)
		done, _ := ev.runDone(t)
		require.Equal(t, "finished", done.Status)
		reqs := model.since(n)
		require.NotEmpty(t, reqs)
		return reqs
	}
	for _, tc := range []struct {
		name       string
		skills     string // the JSON of "skills", or "" for none
		want, dont []string
	}{
		{"one", `["poet"]`, []string{"- poet: Answers in short rhyming verse."}, []string{"forecaster"}},
		{"both", `["poet","forecaster"]`, []string{"- poet:", "- forecaster: Reads weather"}, nil},
		{"none", `[]`, nil, nil},
		{"absent: all", ``, []string{"- poet:", "- forecaster:"}, nil},
	} {
		msg := `{"session_id":"` + session + `","message":"Hello!"`
		if tc.skills != "" {
			msg += `,"skills":` + tc.skills
		}
		for _, req := range turn(msg + `}`) {
			block := skillsBlock(req)
			if tc.want == nil {
				assert.Empty(t, block, "%s: no skills block", tc.name)
				continue
			}
			require.NotEmpty(t, block, "%s: a skills block", tc.name)
			assert.Equal(t, "You are a test.", req.Messages[0].Content)
			assert.Equal(t, block, req.Messages[1].Content, "%s: right after the system prompt", tc.name)
			for _, w := range tc.want {
				assert.Contains(t, block, w, tc.name)
			}
			for _, d := range tc.dont {
				assert.NotContains(t, block, d, tc.name)
			}
		}
	}
	// A tool round: get_skill is offered; the weather call waits for
	// approval until the interrupt below.
	n := model.count()
	status, out := h.post(t, "/api/chat", `{"session_id":"`+session+`","message":"What's the weather in Paris?","skills":["poet"]}`)
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	var offered bool
	for _, req := range model.since(n) {
		offered = offered || req.HasTool(skills.ToolName)
	}
	assert.True(t, offered, "get_skill is offered in the tool loop")

	n = model.count()
	for _, body := range []string{
		`{"session_id":"` + session + `","message":"hi","skills":["poet","nope"]}`,
		`{"session_id":"` + session + `","message":"hi","skills":["../poet"]}`,
	} {
		status, out := h.post(t, "/api/chat", body)
		assert.Equal(t, http.StatusBadRequest, status, body)
		assert.Contains(t, out["error"], "unknown skill", body)
	}
	assert.Equal(t, n, model.count(), "a refused message reaches no model")
	h.post(t, "/api/interrupt", `{"session_id":"`+session+`"}`)
	ev.runDone(t)
}

// TestSkillsWithoutASet: a server without skills lists none and refuses a
// message that names one; an empty list is fine.
func TestSkillsWithoutASet(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	_, body := getAs(t, h.client, h.ts.URL+"/api/skills")
	assert.JSONEq(t, `[]`, body)
	session := h.newSession(t)
	status, out := h.post(t, "/api/chat", `{"session_id":"`+session+`","message":"hi","skills":["poet"]}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, out["error"], "this server has no skills")
	ev, _ := h.openEvents(t, session)
	status, out = h.post(t, "/api/chat", `{"session_id":"`+session+`","message":"hi","skills":[]}`)
	assert.Equal(t, http.StatusAccepted, status, "%v", out)
	done, _ := ev.runDone(t)
	assert.Equal(t, "finished", done.Status)
}

// tripForm is the arguments of an ask_user_question call with a question
// of each kind.
const tripForm = `{"title":"Your trip","questions":[
	{"id":"when","question":"When do you leave?","kind":"text"},
	{"id":"seat","question":"Window or aisle?","kind":"single","options":["window","aisle"]},
	{"id":"meals","question":"Which meals?","kind":"multiple","options":["veg","fish","cake"]}]}`

// untilForm reads events until a form_request side chunk and returns it.
func (ev *events) untilForm(t *testing.T) (agent.Chunk, interact.FormRequest) {
	t.Helper()
	seen := ev.until(t, func(e sseEvent) bool {
		if e.name != "" {
			require.NotEqual(t, "run_done", e.name, "the run ended before a form: %s", e.data)
			return false
		}
		return e.chunk(t).Kind == agent.KindSide && strings.Contains(e.data, `"form_request"`)
	})
	c := seen[len(seen)-1].chunk(t)
	var side struct {
		Side interact.FormRequest `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen[len(seen)-1].data), &side))
	return c, side.Side
}

// TestFormAnswer: an ask_user_question form over the event stream,
// answered through POST /api/form-answer: refused for another browser
// (401, 403), for answers that do not fit (400, the form stays open);
// the owner's answer reaches the model; a second answer and an unknown
// form are stale (success:false).
func TestFormAnswer(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask_user_question", tripForm})
	h := newModelHarness(t, onModel(model, Options{}))
	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "Plan my trip")
	c, form := ev.untilForm(t)
	assert.Equal(t, "ask_user_question", c.Tool.Name)
	assert.Equal(t, "Your trip", form.Title)
	require.Len(t, form.Questions, 3)
	assert.Len(t, form.FormID, 32)

	answer := func(client *http.Client, session string, answers any) (int, map[string]any) {
		t.Helper()
		return postAs(t, client, h.ts.URL, "/api/form-answer", mustString(map[string]any{"session_id": session, "form_id": form.FormID, "answers": answers}))
	}
	good := map[string]any{"when": "Friday <b>night</b>", "seat": "aisle", "meals": []string{"veg", "cake"}}

	// Others.
	other := h.newBrowser(t)
	status, out := answer(h.newClient(t), session, good)
	assert.Equal(t, http.StatusUnauthorized, status, "no owner cookie: %v", out)
	status, out = answer(other, session, good)
	assert.Equal(t, http.StatusForbidden, status, "another browser: %v", out)
	status, out = answer(other, postSession(t, other, h.ts.URL), good)
	assert.Equal(t, http.StatusForbidden, status, "another browser's own session: %v", out)
	assert.Equal(t, false, out["success"])

	// Answers that do not fit: the form stays open.
	for _, bad := range []map[string]any{
		{"when": "Friday", "meals": []string{}},                                // no seat
		{"when": "Friday", "seat": "middle", "meals": []string{}},              // not an option
		{"when": "Friday", "seat": "aisle", "meals": []string{"veg", "beef"}},  // not an option
		{"when": "Friday", "seat": "aisle", "meals": []string{}, "extra": "x"}, // unknown id
	} {
		status, out = answer(h.client, session, bad)
		assert.Equal(t, http.StatusBadRequest, status, "%v: %v", bad, out)
		assert.NotEmpty(t, out["error"])
	}
	assert.Equal(t, 1, waiting(t, h.srv, true), "the form is still open")

	status, out = answer(h.client, session, good)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, true, out["success"], "%v", out)
	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.JSONEq(t, `{"answers":[{"id":"when","question":"When do you leave?","answer":"Friday <b>night</b>"},
		{"id":"seat","question":"Window or aisle?","answer":"aisle"},
		{"id":"meals","question":"Which meals?","answer":["veg","cake"]}]}`, result)
	reqs := model.Requests()
	tool, ok := reqs[len(reqs)-1].LastMessageWithRole("tool")
	require.True(t, ok)
	assert.Equal(t, result, tool.Content, "the model receives the answers")

	// Stale: answered already, or never known.
	status, out = answer(h.client, session, good)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, out["success"], "answered already: %v", out)
	status, out = postAs(t, h.client, h.ts.URL, "/api/form-answer", mustString(map[string]any{"session_id": session, "form_id": strings.Repeat("ab", 16), "answers": good}))
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, out["success"], "unknown form: %v", out)
	assert.Equal(t, 0, waiting(t, h.srv, true))
}

// TestFormsOnReconnectAndInterrupt: a page that opens the event stream while
// a form waits gets it again, after its call's executing chunk; an
// interrupt ends the form, and the call.
func TestFormsOnReconnectAndInterrupt(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask_user_question", tripForm})
	h := newModelHarness(t, onModel(model, Options{}))
	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "Plan my trip")
	first, form := ev.untilForm(t)

	again, hello := h.openEvents(t, session)
	assert.Equal(t, true, hello["busy"])
	exec := again.next(t).chunk(t)
	assert.Equal(t, agent.KindToolCall, exec.Kind)
	assert.Equal(t, agent.StateExecuting, exec.Tool.State)
	assert.Equal(t, first.Tool.ID, exec.Tool.ID)
	side := again.next(t)
	c := side.chunk(t)
	assert.Equal(t, agent.KindSide, c.Kind)
	assert.Equal(t, first.Tool.ID, c.Tool.ID)
	assert.Contains(t, side.data, `"form_id":"`+form.FormID+`"`)
	assert.Contains(t, side.data, `"kind":"multiple"`)

	status, out := h.post(t, "/api/interrupt", `{"session_id":"`+session+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	done, chunks := ev.runDone(t)
	assert.Equal(t, "interrupted", done.Status)
	assert.Contains(t, summary(chunks), "rejected ask_user_question: tool call interrupted")
	again.runDone(t)
	assert.Equal(t, 0, waiting(t, h.srv, true))
	status, out = h.post(t, "/api/form-answer", mustString(map[string]any{"session_id": session, "form_id": form.FormID, "answers": map[string]any{"when": "now", "seat": "aisle", "meals": []string{}}}))
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, out["success"], "the form ended with the run: %v", out)
}

// TestShowCardSideMessage: show_card is offered even without the demo
// tools, and its card comes as a side chunk after the call's executing
// chunk.
func TestShowCardSideMessage(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"show_card", `{"title":"Paris","body":"Sunny.","fields":[{"name":"High","value":"24 °C"}]}`})
	h := newModelHarness(t, onModel(model, Options{Tools: []agent.Tool{demo.GetTime()}}))
	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "A card please")
	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status)
	assert.Equal(t, []string{"text", "round_end", "text", "start show_card", "executing show_card", "side", "result show_card", "round_end", "text", "round_end"}, summary(chunks))
	for _, c := range chunks {
		if c.Kind == agent.KindSide {
			assert.JSONEq(t, mustString(interact.Card{Type: "card", Title: "Paris", Body: "Sunny.", Fields: []interact.Field{{Name: "High", Value: "24 °C"}}}), mustString(c.Side))
		}
	}
	assert.True(t, model.Requests()[1].HasTool("ask_user_question"))
}

// TestHookMessagesAreNotShown: persistent hook messages (here from a hooks
// folder, as -hooks loads them) are stored with the conversation and sent
// to the model, but GET /api/history never shows them.
func TestHookMessagesAreNotShown(t *testing.T) {
	leaktest.Check(t)
	hs, err := hooks.Load(fstest.MapFS{
		"hooks.json": {Data: []byte(`{"hooks":[
			{"name":"rules","at":"before_planning","persistent":true,"file":"rules.md"},
			{"at":"before_final_answer","role":"user","persistent":true,"text":"HOOK: answer politely."}]}`)},
		"rules.md": {Data: []byte("HOOK: house rules apply.")},
	})
	require.NoError(t, err)
	model := &recordingDemo{}
	h := newModelHarness(t, model.options(Options{Hooks: hs}))
	session := h.newSession(t)
	h.converse(t, session, "Hello!")
	h.converse(t, session, "Hello again!")

	stored, err := h.srv.store.Messages(t.Context(), session, true)
	require.NoError(t, err)
	var hooked int
	for _, m := range stored {
		if strings.Contains(m.Content, "HOOK:") {
			assert.True(t, m.Hook, "%q is flagged", m.Content)
			hooked++
		}
	}
	assert.GreaterOrEqual(t, hooked, 2, "persistent hook messages are stored")
	var sent bool
	for _, m := range model.since(model.count() - 1)[0].Messages {
		sent = sent || strings.Contains(m.Content, "HOOK: house rules apply.")
	}
	assert.True(t, sent, "later turns send them to the model")

	status, body := getAs(t, h.client, h.ts.URL+"/api/history?session_id="+session)
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, "HOOK")
	var hist []historyEntry
	require.NoError(t, json.Unmarshal([]byte(body), &hist))
	assert.Len(t, hist, len(stored)-hooked)
	for _, e := range hist {
		assert.False(t, e.Hook)
	}
}

// TestMainLoadsSkillsAndHooks: -skills and -hooks load their folders; a
// folder that cannot be loaded stops the start with a message that names
// the flag.
func TestMainLoadsSkillsAndHooks(t *testing.T) {
	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	skillsDir, hooksDir := filepath.Join(dir, "skills"), filepath.Join(dir, "hooks")
	require.NoError(t, os.MkdirAll(filepath.Join(skillsDir, "poems"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(skillsDir, "poems", "SKILL.md"), []byte("---\nname: poet\ndescription: Rhymes.\n---\nRhyme.\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(skillsDir, "broken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(skillsDir, "broken", "SKILL.md"), []byte("no front matter"), 0o644))
	require.NoError(t, os.MkdirAll(hooksDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hooksDir, "hooks.json"), []byte(`{"hooks":[{"at":"before_planning","text":"Be brief."}]}`), 0o644))

	var stdout, stderr strings.Builder
	assert.Equal(t, 1, run(t.Context(), []string{"-addr", "127.0.0.1:0", "-hooks", skillsDir}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-hooks "+skillsDir)
	stderr.Reset()
	assert.Equal(t, 1, run(t.Context(), []string{"-addr", "127.0.0.1:0", "-skills", filepath.Join(dir, "none")}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-skills ")

	p := startProgram(t, "-skills", skillsDir, "-hooks", hooksDir)
	base := p.URL
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	code, body := getAs(t, client, base+"api/skills")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[{"name":"poet","description":"Rhymes."}]`, body)
	assert.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())
	assert.Contains(t, p.stderr.String(), "1 skills from "+skillsDir+" (1 skipped)")
	assert.Contains(t, p.stderr.String(), "broken", "the skipped skill is logged")
}

// researchModel is a scripted model for a host that has the researcher
// sub-agent: the host plans a tool round and asks the researcher about
// the weather in Oslo; the researcher calls get_weather, and each answers
// with what it got.
func researchModel(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		last := req.LastMessage()
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("I will ask the researcher. <need_tool>").Finish("stop")
		case req.HasTool(demo.ResearcherName) && last.Role == "tool":
			return agenttest.Reply().Text("The researcher says: " + last.Content).Finish("stop")
		case req.HasTool(demo.ResearcherName):
			return agenttest.Reply().Text("Asking.").Call(0, "call_r", demo.ResearcherName, `{"task":"What is the weather in Oslo?"}`).Finish("tool_calls")
		case last.Role == "tool":
			return agenttest.Reply().Text("Found it: ", last.Content).Finish("stop")
		default:
			return agenttest.Reply().Text("Looking it up.").Call(0, "call_w", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls")
		}
	})
	return srv
}

// TestResearcherSubAgent: the researcher's chunks reach the page marked
// (agent, depth, parent) between its call's executing chunk and its result;
// its get_weather call's approval, nested, is drawn again for a
// reconnecting page with its marks, answered with the host's session id,
// and the researcher's answer is the call's result. It offers only its
// tools, and a run it is part of is no different for the page's run_done.
func TestResearcherSubAgent(t *testing.T) {
	leaktest.Check(t)
	model := researchModel(t)
	h := newModelHarness(t, onModel(model, Options{Researcher: true}))
	session := h.newSession(t)
	ev, _ := h.openEvents(t, session)
	h.chat(t, session, "Weather in Oslo, via the researcher")
	call, seen := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	assert.Equal(t, "get_weather", call.Name)
	last := seen[len(seen)-1].chunk(t)
	assert.Equal(t, demo.ResearcherName, last.Agent)
	assert.Equal(t, 1, last.Depth)
	assert.Equal(t, "call_r", last.Parent)

	// A page that reconnects now draws the approval where it was.
	again, _ := h.openEvents(t, session)
	replay := again.next(t).chunk(t)
	assert.Equal(t, agent.StateApprovalRequired, replay.Tool.State)
	assert.Equal(t, call.ApprovalID, replay.Tool.ApprovalID)
	assert.Equal(t, demo.ResearcherName, replay.Agent)
	assert.Equal(t, 1, replay.Depth)
	assert.Equal(t, "call_r", replay.Parent)
	again.close()

	h.decide(t, session, call, true)
	done, chunks := ev.runDone(t)
	require.Equal(t, "finished", done.Status)
	var trace []string
	for _, c := range append(chunksOf(t, seen), chunks...) {
		if c.Depth > 0 {
			require.Equal(t, demo.ResearcherName, c.Agent)
			require.Equal(t, "call_r", c.Parent)
		}
		if c.Kind == agent.KindToolCall && c.Tool.State != agent.StateStart {
			trace = append(trace, strings.Repeat("  ", c.Depth)+string(c.Tool.State)+" "+c.Tool.Name)
		}
	}
	assert.Equal(t, []string{
		"executing researcher",
		"  approval_required get_weather",
		"  executing get_weather",
		"  result get_weather",
		"result researcher",
	}, trace)
	assert.Contains(t, texts(chunks), "The researcher says: Found it: Oslo")

	var nested *agenttest.Request
	for _, req := range model.Requests() {
		if req.HasTools() && !req.HasTool(demo.ResearcherName) {
			nested = req
		}
	}
	require.NotNil(t, nested, "the researcher asked the model")
	assert.Equal(t, []string{"get_weather", "get_time"}, nested.ToolNames(), "its tools only")
	assert.Equal(t, "system", nested.Messages[0].Role, "a system prompt of its own")
	for _, m := range nested.Messages {
		assert.NotContains(t, m.Content, "via the researcher", "not the user's conversation")
	}
	assert.Equal(t, 0, waiting(t, h.srv, false))
	h.srv.mu.Lock()
	assert.Nil(t, h.srv.live[session], "the marks end with the run")
	h.srv.mu.Unlock()
}

func chunksOf(t *testing.T, seen []sseEvent) []agent.Chunk {
	t.Helper()
	var out []agent.Chunk
	for _, e := range seen {
		if e.name == "" {
			out = append(out, e.chunk(t))
		}
	}
	return out
}

// FuzzChatSkills: whatever a chat message's "skills" holds, the run starts
// only when it is absent, null or a list of the server's skill names, and is
// refused with a 400 and a JSON error otherwise; nothing panics.
func FuzzChatSkills(f *testing.F) {
	set, err := skills.Load(fstest.MapFS{
		"poems/SKILL.md": {Data: []byte("---\nname: poet\ndescription: Rhymes.\n---\nRhyme.\n")},
	})
	if err != nil {
		f.Fatal(err)
	}
	quiet := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("Fine.").Finish("stop")
	})
	srv, err := NewServer(Options{Model: "m", BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{Transport: quiet}, Skills: set})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	for _, seed := range []string{`["poet"]`, `[]`, `null`, `["poet","poet"]`, `["../poet"]`, `"poet"`, `[1]`, `{"poet":true}`, `["POET"]`, `["poet\u0000"]`} {
		f.Add(seed)
	}
	const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	owner := httptest.NewRequest(http.MethodGet, "/", nil)
	owner.AddCookie(&http.Cookie{Name: ownerCookie, Value: secret})
	tag, _ := ownerTag(owner)
	session := newSessionID(tag)
	f.Fuzz(func(t *testing.T, skillsJSON string) {
		body := `{"session_id":"` + session + `","message":"hi","skills":` + skillsJSON + `}`
		req := httptest.NewRequest(http.MethodPost, "/api/chat", strings.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: ownerCookie, Value: secret})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var out apiResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d: the answer is not JSON: %q", rec.Code, rec.Body.String())
		}
		// What the server should have read (the fuzzer may add keys).
		var sent chatRequest
		valid := json.Unmarshal([]byte(body), &sent) == nil && strings.TrimSpace(sent.Message) != ""
		for _, n := range sent.Skills {
			if _, ok := set.Lookup(n); !ok {
				valid = false
			}
		}
		switch rec.Code {
		case http.StatusForbidden, http.StatusUnauthorized:
			if sent.SessionID == session {
				t.Fatalf("skills %s: status %d for the owner's session", skillsJSON, rec.Code)
			}
		case http.StatusAccepted:
			if !valid {
				t.Fatalf("a run started with skills %s", skillsJSON)
			}
			deadline := time.Now().Add(waitLimit)
			for srv.busy(sent.SessionID) {
				if time.Now().After(deadline) {
					t.Fatal("the run did not end")
				}
				time.Sleep(time.Millisecond)
			}
		case http.StatusBadRequest:
			if valid && sent.SessionID == session || out.Success || out.Error == "" {
				t.Fatalf("skills %s: refused (%+v)", skillsJSON, out)
			}
		default:
			t.Fatalf("skills %s: status %d: %+v", skillsJSON, rec.Code, out)
		}
	})
}
