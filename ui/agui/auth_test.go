package agui

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// input is a RunAgentInput as the tests send it.
type input struct {
	ThreadID string           `json:"threadId"`
	RunID    string           `json:"runId"`
	Messages []map[string]any `json:"messages"`
	Resume   []map[string]any `json:"resume,omitempty"`
}

func userInput(sid, text string) input {
	return input{ThreadID: sid, RunID: "r1", Messages: []map[string]any{{"id": "u1", "role": "user", "content": text}}}
}

// waitForApproval starts the weather turn on sid as alice and returns the
// interrupt its run finished with.
func waitForApproval(t *testing.T, f *fixture, sid string) map[string]any {
	t.Helper()
	status, events, msg := f.post(t, "alice", userInput(sid, uitest.Weather))
	if status != http.StatusOK {
		t.Fatalf("start: %d %s", status, msg)
	}
	last := events[len(events)-1]
	outcome, _ := last["outcome"].(map[string]any)
	if last["type"] != "RUN_FINISHED" || outcome["type"] != "interrupt" {
		t.Fatalf("the run did not finish with an interrupt: %s", types(events))
	}
	return outcome["interrupts"].([]any)[0].(map[string]any)
}

// resumeInput answers interrupt in with payload, holding call as the client
// shows it.
func resumeInput(sid string, in map[string]any, args string, payload any) input {
	x := userInput(sid, uitest.Weather)
	x.RunID = "r2"
	x.Messages = append(x.Messages, map[string]any{"id": "a1", "role": "assistant", "toolCalls": []map[string]any{{
		"id": in["toolCallId"], "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args},
	}}})
	x.Resume = []map[string]any{{"interruptId": in["id"], "status": "resolved", "payload": payload}}
	return x
}

func pending(t *testing.T, f *fixture, sid string) int {
	t.Helper()
	p, err := f.b.PendingApprovals(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return len(p)
}

// TestOwnerCheck: another principal cannot answer the interrupts of a
// thread, nor start a run on it, and decides nothing.
func TestOwnerCheck(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-owned"
	in := waitForApproval(t, f, sid)

	status, _, msg := f.post(t, "mallory", resumeInput(sid, in, `{"city":"Lima"}`, map[string]any{"approved": true}))
	if status != http.StatusForbidden {
		t.Errorf("another principal's resume: %d %s, want 403", status, msg)
	}
	if status, _, _ := f.post(t, "mallory", userInput(sid, "hello")); status != http.StatusForbidden {
		t.Errorf("another principal's message: %d, want 403", status)
	}
	if status, _, _ := f.post(t, "", userInput(sid, "hello")); status != http.StatusUnauthorized {
		t.Errorf("no principal: %d, want 401", status)
	}
	if n := pending(t, f, sid); n != 1 {
		t.Fatalf("%d approvals pending after the refused requests, want 1", n)
	}
	if n := f.b.Runs.Load(); n != 0 {
		t.Fatalf("get_weather ran %d times", n)
	}

	// The owner's answer goes through.
	status, events, msg := f.post(t, "alice", resumeInput(sid, in, `{"city":"Lima"}`, map[string]any{"approved": true}))
	if status != http.StatusOK || !strings.HasSuffix(types(events), "RUN_FINISHED") {
		t.Fatalf("the owner's resume: %d %s %s", status, msg, types(events))
	}
	if n := f.b.Runs.Load(); n != 1 {
		t.Errorf("get_weather ran %d times, want 1", n)
	}
}

// TestResumeBoundToCall: an answer that comes with another call than the
// approval's (other arguments, another tool, or none) is refused with 409
// and decides nothing.
func TestResumeBoundToCall(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-bound"
	in := waitForApproval(t, f, sid)
	approve := map[string]any{"approved": true}

	tests := []struct {
		name string
		body input
		want int
	}{
		{"other arguments", resumeInput(sid, in, `{"city":"Paris"}`, approve), http.StatusConflict},
		{"no such call", func() input {
			x := resumeInput(sid, in, `{"city":"Lima"}`, approve)
			x.Messages = x.Messages[:1]
			return x
		}(), http.StatusConflict},
		{"another tool", func() input {
			x := resumeInput(sid, in, `{"city":"Lima"}`, approve)
			x.Messages[1]["toolCalls"].([]map[string]any)[0]["function"] = map[string]any{"name": "slow_task", "arguments": `{"city":"Lima"}`}
			return x
		}(), http.StatusConflict},
		{"no decision", resumeInput(sid, in, `{"city":"Lima"}`, map[string]any{"ok": true}), http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, msg := f.post(t, "alice", tt.body)
			if status != tt.want {
				t.Errorf("status %d (%s), want %d", status, msg, tt.want)
			}
			if n := pending(t, f, sid); n != 1 {
				t.Errorf("%d approvals pending, want 1: nothing decided", n)
			}
		})
	}
	if n := f.b.Runs.Load(); n != 0 {
		t.Errorf("get_weather ran %d times", n)
	}
}

