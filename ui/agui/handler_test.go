package agui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// owners is the Authorize of the tests: the X-User header names the
// principal, and the first principal to use a thread owns it.
type owners struct{ m sync.Map }

func (o *owners) authorize(r *http.Request, sessionID string) (string, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return "", ui.ErrUnauthenticated
	}
	if owner, _ := o.m.LoadOrStore(sessionID, user); owner != user {
		return "", errors.New("thread " + sessionID + " belongs to someone else")
	}
	return user, nil
}

type fixture struct {
	b   *uitest.Bench
	h   *Handler
	srv *httptest.Server
}

func newFixture(t *testing.T, o uitest.Options) *fixture {
	t.Helper()
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	b := uitest.New(t, o)
	var own owners
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: own.authorize})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &fixture{b: b, h: h, srv: srv}
}

// post sends body as user and returns the status and the events (or the
// JSON error) of the answer.
func (f *fixture) post(t *testing.T, user string, body any) (int, []map[string]any, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, nil, e.Error
	}
	var events []map[string]any
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return res.StatusCode, events, ""
}

func types(events []map[string]any) string {
	var s []string
	for _, e := range events {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

// lastEnded waits for the thread's turn to end and returns how.
func lastEnded(t *testing.T, r *runner.Runner, sid string) runner.TurnEnded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		st, err := r.Log(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running() {
			var ended runner.TurnEnded
			for e, err := range r.Subscribe(ctx, sid, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Kind == runner.EventTurnEnded {
					ended = *e.Ended
				}
				if e.Seq >= st.Last {
					break
				}
			}
			return ended
		}
		select {
		case <-ctx.Done():
			t.Fatal("the turn did not end")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The traces the scenarios must print, run by run (see testdata/agui.mjs).
var (
	planning = "RUN_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END CUSTOM(planround.round_end) STEP_FINISHED"
	answer   = "STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT*2 TEXT_MESSAGE_END CUSTOM(planround.round_end) STEP_FINISHED"
	asks     = func(tool string) string {
		return planning + " STEP_STARTED TOOL_CALL_START(" + tool + ") TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED(interrupt)"
	}
	resumed = "RUN_STARTED STEP_STARTED TOOL_CALL_RESULT CUSTOM(planround.round_end) STEP_FINISHED " + answer + " RUN_FINISHED(success)"
	// hello is the turn of "hello" (two rounds of text), two2 the run that
	// answers the first of two approvals.
	hello = "STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT*2 TEXT_MESSAGE_END CUSTOM(planround.round_end) STEP_FINISHED " + answer
	two2  = "RUN_STARTED STEP_STARTED TOOL_CALL_RESULT TOOL_CALL_START(get_weather) TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED(interrupt)"
)

// userSaid checks that the thread's history holds text as the user's
// last message.
func userSaid(t *testing.T, f *fixture, sid, text string) {
	t.Helper()
	msgs, err := f.b.Store.Messages(context.Background(), sid, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == memory.RoleUser {
			if msgs[i].Content != text {
				t.Errorf("the last user message is %q, want %q", msgs[i].Content, text)
			}
			return
		}
	}
	t.Errorf("no user message stored")
}

func TestNodeScenarios(t *testing.T) {
	uitest.NPMDir(t)
	tests := []struct {
		name   string
		opts   uitest.Options
		traces []string
		// lines the output must hold
		lines []string
		check func(t *testing.T, f *fixture, sid string)
	}{{
		name:   "hello",
		traces: []string{"RUN_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT*2 TEXT_MESSAGE_END CUSTOM(planround.round_end) STEP_FINISHED " + answer + " RUN_FINISHED(success)"},
		lines:  []string{"MESSAGE assistant thread-hello.1.1 Hello there!"},
	}, {
		name:   "approve",
		traces: []string{asks("get_weather"), resumed},
		lines:  []string{`"reason":"tool_approval"`, `"toolCallId":"call_1"`, `"responseSchema":{"type":"object","properties":{"approved":{"type":"boolean"`, "MESSAGE tool thread-approve.1.1/call_1.result sunny in Lima", "Done: sunny in Lima"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 1 {
				t.Errorf("get_weather ran %d times, want 1", n)
			}
			if st := lastEnded(t, f.b.Runner, sid).Status; st != runner.StatusFinished {
				t.Errorf("the turn ended %s, want finished", st)
			}
		},
	}, {
		// The arguments stream as tool_input fragments: TOOL_CALL_ARGS
		// carries each one, and the same events result.
		name:   "approve-streamed",
		opts:   uitest.Options{StreamToolArguments: true},
		traces: []string{asks("get_weather"), resumed},
		lines:  []string{`MESSAGE assistant thread-approve-streamed.1.1 [call_1:get_weather{"city":"Lima"}]`},
	}, {
		// Two calls that need approval in one round: one interrupt per
		// run, each answered by the next.
		name: "two",
		traces: []string{
			planning + " STEP_STARTED TOOL_CALL_START(get_weather) TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED(interrupt)",
			two2,
			resumed,
		},
		lines: []string{`"toolCallId":"call_1"`, `"toolCallId":"call_2"`, "MESSAGE tool thread-two.1.1/call_2.result sunny in Quito"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 2 {
				t.Errorf("get_weather ran %d times, want 2", n)
			}
		},
	}, {
		name:   "reject",
		traces: []string{asks("get_weather"), "RUN_STARTED STEP_STARTED CUSTOM(planround.tool_rejected) TOOL_CALL_RESULT STEP_FINISHED CUSTOM(planround.turn_ended) RUN_FINISHED(success)"},
		lines:  []string{"MESSAGE tool thread-reject.1.1/call_1.result not today"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 0 {
				t.Errorf("get_weather ran %d times, want 0", n)
			}
			if e := lastEnded(t, f.b.Runner, sid); e.Status != runner.StatusRejected || e.Cause != "user" {
				t.Errorf("the turn ended %+v, want rejected by the user", e)
			}
		},
	}, {
		name:   "abort",
		traces: []string{planning + " STEP_STARTED TOOL_CALL_START(slow_task) TOOL_CALL_ARGS TOOL_CALL_END CUSTOM(planround.tool_progress) RUN_ERROR(abort)"},
		check: func(t *testing.T, f *fixture, sid string) {
			if st := lastEnded(t, f.b.Runner, sid).Status; st != runner.StatusInterrupted {
				t.Errorf("the turn ended %s, want interrupted (the client aborted)", st)
			}
		},
	}, {
		name:   "form",
		traces: []string{asks("ask_user_question"), resumed},
		lines: []string{`"reason":"input_required"`, `"toolCallId":"call_a"`,
			`"responseSchema":{"type":"object","properties":{"city":{"type":"string","title":"Which city?","enum":["Lima","Quito"]}},"required":["city"],"additionalProperties":false}`,
			`"answer":"Lima"`},
	}, {
		name:   "card",
		traces: []string{planning + " STEP_STARTED TOOL_CALL_START(show_card) TOOL_CALL_ARGS TOOL_CALL_END ACTIVITY_SNAPSHOT(planround.card) TOOL_CALL_RESULT CUSTOM(planround.round_end) STEP_FINISHED " + answer + " RUN_FINISHED(success)"},
		lines:  []string{`MESSAGE activity thread-card.1.1/call_c.side {"type":"card","title":"Paris","body":"Sunny all week."}`},
	}, {
		name: "research",
		traces: []string{
			planning + " STEP_STARTED TOOL_CALL_START(research) TOOL_CALL_ARGS TOOL_CALL_END SUBAGENT_STARTED@sub STEP_STARTED@sub TOOL_CALL_START(get_weather) TOOL_CALL_ARGS@sub TOOL_CALL_END@sub STEP_FINISHED@sub STEP_FINISHED SUBAGENT_FINISHED(suspended) RUN_FINISHED(interrupt)",
			"RUN_STARTED SUBAGENT_STARTED@sub STEP_STARTED@sub TOOL_CALL_RESULT@sub CUSTOM(planround.round_end) STEP_FINISHED@sub STEP_STARTED@sub TEXT_MESSAGE_START@sub TEXT_MESSAGE_CONTENT@sub*2 TEXT_MESSAGE_END@sub CUSTOM(planround.round_end) STEP_FINISHED@sub STEP_STARTED SUBAGENT_FINISHED(success) TOOL_CALL_RESULT CUSTOM(planround.round_end) STEP_FINISHED " + answer + " RUN_FINISHED(success)",
		},
		lines: []string{`"subagentRunId":"call_r"`, `"toolCallId":"call_r/call_q"`, "MESSAGE tool thread-research.1.1/call_r.result Done: sunny in Quito"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 1 {
				t.Errorf("get_weather ran %d times in the sub-agent, want 1", n)
			}
		},
	}, {
		// @ag-ui/client keeps a call's arguments as the text it was sent
		// (it does not parse and write them again): numbers stay as the
		// model wrote them, and the call runs with them.
		name:   "numbers",
		traces: []string{asks("place_order"), resumed},
		lines:  []string{`MESSAGE assistant thread-numbers.1.1 [call_o:place_order{"price":2.50,"qty":20.0,"n":1e3,"z":-0,"big":12345678901234567890}]`},
		check: func(t *testing.T, f *fixture, sid string) {
			if got := f.b.Orders(); len(got) != 1 || got[0] != `{"price":2.50,"qty":20.0,"n":1e3,"z":-0,"big":12345678901234567890}` {
				t.Errorf("place_order ran with %q", got)
			}
		},
	}, {
		// The person writes instead of answering: the client cancels the
		// interrupt in the run that sends the message. The call is
		// rejected, and the message answered in the same run.
		name: "moveon",
		traces: []string{asks("get_weather"),
			"RUN_STARTED STEP_STARTED CUSTOM(planround.tool_rejected) TOOL_CALL_RESULT STEP_FINISHED CUSTOM(planround.turn_ended) " + hello + " RUN_FINISHED(success)"},
		lines: []string{"MESSAGE tool thread-moveon.1.1/call_1.result the person cancelled the approval", "Hello there!"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 0 {
				t.Errorf("get_weather ran %d times, want 0", n)
			}
			if e := lastEnded(t, f.b.Runner, sid); e.Status != runner.StatusFinished {
				t.Errorf("the last turn ended %+v, want the new message's, finished", e)
			}
			userSaid(t, f, sid, "hello")
		},
	}, {
		// The same with a form, which only an answer or a stop ends: the
		// cancelled entry stops it.
		name: "moveon-form",
		traces: []string{asks("ask_user_question"),
			"RUN_STARTED STEP_STARTED TOOL_CALL_RESULT CUSTOM(planround.round_end) STEP_FINISHED " + answer + " " + hello + " RUN_FINISHED(success)"},
		lines: []string{"Hello there!"},
		check: func(t *testing.T, f *fixture, sid string) {
			if open, err := f.b.PendingForms(context.Background(), sid); err != nil || len(open) != 0 {
				t.Errorf("%d forms open (%v), want 0", len(open), err)
			}
			userSaid(t, f, sid, "hello")
		},
	}, {
		// A second tab answers call_1 after the first did: it is shown
		// call_2, whose events went to the first tab, and its answer
		// goes through.
		name:   "stale",
		traces: []string{asks("get_weather"), two2, "RUN_STARTED TOOL_CALL_START(get_weather) TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED(interrupt)", resumed},
		lines: []string{`STALE {"id":`, `"toolCallId":"call_2"`,
			`SECOND assistant thread-stale.1.1 [call_1:get_weather{"city":"Lima"},call_2:get_weather{"city":"Quito"}]`},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 2 {
				t.Errorf("get_weather ran %d times, want 2", n)
			}
			if e := lastEnded(t, f.b.Runner, sid); e.Status != runner.StatusFinished {
				t.Errorf("the turn ended %+v, want finished", e)
			}
		},
	}, {
		// ... or cancels it.
		name: "stale-cancel",
		traces: []string{asks("get_weather"), two2, "RUN_STARTED TOOL_CALL_START(get_weather) TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED(interrupt)",
			"RUN_STARTED STEP_STARTED CUSTOM(planround.tool_rejected) TOOL_CALL_RESULT STEP_FINISHED CUSTOM(planround.turn_ended) RUN_FINISHED(success)"},
		check: func(t *testing.T, f *fixture, sid string) {
			if n := f.b.Runs.Load(); n != 1 {
				t.Errorf("get_weather ran %d times, want 1", n)
			}
			if e := lastEnded(t, f.b.Runner, sid); e.Status != runner.StatusRejected {
				t.Errorf("the turn ended %+v, want rejected", e)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			sid := "thread-" + tt.name
			out := uitest.Node(t, 60*time.Second, "testdata/agui.mjs", f.srv.URL, tt.name, sid)
			var traces []string
			for _, line := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(line, "TRACE run"); ok {
					_, trace, _ := strings.Cut(rest, ": ")
					traces = append(traces, trace)
				}
			}
			if len(traces) != len(tt.traces) {
				t.Fatalf("%d runs, want %d:\n%s", len(traces), len(tt.traces), out)
			}
			for i := range traces {
				if traces[i] != tt.traces[i] {
					t.Errorf("run %d:\n got %s\nwant %s", i+1, traces[i], tt.traces[i])
				}
			}
			for _, l := range tt.lines {
				if !strings.Contains(out, l) {
					t.Errorf("the output lacks %s:\n%s", l, out)
				}
			}
			if tt.check != nil {
				tt.check(t, f, sid)
			}
		})
	}
}

// TestNodeCatchesBrokenStreams shows that the scenario's checks are worth
// something: with one event dropped, or two swapped, the client's
// validation (and the script) fails.
func TestNodeCatchesBrokenStreams(t *testing.T) {
	uitest.NPMDir(t)
	tests := []struct {
		name, event string
		action      filterAction
		want        string
	}{
		{"drop TOOL_CALL_END", "TOOL_CALL_END", drop, "tool calls are still active: call_1"},
		{"swap TEXT_MESSAGE_START", "TEXT_MESSAGE_START", hold, "No active text message found"},
		{"drop RUN_STARTED", "RUN_STARTED", drop, "First event must be 'RUN_STARTED'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, uitest.Options{})
			var once sync.Once
			f.h.filter = func(typ string) filterAction {
				a := keep
				if typ == tt.event {
					once.Do(func() { a = tt.action })
				}
				return a
			}
			out := uitest.Node(t, 60*time.Second, "testdata/agui.mjs", f.srv.URL, "approve", "thread-broken", "--expect-invalid")
			if !strings.Contains(out, "INVALID: ") || !strings.Contains(out, tt.want) {
				t.Errorf("the script did not report %q:\n%s", tt.want, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "INVALID: ") {
					t.Log(line)
				}
			}
		})
	}
}

// TestNodeNoReconnect pins what the package doc says: AG-UI 1.0's
// HttpAgent has no reconnect (connectAgent sends nothing).
func TestNodeNoReconnect(t *testing.T) {
	uitest.NPMDir(t)
	f := newFixture(t, uitest.Options{})
	out := uitest.Node(t, 60*time.Second, "testdata/agui.mjs", f.srv.URL, "reconnect", "thread-reconnect")
	if !strings.Contains(out, "CONNECT requests=0 events=0") {
		t.Errorf("connectAgent did something:\n%s", out)
	}
}
