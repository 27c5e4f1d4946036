package aisdk

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// result is what conformance.mjs prints for one scenario.
type result struct {
	Scenario string          `json:"scenario"`
	ID       string          `json:"id"`
	OK       bool            `json:"ok"`
	Error    string          `json:"error"`
	Problems []string        `json:"problems"`
	Trace    []string        `json:"trace"`
	Text     string          `json:"text"`
	Metadata json.RawMessage `json:"metadata"`
	Parts    []resultPart    `json:"parts"`
	// Other is the text of the first tab's message (second-tab).
	Other string `json:"other"`
	// Loaded and Reloaded are the roles of the messages loaded at each
	// reload, History the messages at the end (reload).
	Loaded   string `json:"loaded"`
	Reloaded string `json:"reloaded"`
	History  []struct {
		Role  string       `json:"role"`
		Parts []resultPart `json:"parts"`
	} `json:"history"`
}

// resultPart is a part of the scenario's last assistant message.
type resultPart struct {
	Type       string          `json:"type"`
	State      string          `json:"state"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	Data       json.RawMessage `json:"data"`
	Text       string          `json:"text"`
	Meta       json.RawMessage `json:"toolMetadata"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// serve starts the handler of b on 127.0.0.1: at /api/chat, and with
// KeepRunningOnDisconnect at /keep/api/chat. mangle, when set, is the
// Writers' mangle.
func serve(t *testing.T, b *uitest.Bench, mangle func(string) int) string {
	t.Helper()
	mux := http.NewServeMux()
	for _, prefix := range []string{"", "/keep"} {
		h, err := NewHandler(ui.Config{
			Runner:                  b.Runner,
			Authorize:               ui.AllowAnyCaller,
			KeepRunningOnDisconnect: prefix != "",
		})
		require.NoError(t, err)
		h.mangle = mangle
		mux.Handle(prefix+"/api/chat", h)
		mux.Handle(prefix+"/api/chat/", h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// conformance runs the scenarios with the ai package's client.
func conformance(t *testing.T, url string, scenarios ...string) map[string]result {
	t.Helper()
	out := uitest.Node(t, 2*time.Minute, "testdata/conformance.mjs", append([]string{url}, scenarios...)...)
	results := map[string]result{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r result
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		results[r.Scenario] = r
	}
	require.Len(t, results, len(scenarios), out)
	return results
}

// ended returns how the session's last turn ended, once it has.
func ended(t *testing.T, r *runner.Runner, session string) runner.TurnEnded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last runner.TurnEnded
	for e, err := range r.Subscribe(ctx, session, 0) {
		require.NoError(t, err)
		if e.Kind == runner.EventTurnEnded {
			last = *e.Ended
			state, err := r.Log(ctx, session)
			require.NoError(t, err)
			if !state.Running() && state.Last == e.Seq {
				return last
			}
		}
	}
	t.Fatalf("session %s: no ended turn", session)
	return last
}

func part(r result, typ string) int {
	return slices.IndexFunc(r.Parts, func(p resultPart) bool { return p.Type == typ })
}

func TestConformance(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	url := serve(t, b, nil)
	all := []string{"text", "approve", "reject", "two", "interrupt", "stop", "form", "card", "subagent", "reconnect"}
	results := conformance(t, url, all...)
	for _, name := range all {
		r := results[name]
		require.Truef(t, r.OK, "%s: %s %v\ntrace %v", name, r.Error, r.Problems, r.Trace)
	}

	text := results["text"]
	// The planning round, then the continuation round (the script says
	// the same): a step each, a text part each.
	require.Equal(t, "Hello there! |Hello there! ", text.Text)
	round := []string{"start-step", "text-start", "text-delta", "text-delta", "text-end", "data-planround-round", "finish-step"}
	require.Equal(t, slices.Concat([]string{"start"}, round, round, []string{"finish", "[DONE]"}), text.Trace)
	require.Contains(t, string(text.Metadata), `"status":"finished"`)
	require.Contains(t, string(text.Metadata), `"total_tokens":26`)

	approve := results["approve"]
	require.Contains(t, approve.Text, "Done: sunny in Lima")
	require.Contains(t, approve.Trace, "tool-approval-request")
	require.Contains(t, approve.Trace, "tool-output-available")
	require.EqualValues(t, 4, b.Runs.Load(), "get_weather ran once in approve, twice in two, once in subagent, never in reject")

	reject := results["reject"]
	require.NotEqual(t, -1, part(reject, "data-planround-rejection"), "the rejection's cause is a data part")
	require.Contains(t, reject.Trace, "tool-output-denied")
	require.Equal(t, runner.StatusRejected, ended(t, b.Runner, reject.ID).Status)

	require.Contains(t, results["two"].Text, "Done:")

	require.Equal(t, runner.StatusInterrupted, ended(t, b.Runner, results["interrupt"].ID).Status, "a client that goes away stops its turn")
	require.Equal(t, runner.StatusInterrupted, ended(t, b.Runner, results["stop"].ID).Status)

	form := results["form"]
	require.Contains(t, form.Text, "Quito")
	require.NotEqual(t, -1, part(form, "data-planround-form"))

	card := results["card"]
	require.NotEqual(t, -1, part(card, "data-planround-card"))

	sub := results["subagent"]
	require.Contains(t, sub.Text, "Done:")

	rec := results["reconnect"]
	require.Contains(t, rec.Text, "word0 ")
	require.Contains(t, rec.Text, "word39")
	require.Equal(t, runner.StatusFinished, ended(t, b.Runner, rec.ID).Status, "the turn kept running while no client followed it")
}

// TestConformanceCatchesBrokenStreams shows that the conformance checks
// are not blind: a stream with one chunk dropped, or two swapped, fails
// them.
func TestConformanceCatchesBrokenStreams(t *testing.T) {
	cases := []struct {
		name, scenario string
		mangle         func(string) int
	}{
		{"text-start dropped", "text", func(typ string) int {
			if typ == "text-start" {
				return mangleDrop
			}
			return mangleKeep
		}},
		{"tool-input-start dropped", "approve", func(typ string) int {
			if typ == "tool-input-start" {
				return mangleDrop
			}
			return mangleKeep
		}},
		{"text-start after its first delta", "text", func(typ string) int {
			if typ == "text-start" {
				return mangleHold
			}
			return mangleKeep
		}},
		{"tool-approval-request before its call's input", "approve", func(typ string) int {
			if typ == "tool-input-start" {
				return mangleHold
			}
			return mangleKeep
		}},
	}
	b := uitest.New(t, uitest.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := serve(t, b, c.mangle)
			r := conformance(t, url, c.scenario)[c.scenario]
			require.Falsef(t, r.OK, "the broken stream passed: trace %v", r.Trace)
			t.Logf("caught: %s %v", r.Error, r.Problems)
		})
	}
}

// TestConformanceStreamedArguments: with the agent's StreamToolArguments
// a call's part shows from its first fragment (tool-input-delta), and its
// approval goes through as without.
func TestConformanceStreamedArguments(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{StreamToolArguments: true})
	r := conformance(t, serve(t, b, nil), "approve")["approve"]
	require.Truef(t, r.OK, "%s %v\ntrace %v", r.Error, r.Problems, r.Trace)
	start, delta, approval := slices.Index(r.Trace, "tool-input-start"), slices.Index(r.Trace, "tool-input-delta"), slices.Index(r.Trace, "tool-approval-request")
	require.True(t, start >= 0 && start < delta && delta < approval, "trace %v", r.Trace)
	require.Contains(t, r.Text, "Done: sunny in Lima")
}