// TestRefusedRequests: what is refused before any stream starts, with its
// status and a JSON error.
func TestRefusedRequests(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	do := func(method, ctype string, body []byte) (int, string) {
		req, _ := http.NewRequest(method, f.srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("X-User", "alice")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return res.StatusCode, res.Header.Get("Content-Type")
	}
	big := append([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"`), bytes.Repeat([]byte("a"), ui.DefaultMaxBodyBytes)...)
	big = append(big, `"}]}`...)
	tests := []struct {
		name          string
		method, ctype string
		body          string
		want          int
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed},
		{"not JSON", http.MethodPost, "text/plain", "hi", http.StatusUnsupportedMediaType},
		{"malformed", http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{"no threadId", http.MethodPost, "application/json", `{"runId":"r","messages":[]}`, http.StatusBadRequest},
		{"no runId", http.MethodPost, "application/json", `{"threadId":"t","messages":[]}`, http.StatusBadRequest},
		{"no user message", http.MethodPost, "application/json", `{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","content":"hi"}]}`, http.StatusBadRequest},
		{"bad resume status", http.MethodPost, "application/json", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"x","status":"maybe"}]}`, http.StatusBadRequest},
		{"too large", http.MethodPost, "application/json", string(big), http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ctype := do(tt.method, tt.ctype, []byte(tt.body))
			if status != tt.want || ctype != "application/json" {
				t.Errorf("%d %s, want %d application/json", status, ctype, tt.want)
			}
		})
	}
	// A stale answer (the interrupt is not pending) follows nothing: the
	// run finishes at once.
	status, events, _ := f.post(t, "alice", input{ThreadID: "t-stale", RunID: "r", Messages: []map[string]any{},
		Resume: []map[string]any{{"interruptId": "gone", "status": "resolved", "payload": map[string]any{"approved": true}}}})
	if status != http.StatusOK || types(events) != "RUN_STARTED RUN_FINISHED" {
		t.Errorf("stale resume: %d %s", status, types(events))
	}
}

// TestCancelledApproval: a cancelled resume entry rejects the call.
func TestCancelledApproval(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-cancel"
	in := waitForApproval(t, f, sid)
	x := resumeInput(sid, in, `{"city":"Lima"}`, nil)
	x.Resume[0] = map[string]any{"interruptId": in["id"], "status": "cancelled"}
	status, events, msg := f.post(t, "alice", x)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	if got := types(events); !strings.Contains(got, "CUSTOM TOOL_CALL_RESULT") {
		t.Errorf("events %s, want the call rejected", got)
	}
	if n := f.b.Runs.Load(); n != 0 {
		t.Errorf("get_weather ran %d times", n)
	}
	if n := pending(t, f, sid); n != 0 {
		t.Errorf("%d approvals pending", n)
	}
}

// TestSecondTurnSameCallID: a model that uses a call id again in a later
// turn of the thread gets the call shown again: only the calls after the
// last user message continue.
func TestSecondTurnSameCallID(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-again"
	in := waitForApproval(t, f, sid)
	x := resumeInput(sid, in, `{"city":"Lima"}`, map[string]any{"approved": true})
	if status, _, msg := f.post(t, "alice", x); status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	lastEnded(t, f.b.Runner, sid)
	x.Messages = append(x.Messages, map[string]any{"id": "u2", "role": "user", "content": uitest.Weather})
	x.Resume, x.RunID = nil, "r3"
	status, events, msg := f.post(t, "alice", x)
	if status != http.StatusOK || !strings.Contains(types(events), "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END") {
		t.Fatalf("%d %s %s: want call_1 shown again", status, msg, types(events))
	}
}

// TestStaleResumeShowsWhatWaits: a client that sends an answer again
// (its earlier request took it) while the turn waits for another approval
// gets that approval's interrupt at once.
func TestStaleResumeShowsWhatWaits(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-stale"
	status, events, msg := f.post(t, "alice", userInput(sid, uitest.Two))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	first := events[len(events)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	x := resumeInput(sid, first, `{"city":"Lima"}`, map[string]any{"approved": true})
	status, events, msg = f.post(t, "alice", x)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	second := events[len(events)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	if second["toolCallId"] != "call_2" {
		t.Fatalf("second interrupt %v", second)
	}
	x.Messages[1]["toolCalls"] = append(x.Messages[1]["toolCalls"].([]map[string]any), map[string]any{
		"id": "call_2", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Quito"}`}})
	status, events, msg = f.post(t, "alice", x) // call_1's answer again
	if status != http.StatusOK || types(events) != "RUN_STARTED RUN_FINISHED" {
		t.Fatalf("%d %s %s", status, msg, types(events))
	}
	again := events[1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "toolCallId", "reason"} {
		if again[k] != second[k] {
			t.Errorf("%s: %v, want %v", k, again[k], second[k])
		}
	}
	if n := f.b.Runs.Load(); n != 1 {
		t.Errorf("get_weather ran %d times, want 1", n)
	}
}