// TestConformanceNumbers: the ai package's client sends a call's input
// back through JSON.parse and JSON.stringify, which writes numbers its
// own way (2.50 as 2.5, 1e3 as 1000, a big integer rounded): approving
// and denying such a call works, and the call runs with the arguments as
// the model wrote them.
func TestConformanceNumbers(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	forms := []string{
		`{"price":2.50}`,
		`{"qty":20.0}`,
		`{"n":1e3}`,
		`{"z":-0}`,
		`{"big":12345678901234567890}`,
		`{"huge":1e400}`,
		`{"mixed":[1.10,-1E-7,{"n":0.5e1}],"big":-98765432109876543210.5}`,
	}
	var scenarios []string
	for _, f := range forms {
		scenarios = append(scenarios, "order="+f, "order-deny="+f)
	}
	results := conformance(t, serve(t, b, nil), scenarios...)
	for _, f := range forms {
		r := results["order="+f]
		require.Truef(t, r.OK, "approving %s: %s %v\ntrace %v", f, r.Error, r.Problems, r.Trace)
		require.Contains(t, r.Text, "Done: ordered "+f)
		d := results["order-deny="+f]
		require.Truef(t, d.OK, "denying %s: %s %v\ntrace %v", f, d.Error, d.Problems, d.Trace)
		e := ended(t, b.Runner, d.ID)
		require.Equal(t, runner.StatusRejected, e.Status, "denying %s", f)
		require.EqualValues(t, "user", e.Cause, "denying %s", f)
	}
	require.Equal(t, forms, b.Orders(), "each approved call ran once, with its arguments as written")
}