// TestFormAnswerRefused: an answer that is not one of the options is
// refused with 400, and the form stays open.
func TestFormAnswerRefused(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-form"
	status, events, msg := f.post(t, "alice", userInput(sid, uitest.Ask))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	in := events[len(events)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	x := userInput(sid, uitest.Ask)
	x.Resume = []map[string]any{{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"city": "Paris"}}}
	if status, _, msg := f.post(t, "alice", x); status != http.StatusBadRequest {
		t.Errorf("%d %s, want 400", status, msg)
	}
	open, err := f.b.PendingForms(context.Background(), sid)
	if err != nil || len(open) != 1 {
		t.Errorf("%d forms open (%v), want 1", len(open), err)
	}
	x.Resume[0]["payload"] = map[string]any{"city": "Quito"}
	status, events, msg = f.post(t, "alice", x)
	if status != http.StatusOK || !strings.HasSuffix(types(events), "RUN_FINISHED") {
		t.Fatalf("%d %s %s", status, msg, types(events))
	}
}

// TestResumeEchoedNumbers: @ag-ui/client keeps a call's arguments as the
// text it was sent, but a client that parses them writes numbers its own
// way: that is the same call, and it runs with the arguments as shown;
// other values are refused with 409 and decide nothing.
func TestResumeEchoedNumbers(t *testing.T) {
	f := newFixture(t, uitest.Options{})
	sid := "thread-numbers"
	const args = `{"price":2.50,"n":1e3,"z":-0,"big":12345678901234567890}`
	status, events, msg := f.post(t, "alice", userInput(sid, uitest.Order+args))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, msg)
	}
	in := events[len(events)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	answer := func(echo string) input {
		x := userInput(sid, uitest.Order+args)
		x.RunID = "r2"
		x.Messages = append(x.Messages, map[string]any{"id": "a1", "role": "assistant", "toolCalls": []map[string]any{{
			"id": in["toolCallId"], "type": "function", "function": map[string]any{"name": "place_order", "arguments": echo},
		}}})
		x.Resume = []map[string]any{{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"approved": true}}}
		return x
	}
	for _, echo := range []string{
		`{"price":2.5,"n":1000,"z":0,"big":12345678901234577000}`,
		`{"price":2.5,"n":1000,"z":0,"big":12345678901234567000,"to":"mallory"}`,
		`{"price":"2.5","n":1000,"z":0,"big":12345678901234567000}`,
	} {
		if status, _, msg := f.post(t, "alice", answer(echo)); status != http.StatusConflict {
			t.Errorf("%s: %d %s, want 409", echo, status, msg)
		}
	}
	if n := pending(t, f, sid); n != 1 {
		t.Fatalf("%d approvals pending, want 1", n)
	}
	status, events, msg = f.post(t, "alice", answer(`{"price":2.5,"n":1000,"z":0,"big":12345678901234567000}`))
	if status != http.StatusOK || !strings.HasSuffix(types(events), "RUN_FINISHED") {
		t.Fatalf("%d %s %s", status, msg, types(events))
	}
	if got := f.b.Orders(); len(got) != 1 || got[0] != args {
		t.Errorf("place_order ran with %q, want once with %s", got, args)
	}
}