// TestConformanceSecondTab: two tabs of one chat are shown an approval;
// the first approves, and while its answer streams the second answers too
// (approving, or denying). The second tab's message ends as the first
// one's: one tool part, with the call's result and the decision taken,
// and the answer once.
func TestConformanceSecondTab(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	scenarios := []string{"second-tab", "second-tab-deny"}
	results := conformance(t, serve(t, b, nil), scenarios...)
	for _, name := range scenarios {
		r := results[name]
		require.Truef(t, r.OK, "%s: %s %v\ntrace %v", name, r.Error, r.Problems, r.Trace)
		require.Equal(t, r.Other, r.Text, "%s: the second tab's answer is the first one's", name)
		require.Equal(t, 1, strings.Count(r.Text, "word39"), "%s: the answer once", name)
		var tools []resultPart
		for _, p := range r.Parts {
			if p.Type == "dynamic-tool" {
				tools = append(tools, p)
			}
		}
		require.Len(t, tools, 1, "%s: one tool part: %+v", name, r.Parts)
		require.Equal(t, "output-available", tools[0].State, name)
		require.JSONEq(t, `"sunny in Lima"`, string(tools[0].Output), name)
		require.NotNil(t, tools[0].Approval, name)
		require.NotNil(t, tools[0].Approval.Approved, name)
		require.True(t, *tools[0].Approval.Approved, "%s: the part shows the decision taken", name)
		if name == "second-tab-deny" {
			require.Contains(t, r.Trace, "tool-approval-response", "the second tab is told the decision taken")
		} else {
			require.NotContains(t, r.Trace, "tool-approval-response", "the decision taken is the second tab's own")
		}
		require.Equal(t, runner.StatusFinished, ended(t, b.Runner, r.ID).Status, name)
	}
	require.EqualValues(t, 2, b.Runs.Load(), "get_weather ran once per chat")
}

// TestConformanceReload: a page that asked for an approval is loaded
// again: the ai package's client takes the chat's messages from GET
// {api}/{id}/messages, resumes the turn that waits, is shown the approval
// again, approves, and gets the answer; loaded again, the conversation
// shows the call done, with its arguments parsed and as written, and goes
// on.
func TestConformanceReload(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	r := conformance(t, serve(t, b, nil), "reload")["reload"]
	require.Truef(t, r.OK, "%s %v\ntrace %v", r.Error, r.Problems, r.Trace)
	require.Equal(t, "user", r.Loaded, "while the turn waits, the history ends with its user message")
	require.Equal(t, "user,assistant", r.Reloaded)
	require.EqualValues(t, 1, b.Runs.Load(), "get_weather ran once")
	require.Len(t, r.History, 4)
	var roles []string
	for _, m := range r.History {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "assistant", "user", "assistant"}, roles)
	var tool *resultPart
	var texts []string
	for i, p := range r.History[1].Parts {
		switch p.Type {
		case "dynamic-tool":
			tool = &r.History[1].Parts[i]
		case "text":
			texts = append(texts, p.Text)
		}
	}
	require.NotNil(t, tool, "the call: %+v", r.History[1].Parts)
	require.Equal(t, "output-available", tool.State)
	require.JSONEq(t, `{"city":"Lima"}`, string(tool.Input))
	require.JSONEq(t, `"sunny in Lima"`, string(tool.Output))
	require.JSONEq(t, `{"planround":{"arguments_text":"{\"city\":\"Lima\"}"}}`, string(tool.Meta))
	require.Contains(t, strings.Join(texts, "|"), "Done: sunny in Lima")
	require.NotContains(t, strings.Join(texts, "|"), "<need_tool>", "the tags are not shown")
}
