package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// RunDurable runs, as subtests of t, the conformance suite of the optional
// interfaces of durable runs that the stores of newStore implement:
// [memory.CallLog], [memory.ApprovalStore], [memory.Leaser],
// [memory.Notifier] and [memory.EventLog]. A store that implements none of
// them fails t. newStore
// must return a new, empty store for each call; it should register its own
// clean-up with t.Cleanup.
//
// The lease tests wait for a lease of 200ms to expire, so the suite takes
// about a second.
func RunDurable(t *testing.T, newStore func(t *testing.T) memory.Store) {
	t.Helper()
	probe := newStore(t)
	_, isLog := probe.(memory.CallLog)
	_, isApprovals := probe.(memory.ApprovalStore)
	_, isLeaser := probe.(memory.Leaser)
	_, isNotifier := probe.(memory.Notifier)
	_, isEvents := probe.(memory.EventLog)
	if !isLog && !isApprovals && !isLeaser && !isNotifier && !isEvents {
		t.Fatalf("storetest.RunDurable: %T implements none of memory.CallLog, memory.ApprovalStore, memory.Leaser, memory.Notifier and memory.EventLog", probe)
	}
	type test struct {
		name string
		fn   func(t *testing.T, st memory.Store)
	}
	var tests []test
	if isLog {
		tests = append(tests, []test{
			{"CallLog/SaveCall", testSaveCall},
			{"CallLog/SaveCallNotFound", testSaveCallNotFound},
			{"CallLog/SaveCallInvalid", testSaveCallInvalid},
			{"CallLog/SaveCallArguments", testSaveCallArguments},
			{"CallLog/SaveCallArgumentsInvalid", testSaveCallArgumentsInvalid},
			{"CallLog/AppendClosesCalls", testAppendClosesCalls},
			{"CallLog/AppendCalls", testAppendCalls},
			{"CallLog/AppendCallsInvalid", testAppendCallsInvalid},
			{"CallLog/OpenSessions", testOpenSessions},
			{"CallLog/DeleteSession", testDeleteSessionCalls},
			{"CallLog/Cancelled", testCallLogCancelled},
		}...)
	}
	if isApprovals {
		tests = append(tests, []test{
			{"Approvals/RoundTrip", testApprovalRoundTrip},
			{"Approvals/Exists", testApprovalExists},
			{"Approvals/Invalid", testApprovalInvalid},
			{"Approvals/Decide", testApprovalDecide},
			{"Approvals/DecideConcurrent", testApprovalDecideConcurrent},
			{"Approvals/WrongSession", testApprovalWrongSession},
			{"Approvals/NotFound", testApprovalNotFound},
			{"Approvals/Pending", testApprovalPending},
			{"Approvals/DeleteSession", testDeleteSessionApprovals},
			{"Approvals/Copies", testApprovalCopies},
			{"Approvals/Cancelled", testApprovalCancelled},
			{"Approvals/Fields", testApprovalFields},
			{"Approvals/KeyUnique", testApprovalKeyUnique},
			{"Approvals/KeyUniqueConcurrent", testApprovalKeyConcurrent},
			{"Approvals/ByKey", testApprovalByKey},
			{"Approvals/CreateDecided", testApprovalCreateDecided},
			{"Approvals/Decisions", testDecisions},
			{"Approvals/DecisionsPaging", testDecisionsPaging},
			{"Approvals/DecisionsDecided", testDecisionsDecided},
		}...)
	}
	if isLeaser {
		tests = append(tests, []test{
			{"Leaser/Holders", testLeaseHolders},
			{"Leaser/Expiry", testLeaseExpiry},
			{"Leaser/Renew", testLeaseRenew},
			{"Leaser/Invalid", testLeaseInvalid},
			{"Leaser/Cancelled", testLeaseCancelled},
		}...)
	}
	if isNotifier {
		tests = append(tests, []test{
			{"Notifier/Order", testNotifyOrder},
			{"Notifier/Payloads", testNotifyPayloads},
			{"Notifier/Stop", testNotifyStop},
			{"Notifier/Channels", testNotifyChannels},
			{"Notifier/OneAtATime", testNotifyOneAtATime},
			{"Notifier/Cancelled", testNotifyCancelled},
		}...)
	}
	if isEvents {
		tests = append(tests, []test{
			{"EventLog/Append", testEventAppend},
			{"EventLog/Sequence", testEventSequence},
			{"EventLog/Invalid", testEventInvalid},
			{"EventLog/Writers", testEventWritersOne},
			{"EventLog/Read", testEventRead},
			{"EventLog/Trim", testEventTrim},
			{"EventLog/DeleteSession", testEventDelete},
			{"EventLog/DeleteRacing", testEventDeleteRacing},
			{"EventLog/NotFound", testEventNotFound},
			{"EventLog/Copies", testEventCopies},
			{"EventLog/Cancelled", testEventCancelled},
		}...)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

// RunNotifierPair checks that two [memory.Notifier] handles on one backing
// store, as two processes would hold, hear each other: a note sent through
// one reaches the listeners of both, in the order it was sent. newPair
// must return two handles on one new, empty store; it should register their
// clean-up with t.Cleanup.
func RunNotifierPair(t *testing.T, newPair func(t *testing.T) (a, b memory.Notifier)) {
	t.Helper()
	t.Run("BothWays", func(t *testing.T) {
		a, b := newPair(t)
		const n = 50
		for _, dir := range []struct {
			name     string
			from, to memory.Notifier
		}{{"a to b", a, b}, {"b to a", b, a}} {
			at := listen(t, dir.to, "pair")
			here := listen(t, dir.from, "pair")
			for i := range n {
				notify(t, dir.from, "pair", fmt.Sprint(dir.name, " ", i))
			}
			want := make([]string, n)
			for i := range want {
				want[i] = fmt.Sprint(dir.name, " ", i)
			}
			if got := at.wait(t, n); !slices.Equal(got, want) {
				t.Errorf("%s: the other handle heard %q, want %q", dir.name, got, want)
			}
			if got := here.wait(t, n); !slices.Equal(got, want) {
				t.Errorf("%s: the sending handle's own listener heard %q, want %q", dir.name, got, want)
			}
			at.stop()
			here.stop()
		}
	})
	t.Run("Channels", func(t *testing.T) {
		a, b := newPair(t)
		x, y := listen(t, b, "x"), listen(t, b, "y")
		notify(t, a, "x", "1")
		notify(t, a, "y", "2")
		notify(t, a, "x", "end")
		notify(t, a, "y", "end")
		if got := x.wait(t, 2); !slices.Equal(got, []string{"1", "end"}) {
			t.Errorf("channel x heard %q, want [1 end]", got)
		}
		if got := y.wait(t, 2); !slices.Equal(got, []string{"2", "end"}) {
			t.Errorf("channel y heard %q, want [2 end]", got)
		}
	})
}

// callSession returns st as a CallLog with a session id created in it, holding
// one assistant message whose tool calls have the given ids; it returns the
// message's id.
func callSession(t *testing.T, st memory.Store, id string, callIDs ...string) (memory.CallLog, int64) {
	t.Helper()
	create(t, st, id)
	return st.(memory.CallLog), assistantWith(t, st, id, callIDs...)
}

// assistantWith appends an assistant message with tool calls of the given
// ids to session id and returns its id.
func assistantWith(t *testing.T, st memory.Store, id string, callIDs ...string) int64 {
	t.Helper()
	m := memory.Message{Role: memory.RoleAssistant}
	for _, c := range callIDs {
		m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: c, Name: "tool", Arguments: json.RawMessage(`{}`)})
	}
	return appendMsgs(t, st, id, m)[0].ID
}

func saveCall(t *testing.T, log memory.CallLog, sessionID string, c memory.OpenCall) {
	t.Helper()
	if err := log.SaveCall(t.Context(), sessionID, c); err != nil {
		t.Fatalf("SaveCall(%q, %+v): %v", sessionID, c, err)
	}
}

func openCalls(t *testing.T, log memory.CallLog, sessionID string) []memory.OpenCall {
	t.Helper()
	out, err := log.OpenCalls(t.Context(), sessionID)
	if err != nil {
		t.Fatalf("OpenCalls(%q): %v", sessionID, err)
	}
	return out
}

// callKeys names each record by message id and call id.
func callKeys(calls []memory.OpenCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = fmt.Sprintf("%d/%s", c.MessageID, c.CallID)
	}
	return out
}

func openSessions(t *testing.T, log memory.CallLog) []string {
	t.Helper()
	ids, err := log.OpenSessions(t.Context())
	if err != nil {
		t.Fatalf("OpenSessions: %v", err)
	}
	slices.Sort(ids)
	return ids
}

func testSaveCall(t *testing.T, st memory.Store) {
	log, m1 := callSession(t, st, "s", "y", "z")
	m2 := assistantWith(t, st, "s", "a", "b")
	before := time.Now()
	// Saved out of message order; within a message, first-saved order is
	// not the order of the ids.
	saveCall(t, log, "s", memory.OpenCall{MessageID: m2, CallID: "b", Round: 2})
	saveCall(t, log, "s", memory.OpenCall{MessageID: m1, CallID: "z", Round: 1})
	saveCall(t, log, "s", memory.OpenCall{MessageID: m2, CallID: "a", Round: 2})
	saveCall(t, log, "s", memory.OpenCall{MessageID: m1, CallID: "y", Round: 1, Partial: "é \x00 partial"})
	got := openCalls(t, log, "s")
	want := []string{fmt.Sprint(m1, "/z"), fmt.Sprint(m1, "/y"), fmt.Sprint(m2, "/b"), fmt.Sprint(m2, "/a")}
	if !slices.Equal(callKeys(got), want) {
		t.Fatalf("OpenCalls = %v, want %v (by message id, then first-saved order)", callKeys(got), want)
	}
	for _, c := range got {
		if c.UpdatedAt.IsZero() || c.UpdatedAt.Location() != time.UTC || c.UpdatedAt.Before(before.Add(-time.Second)) {
			t.Errorf("record %d/%s: UpdatedAt = %v, want the time of SaveCall in UTC", c.MessageID, c.CallID, c.UpdatedAt)
		}
	}
	if got[1].Partial != "é \x00 partial" || got[1].Round != 1 {
		t.Errorf("record %d/y = %+v, want round 1 and its partial output", m1, got[1])
	}

	// Replacing a record changes every field and keeps its place.
	state := "task \x00\xff" + strings.Repeat("s", memory.MaxCallState-7) // opaque bytes, the most a record holds
	repl := memory.OpenCall{MessageID: m2, CallID: "b", Round: 3, ApprovalID: "ap-1", Executing: true, Partial: "half", State: state}
	saveCall(t, log, "s", repl)
	got = openCalls(t, log, "s")
	if !slices.Equal(callKeys(got), want) {
		t.Fatalf("OpenCalls after replace = %v, want %v (a replaced record keeps its place)", callKeys(got), want)
	}
	b := got[2]
	if b.Round != 3 || b.ApprovalID != "ap-1" || !b.Executing || b.Partial != "half" || b.State != state {
		t.Errorf("replaced record = %+v, want %+v", b, repl)
	}
	// A state beyond MaxCallState is refused, and the record is left as it was.
	big := repl
	big.State += "x"
	if err := log.SaveCall(t.Context(), "s", big); err == nil {
		t.Errorf("SaveCall with a state of %d bytes succeeded, want an error", len(big.State))
	}
	if b := openCalls(t, log, "s")[2]; b.State != state {
		t.Errorf("record after a refused save has a state of %d bytes, want the %d saved before", len(b.State), len(state))
	}
	// Back to not executing, with no approval: the fields are replaced, not merged.
	saveCall(t, log, "s", memory.OpenCall{MessageID: m2, CallID: "b", Round: 3})
	if b := openCalls(t, log, "s")[2]; b.Executing || b.ApprovalID != "" || b.Partial != "" || b.State != "" {
		t.Errorf("record after a second replace = %+v, want no approval, not executing, no partial, no state", b)
	}

	// The same call id in another message is another record.
	m3 := assistantWith(t, st, "s", "a")
	saveCall(t, log, "s", memory.OpenCall{MessageID: m3, CallID: "a", Round: 4})
	if got := openCalls(t, log, "s"); len(got) != 5 {
		t.Errorf("OpenCalls = %v, want 5 records (call a of two messages)", callKeys(got))
	}
	// Another session has its own records.
	create(t, st, "other")
	if got := openCalls(t, log, "other"); len(got) != 0 {
		t.Errorf("OpenCalls of a session without records = %v, want none", callKeys(got))
	}
}

func testSaveCallNotFound(t *testing.T, st memory.Store) {
	log := st.(memory.CallLog)
	ctx := t.Context()
	if err := log.SaveCall(ctx, "no-such-session", memory.OpenCall{MessageID: 1, CallID: "c"}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("SaveCall(unknown session): err = %v, want ErrNotFound", err)
	}
	if err := log.SaveCall(ctx, "no-such-session", memory.OpenCall{MessageID: 1, CallID: "c", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("SaveCall(unknown session, with arguments): err = %v, want ErrNotFound", err)
	}
	if _, err := log.OpenCalls(ctx, "no-such-session"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("OpenCalls(unknown session): err = %v, want ErrNotFound", err)
	}
	if ids := openSessions(t, log); len(ids) != 0 {
		t.Errorf("OpenSessions after a refused SaveCall = %v, want none", ids)
	}
}

func testSaveCallInvalid(t *testing.T, st memory.Store) {
	log, m := callSession(t, st, "s", "c")
	for _, c := range []memory.OpenCall{
		{MessageID: m},
		{CallID: "c"},
		{MessageID: -1, CallID: "c"},
	} {
		if err := log.SaveCall(t.Context(), "s", c); err == nil {
			t.Errorf("SaveCall(%+v): got nil error", c)
		}
	}
	if got := openCalls(t, log, "s"); len(got) != 0 {
		t.Errorf("OpenCalls after refused saves = %v, want none", callKeys(got))
	}
}

// callArgs returns the arguments of each call of the session's message id,
// by call id, as JSON values.
func callArgs(t *testing.T, st memory.Store, sessionID string, id int64) map[string]any {
	t.Helper()
	for _, m := range messages(t, st, sessionID, true) {
		if m.ID != id {
			continue
		}
		out := make(map[string]any, len(m.ToolCalls))
		for _, c := range m.ToolCalls {
			var v any
			if err := json.Unmarshal(c.Arguments, &v); err != nil {
				t.Fatalf("message %d: call %s: arguments %q: %v", id, c.ID, c.Arguments, err)
			}
			out[c.ID] = v
		}
		return out
	}
	t.Fatalf("no message %d in session %q", id, sessionID)
	return nil
}

func testSaveCallArguments(t *testing.T, st memory.Store) {
	create(t, st, "s")
	log := st.(memory.CallLog)
	m := memory.Message{Role: memory.RoleAssistant, Content: "two calls", ToolCalls: []memory.ToolCall{
		{ID: "a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "b", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo","units":"C"}`)},
	}}
	stored, err := log.AppendCalls(t.Context(), "s", []memory.OpenCall{{CallID: "a", Round: 1}, {CallID: "b", Round: 1}}, user("weather?"), m)
	if err != nil {
		t.Fatalf("AppendCalls: %v", err)
	}
	id := stored[1].ID
	orig := callArgs(t, st, "s", id)

	// A record without arguments leaves the message as it is.
	saveCall(t, log, "s", memory.OpenCall{MessageID: id, CallID: "a", Round: 1, ApprovalID: "ap"})
	if got := callArgs(t, st, "s", id); !reflect.DeepEqual(got, orig) {
		t.Errorf("after SaveCall without arguments: calls %v, want %v", got, orig)
	}

	// An approver's edit: the call's arguments in the message become the
	// edited ones; the other call keeps its own.
	saveCall(t, log, "s", memory.OpenCall{MessageID: id, CallID: "a", Round: 1, ApprovalID: "ap", Executing: true,
		Arguments: json.RawMessage(`{"city":"Rome","note":"<é> & \"q\""}`)})
	want := map[string]any{"a": map[string]any{"city": "Rome", "note": `<é> & "q"`}, "b": orig["b"]}
	if got := callArgs(t, st, "s", id); !reflect.DeepEqual(got, want) {
		t.Errorf("after SaveCall with arguments: calls %v, want %v", got, want)
	}
	msgs := messages(t, st, "s", true)
	if last := msgs[len(msgs)-1]; last.ID != id || last.Content != "two calls" || len(last.ToolCalls) != 2 ||
		last.ToolCalls[0].ID != "a" || last.ToolCalls[0].Name != "get_weather" || last.ToolCalls[1].ID != "b" {
		t.Errorf("edited message = %+v, want its content and calls in place", last)
	}
	// The record is saved with it, without the arguments.
	got := openCalls(t, log, "s")
	if len(got) != 2 || got[0].CallID != "a" || !got[0].Executing || got[0].ApprovalID != "ap" {
		t.Fatalf("OpenCalls = %+v, want a executing with its approval, then b", got)
	}
	if len(got[0].Arguments) != 0 {
		t.Errorf("record a: Arguments = %s, want none (the message holds them)", got[0].Arguments)
	}
	// A later save without arguments (a partial output) keeps the edit.
	saveCall(t, log, "s", memory.OpenCall{MessageID: id, CallID: "a", Round: 1, ApprovalID: "ap", Executing: true, Partial: "out"})
	if got := callArgs(t, st, "s", id); !reflect.DeepEqual(got, want) {
		t.Errorf("after a later SaveCall: calls %v, want %v", got, want)
	}
	// The tool message closes the record; the history keeps the edit.
	appendMsgs(t, st, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "a", Name: "get_weather", Content: "Rome: sunny", Outcome: memory.OutcomeResult})
	if got := callArgs(t, st, "s", id); !reflect.DeepEqual(got, want) {
		t.Errorf("after the tool message: calls %v, want %v", got, want)
	}
}

func testSaveCallArgumentsInvalid(t *testing.T, st memory.Store) {
	log, m := callSession(t, st, "s", "a", "b")
	create(t, st, "other")
	elsewhere := assistantWith(t, st, "other", "a")
	plain := appendMsgs(t, st, "s", user("no calls"))[0].ID
	orig := callArgs(t, st, "s", m)
	for _, tt := range []struct {
		name string
		c    memory.OpenCall
	}{
		{"not an object", memory.OpenCall{MessageID: m, CallID: "a", Arguments: json.RawMessage(`["Rome"]`)}},
		{"not JSON", memory.OpenCall{MessageID: m, CallID: "a", Arguments: json.RawMessage(`{"city": "Ro`)}},
		{"no such call", memory.OpenCall{MessageID: m, CallID: "zz", Arguments: json.RawMessage(`{}`)}},
		{"no such message", memory.OpenCall{MessageID: elsewhere + 1000, CallID: "a", Arguments: json.RawMessage(`{}`)}},
		{"another session's message", memory.OpenCall{MessageID: elsewhere, CallID: "a", Arguments: json.RawMessage(`{}`)}},
		{"a message without calls", memory.OpenCall{MessageID: plain, CallID: "a", Arguments: json.RawMessage(`{}`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := log.SaveCall(t.Context(), "s", tt.c); err == nil {
				t.Errorf("SaveCall(%+v): got nil error", tt.c)
			}
			if got := callArgs(t, st, "s", m); !reflect.DeepEqual(got, orig) {
				t.Errorf("after a refused SaveCall: calls %v, want %v", got, orig)
			}
			if got := openCalls(t, log, "s"); len(got) != 0 {
				t.Errorf("after a refused SaveCall: records %v, want none", callKeys(got))
			}
		})
	}
	if got := callArgs(t, st, "other", elsewhere); !reflect.DeepEqual(got, map[string]any{"a": map[string]any{}}) {
		t.Errorf("the other session's message: calls %v, want it unchanged", got)
	}
	// AppendCalls takes no edit: the message it appends holds the arguments.
	_, err := log.AppendCalls(t.Context(), "s", []memory.OpenCall{{CallID: "x", Arguments: json.RawMessage(`{}`)}},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "x", Name: "tool"}}})
	if err == nil {
		t.Errorf("AppendCalls with a record's Arguments: got nil error")
	}
}

func testAppendClosesCalls(t *testing.T, st memory.Store) {
	log, m1 := callSession(t, st, "s", "c1", "c2")
	m2 := assistantWith(t, st, "s", "c1")
	_, o1 := callSession(t, st, "other", "c1")
	saveCall(t, log, "s", memory.OpenCall{MessageID: m1, CallID: "c1"})
	saveCall(t, log, "s", memory.OpenCall{MessageID: m1, CallID: "c2"})
	saveCall(t, log, "s", memory.OpenCall{MessageID: m2, CallID: "c1"})
	saveCall(t, log, "other", memory.OpenCall{MessageID: o1, CallID: "c1"})

	// Messages that are not tool messages close nothing, even with a
	// tool call id.
	appendMsgs(t, st, "s", user("c1"), memory.Message{Role: memory.RoleAssistant, Content: "c2"})
	if got := openCalls(t, log, "s"); len(got) != 3 {
		t.Fatalf("OpenCalls after non-tool messages = %v, want all 3 records", callKeys(got))
	}
	// A tool message closes every record of its call id in its session,
	// and only there.
	appendMsgs(t, st, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c1", Name: "tool", Content: "done"},
		memory.Message{Role: memory.RoleTool, ToolCallID: "unknown", Name: "tool", Content: "no record"})
	if got, want := callKeys(openCalls(t, log, "s")), []string{fmt.Sprint(m1, "/c2")}; !slices.Equal(got, want) {
		t.Errorf("OpenCalls after the tool message of c1 = %v, want %v", got, want)
	}
	if got, want := callKeys(openCalls(t, log, "other")), []string{fmt.Sprint(o1, "/c1")}; !slices.Equal(got, want) {
		t.Errorf("OpenCalls of the other session = %v, want %v (untouched)", got, want)
	}
	// A failed Append closes nothing.
	if _, err := st.Append(t.Context(), "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c2", Content: "x"}, memory.Message{Role: "robot"}); err == nil {
		t.Fatalf("Append of an invalid message: got nil error")
	}
	if got := openCalls(t, log, "s"); len(got) != 1 {
		t.Errorf("OpenCalls after a failed Append = %v, want the record of c2 kept", callKeys(got))
	}
	appendMsgs(t, st, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c2", Name: "tool", Content: "done"})
	if got := openCalls(t, log, "s"); len(got) != 0 {
		t.Errorf("OpenCalls after every call answered = %v, want none", callKeys(got))
	}
}

func testAppendCalls(t *testing.T, st memory.Store) {
	create(t, st, "s")
	log := st.(memory.CallLog)
	asst := memory.Message{Role: memory.RoleAssistant, Content: "on it", ToolCalls: []memory.ToolCall{
		{ID: "c1", Name: "tool", Arguments: json.RawMessage(`{"a":1}`)},
		{ID: "c2", Name: "tool", Arguments: json.RawMessage(`{}`)},
	}}
	out, err := log.AppendCalls(t.Context(), "s", []memory.OpenCall{
		{MessageID: 99, CallID: "c2", Round: 3, ApprovalID: "ap-2"}, // MessageID is ignored
		{CallID: "c1", Round: 3},
	}, user("hi"), asst)
	if err != nil {
		t.Fatalf("AppendCalls: %v", err)
	}
	if len(out) != 2 || out[0].ID <= 0 || out[1].ID <= out[0].ID || out[1].Role != memory.RoleAssistant || len(out[1].ToolCalls) != 2 {
		t.Fatalf("AppendCalls returned %+v, want the user message and the assistant message with increasing ids", out)
	}
	if got := messages(t, st, "s", false); len(got) != 2 || got[1].ID != out[1].ID {
		t.Fatalf("Messages after AppendCalls = %+v, want both messages", got)
	}
	got := openCalls(t, log, "s")
	if want := []string{fmt.Sprint(out[1].ID, "/c2"), fmt.Sprint(out[1].ID, "/c1")}; !slices.Equal(callKeys(got), want) {
		t.Fatalf("OpenCalls = %v, want %v (the assistant message's id, in the order given)", callKeys(got), want)
	}
	if got[0].Round != 3 || got[0].ApprovalID != "ap-2" || got[1].Round != 3 || got[1].UpdatedAt.IsZero() {
		t.Errorf("OpenCalls = %+v, want the records' fields kept and UpdatedAt set", got)
	}
	if ids := openSessions(t, log); !slices.Equal(ids, []string{"s"}) {
		t.Errorf("OpenSessions = %v, want [s]", ids)
	}
	// The records are replaced and closed as SaveCall's are.
	saveCall(t, log, "s", memory.OpenCall{MessageID: out[1].ID, CallID: "c1", Round: 3, Executing: true})
	appendMsgs(t, st, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c2", Name: "tool", Content: "done"})
	if got := openCalls(t, log, "s"); len(got) != 1 || got[0].CallID != "c1" || !got[0].Executing {
		t.Errorf("OpenCalls after a save and a tool message = %+v, want c1 alone, executing", got)
	}
	// No records: a plain Append.
	if _, err := log.AppendCalls(t.Context(), "s", nil, memory.Message{Role: memory.RoleAssistant, Content: "text"}); err != nil {
		t.Errorf("AppendCalls without records: %v", err)
	}
	if _, err := log.AppendCalls(t.Context(), "no-such-session", nil, asst); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("AppendCalls(unknown session): err = %v, want ErrNotFound", err)
	}
}

func testAppendCallsInvalid(t *testing.T, st memory.Store) {
	create(t, st, "s")
	log := st.(memory.CallLog)
	asst := memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "tool"}}}
	for name, tc := range map[string]struct {
		calls []memory.OpenCall
		msgs  []memory.Message
	}{
		"no messages":            {calls: []memory.OpenCall{{CallID: "c1"}}},
		"last not assistant":     {calls: []memory.OpenCall{{CallID: "c1"}}, msgs: []memory.Message{asst, user("x")}},
		"unknown call":           {calls: []memory.OpenCall{{CallID: "c9"}}, msgs: []memory.Message{asst}},
		"call twice":             {calls: []memory.OpenCall{{CallID: "c1"}, {CallID: "c1"}}, msgs: []memory.Message{asst}},
		"empty call id":          {calls: []memory.OpenCall{{}}, msgs: []memory.Message{asst}},
		"invalid message":        {calls: []memory.OpenCall{{CallID: "c1"}}, msgs: []memory.Message{{Role: "robot"}, asst}},
		"call of an earlier msg": {calls: []memory.OpenCall{{CallID: "c1"}}, msgs: []memory.Message{asst, {Role: memory.RoleAssistant, Content: "x"}}},
	} {
		if _, err := log.AppendCalls(t.Context(), "s", tc.calls, tc.msgs...); err == nil {
			t.Errorf("AppendCalls (%s): got nil error", name)
		}
	}
	if got := messages(t, st, "s", true); len(got) != 0 {
		t.Errorf("Messages after refused AppendCalls = %+v, want none", got)
	}
	if got := openCalls(t, log, "s"); len(got) != 0 {
		t.Errorf("OpenCalls after refused AppendCalls = %v, want none", callKeys(got))
	}
}

func testOpenSessions(t *testing.T, st memory.Store) {
	log, ms := callSession(t, st, "s", "c")
	_, mu := callSession(t, st, "u", "c", "d")
	create(t, st, "idle")
	if ids := openSessions(t, log); len(ids) != 0 {
		t.Errorf("OpenSessions of a store without records = %v, want none", ids)
	}
	saveCall(t, log, "s", memory.OpenCall{MessageID: ms, CallID: "c"})
	saveCall(t, log, "u", memory.OpenCall{MessageID: mu, CallID: "c"})
	saveCall(t, log, "u", memory.OpenCall{MessageID: mu, CallID: "d"})
	if got, want := openSessions(t, log), []string{"s", "u"}; !slices.Equal(got, want) {
		t.Errorf("OpenSessions = %v, want %v (each once)", got, want)
	}
	appendMsgs(t, st, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c", Name: "tool", Content: "ok"})
	if got, want := openSessions(t, log), []string{"u"}; !slices.Equal(got, want) {
		t.Errorf("OpenSessions after s's call was answered = %v, want %v", got, want)
	}
}

func testDeleteSessionCalls(t *testing.T, st memory.Store) {
	ctx := t.Context()
	log, m := callSession(t, st, "gone", "c")
	_, k := callSession(t, st, "kept", "c")
	saveCall(t, log, "gone", memory.OpenCall{MessageID: m, CallID: "c", ApprovalID: "a"})
	saveCall(t, log, "kept", memory.OpenCall{MessageID: k, CallID: "c"})
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if got, want := openSessions(t, log), []string{"kept"}; !slices.Equal(got, want) {
		t.Errorf("OpenSessions after delete = %v, want %v", got, want)
	}
	if _, err := log.OpenCalls(ctx, "gone"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("OpenCalls of a deleted session: err = %v, want ErrNotFound", err)
	}
	create(t, st, "gone")
	if got := openCalls(t, log, "gone"); len(got) != 0 {
		t.Errorf("recreated session has records %v, want none", callKeys(got))
	}
	if got := openCalls(t, log, "kept"); len(got) != 1 {
		t.Errorf("other session has records %v, want its one", callKeys(got))
	}
}

func testCallLogCancelled(t *testing.T, st memory.Store) {
	log, m := callSession(t, st, "s", "c", "d")
	saveCall(t, log, "s", memory.OpenCall{MessageID: m, CallID: "c"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := log.SaveCall(ctx, "s", memory.OpenCall{MessageID: m, CallID: "d"}); err == nil {
		t.Errorf("SaveCall with a cancelled context: got nil error")
	}
	if _, err := log.OpenCalls(ctx, "s"); err == nil {
		t.Errorf("OpenCalls with a cancelled context: got nil error")
	}
	if _, err := log.OpenSessions(ctx); err == nil {
		t.Errorf("OpenSessions with a cancelled context: got nil error")
	}
	if got, want := callKeys(openCalls(t, log, "s")), []string{fmt.Sprint(m, "/c")}; !slices.Equal(got, want) {
		t.Errorf("OpenCalls after cancelled calls = %v, want %v", got, want)
	}
}

// approval returns a valid pending approval.
func approval(id, sessionID string) memory.Approval {
	return memory.Approval{ID: id, SessionID: sessionID, CallID: "call-" + id, Tool: "tool", Round: 1,
		Arguments: json.RawMessage(`{"id": "` + id + `"}`)}
}

func createApproval(t *testing.T, as memory.ApprovalStore, a memory.Approval) {
	t.Helper()
	if err := as.CreateApproval(t.Context(), a); err != nil {
		t.Fatalf("CreateApproval(%q): %v", a.ID, err)
	}
}

func getApproval(t *testing.T, as memory.ApprovalStore, id string) memory.Approval {
	t.Helper()
	a, err := as.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatalf("GetApproval(%q): %v", id, err)
	}
	return a
}

func pendingIDs(t *testing.T, as memory.ApprovalStore, sessionID string) []string {
	t.Helper()
	list, err := as.PendingApprovals(t.Context(), sessionID)
	if err != nil {
		t.Fatalf("PendingApprovals(%q): %v", sessionID, err)
	}
	ids := make([]string, len(list))
	for i, a := range list {
		if a.Decided {
			t.Errorf("PendingApprovals(%q) lists decided approval %q", sessionID, a.ID)
		}
		ids[i] = a.ID
	}
	return ids
}

// equalApproval compares approvals field by field, times with Equal and
// arguments byte for byte.
func equalApproval(a, b memory.Approval) bool {
	return a.ID == b.ID && a.SessionID == b.SessionID && a.CallID == b.CallID && a.Tool == b.Tool &&
		bytes.Equal(a.Arguments, b.Arguments) && a.Round == b.Round && a.CreatedAt.Equal(b.CreatedAt) &&
		a.Kind == b.Kind && a.Key == b.Key && a.Digest == b.Digest &&
		a.Decided == b.Decided && equalDecision(a.Decision, b.Decision) && a.DecidedAt.Equal(b.DecidedAt)
}

func equalDecision(a, b memory.ApprovalDecision) bool {
	return a.Approved == b.Approved && a.Reason == b.Reason && a.Cause == b.Cause &&
		bytes.Equal(a.Arguments, b.Arguments) && a.Scope == b.Scope && a.Principal == b.Principal && a.Channel == b.Channel
}

func testApprovalRoundTrip(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("Z", 5*3600))
	in := memory.Approval{
		ID: "ap-1", SessionID: "s", CallID: "c1", Tool: "send_mail", Round: 7, CreatedAt: at,
		// Kept byte for byte, spaces and escapes included.
		Arguments: json.RawMessage(` {"to": "a@example.com", "body": "héllo <b> \u00e9\n", "n": [1, 2.50]} `),
	}
	createApproval(t, as, in)
	got := getApproval(t, as, "ap-1")
	want := in
	want.CreatedAt = at
	if !equalApproval(got, want) {
		t.Errorf("GetApproval:\n got %+v\nwant %+v", got, want)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt in %v, want UTC", got.CreatedAt.Location())
	}

	// A zero CreatedAt is set by the store; no arguments stay none.
	before := time.Now()
	createApproval(t, as, memory.Approval{ID: "ap-2", SessionID: "s", CallID: "c2", Tool: "ls"})
	got2 := getApproval(t, as, "ap-2")
	if got2.CreatedAt.IsZero() || got2.CreatedAt.Before(before.Add(-time.Second)) || len(got2.Arguments) != 0 {
		t.Errorf("GetApproval(ap-2) = %+v, want CreatedAt set by the store and no arguments", got2)
	}

	d := memory.ApprovalDecision{Approved: true, Reason: "fine ✓", Cause: "user", Scope: "session",
		Arguments: json.RawMessage(`{"to":  "b@example.com"}`)}
	decided, err := as.DecideApproval(t.Context(), "s", "ap-1", d)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	want.Decided, want.Decision, want.DecidedAt = true, d, decided.DecidedAt
	if decided.DecidedAt.IsZero() || decided.DecidedAt.Location() != time.UTC {
		t.Errorf("DecideApproval: DecidedAt = %v, want the time of the decision in UTC", decided.DecidedAt)
	}
	if !equalApproval(decided, want) {
		t.Errorf("DecideApproval returned:\n got %+v\nwant %+v", decided, want)
	}
	if got := getApproval(t, as, "ap-1"); !equalApproval(got, want) {
		t.Errorf("GetApproval after the decision:\n got %+v\nwant %+v", got, want)
	}
	// A rejection with nothing else set round-trips too.
	rej, err := as.DecideApproval(t.Context(), "s", "ap-2", memory.ApprovalDecision{})
	if err != nil {
		t.Fatalf("DecideApproval(reject): %v", err)
	}
	if got := getApproval(t, as, "ap-2"); !got.Decided || got.Decision.Approved || len(got.Decision.Arguments) != 0 || !got.DecidedAt.Equal(rej.DecidedAt) {
		t.Errorf("GetApproval of a bare rejection = %+v, want decided, not approved, no arguments", got)
	}
}

func testApprovalExists(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	first := approval("a", "s")
	createApproval(t, as, first)
	again := approval("a", "other")
	again.Tool = "changed"
	if err := as.CreateApproval(t.Context(), again); !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateApproval of an existing id: err = %v, want ErrExists", err)
	}
	if got := getApproval(t, as, "a"); got.SessionID != "s" || got.Tool != "tool" {
		t.Errorf("approval after a refused create = %+v, want the first one", got)
	}
	// A decided approval still holds its id.
	if _, err := as.DecideApproval(t.Context(), "s", "a", memory.ApprovalDecision{Approved: true}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if err := as.CreateApproval(t.Context(), approval("a", "s")); !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateApproval of a decided approval's id: err = %v, want ErrExists", err)
	}
}

func testApprovalInvalid(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	bad := map[string]memory.Approval{
		"no id":        {SessionID: "s", CallID: "c", Tool: "t"},
		"no session":   {ID: "x1", CallID: "c", Tool: "t"},
		"no call id":   {ID: "x2", SessionID: "s", Tool: "t"},
		"no tool":      {ID: "x3", SessionID: "s", CallID: "c"},
		"unknown kind": {ID: "x4", SessionID: "s", CallID: "c", Tool: "t", Kind: "Approval"},
		"long key":     {ID: "x5", SessionID: "s", CallID: "c", Tool: "t", Key: strings.Repeat("k", memory.MaxApprovalKey+1)},
		"long digest":  {ID: "x6", SessionID: "s", CallID: "c", Tool: "t", Digest: strings.Repeat("d", 101)},
		"decided, long key": {ID: "x7", SessionID: "s", CallID: "c", Tool: "t", Key: strings.Repeat("k", memory.MaxApprovalKey+1),
			Decided: true, Decision: memory.ApprovalDecision{Approved: true}},
	}
	for name, a := range bad {
		t.Run(name, func(t *testing.T) {
			if err := as.CreateApproval(t.Context(), a); err == nil {
				t.Errorf("CreateApproval(%+v): got nil error", a)
			}
			if a.ID != "" {
				if _, err := as.GetApproval(t.Context(), a.ID); !errors.Is(err, memory.ErrNotFound) {
					t.Errorf("GetApproval after a refused create: err = %v, want ErrNotFound", err)
				}
			}
		})
	}
	if ids := pendingIDs(t, as, ""); len(ids) != 0 {
		t.Errorf("PendingApprovals after refused creates = %v, want none", ids)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); len(got) != 0 {
		t.Errorf("Decisions after refused creates = %v, want none", got)
	}
	// At the limits, and of either kind, records are taken.
	for _, a := range []memory.Approval{
		{ID: "y1", SessionID: "s", CallID: "c", Tool: "t", Kind: memory.KindApproval, Key: strings.Repeat("k", memory.MaxApprovalKey), Digest: strings.Repeat("d", 100)},
		{ID: "y2", SessionID: "s", CallID: "c", Tool: "t", Kind: memory.KindForm},
	} {
		createApproval(t, as, a)
		got := getApproval(t, as, a.ID)
		a.CreatedAt = got.CreatedAt
		if !equalApproval(got, a) {
			t.Errorf("GetApproval(%s) = %+v, want %+v", a.ID, got, a)
		}
	}
}

func testApprovalDecide(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	createApproval(t, as, approval("a", "s"))
	first := memory.ApprovalDecision{Approved: false, Reason: "no", Cause: "user"}
	if _, err := as.DecideApproval(t.Context(), "s", "a", first); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	stood := getApproval(t, as, "a")
	got, err := as.DecideApproval(t.Context(), "s", "a", memory.ApprovalDecision{Approved: true, Reason: "yes"})
	if !errors.Is(err, memory.ErrDecided) {
		t.Fatalf("second DecideApproval: err = %v, want ErrDecided", err)
	}
	if !equalApproval(got, stood) {
		t.Errorf("second DecideApproval returned %+v, want the approval with the decision that stands, %+v", got, stood)
	}
	if after := getApproval(t, as, "a"); !equalApproval(after, stood) {
		t.Errorf("approval after a second decision = %+v, want %+v (the first decision stays)", after, stood)
	}
}

func testApprovalDecideConcurrent(t *testing.T, st memory.Store) {
	const deciders = 16
	as := st.(memory.ApprovalStore)
	createApproval(t, as, approval("a", "s"))
	type result struct {
		d   memory.ApprovalDecision
		a   memory.Approval
		err error
	}
	results := make([]result, deciders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range deciders {
		results[i].d = memory.ApprovalDecision{Approved: i%2 == 0, Reason: fmt.Sprint("decider ", i),
			Arguments: json.RawMessage(fmt.Sprintf(`{"decider":%d}`, i)), Principal: fmt.Sprint("user-", i), Channel: "http"}
		wg.Go(func() {
			<-start
			results[i].a, results[i].err = as.DecideApproval(t.Context(), "s", "a", results[i].d)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, r := range results {
		switch {
		case r.err == nil:
			if winner >= 0 {
				t.Fatalf("deciders %d and %d both won", winner, i)
			}
			winner = i
		case !errors.Is(r.err, memory.ErrDecided):
			t.Errorf("decider %d: err = %v, want nil or ErrDecided", i, r.err)
		}
	}
	if winner < 0 {
		t.Fatalf("no decider won")
	}
	w := results[winner].d
	for i, r := range results {
		if !r.a.Decided || !equalDecision(r.a.Decision, w) {
			t.Errorf("decider %d got decision %+v, want the winner's (%d) %+v", i, r.a.Decision, winner, w)
		}
	}
	if got := getApproval(t, as, "a"); !equalDecision(got.Decision, w) {
		t.Errorf("stored decision %+v, want the winner's %+v", got.Decision, w)
	}
}

func testApprovalWrongSession(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	createApproval(t, as, approval("a", "s"))
	for _, sid := range []string{"other", ""} {
		if _, err := as.DecideApproval(t.Context(), sid, "a", memory.ApprovalDecision{Approved: true}); !errors.Is(err, memory.ErrWrongSession) {
			t.Errorf("DecideApproval from session %q: err = %v, want ErrWrongSession", sid, err)
		}
	}
	if got := getApproval(t, as, "a"); got.Decided {
		t.Errorf("approval after a wrong-session decision = %+v, want pending", got)
	}
	if ids := pendingIDs(t, as, "s"); !slices.Equal(ids, []string{"a"}) {
		t.Errorf("PendingApprovals(s) = %v, want [a]", ids)
	}
	if _, err := as.DecideApproval(t.Context(), "s", "a", memory.ApprovalDecision{Approved: true}); err != nil {
		t.Errorf("DecideApproval from its session afterwards: %v", err)
	}
}

func testApprovalNotFound(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	if _, err := as.GetApproval(t.Context(), "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("GetApproval(unknown): err = %v, want ErrNotFound", err)
	}
	if _, err := as.DecideApproval(t.Context(), "s", "nope", memory.ApprovalDecision{Approved: true}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("DecideApproval(unknown): err = %v, want ErrNotFound", err)
	}
	if _, err := as.GetApproval(t.Context(), "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("GetApproval after deciding an unknown id: err = %v, want ErrNotFound (nothing created)", err)
	}
	if ids := pendingIDs(t, as, "s"); len(ids) != 0 {
		t.Errorf("PendingApprovals of a session without approvals = %v, want none", ids)
	}
}

func testApprovalPending(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	// Ids in the reverse order of creation times, so order by id would fail.
	for i, a := range []struct {
		id, session string
		at          time.Duration
	}{
		{"z", "s", 1 * time.Second},
		{"y", "t", 2 * time.Second},
		{"x", "s", 3 * time.Millisecond},
		{"w", "s", 4 * time.Second},
		{"v", "t", 1 * time.Nanosecond},
	} {
		ap := approval(a.id, a.session)
		ap.CreatedAt = base.Add(a.at).In(time.FixedZone("Q", i*3600))
		createApproval(t, as, ap)
	}
	if got, want := pendingIDs(t, as, "s"), []string{"x", "z", "w"}; !slices.Equal(got, want) {
		t.Errorf("PendingApprovals(s) = %v, want %v (oldest first)", got, want)
	}
	if got, want := pendingIDs(t, as, ""), []string{"v", "x", "z", "y", "w"}; !slices.Equal(got, want) {
		t.Errorf("PendingApprovals(\"\") = %v, want %v (every session, oldest first)", got, want)
	}
	if _, err := as.DecideApproval(t.Context(), "s", "z", memory.ApprovalDecision{Approved: true}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if got, want := pendingIDs(t, as, "s"), []string{"x", "w"}; !slices.Equal(got, want) {
		t.Errorf("PendingApprovals(s) after deciding z = %v, want %v", got, want)
	}
	if got, want := pendingIDs(t, as, ""), []string{"v", "x", "y", "w"}; !slices.Equal(got, want) {
		t.Errorf("PendingApprovals(\"\") after deciding z = %v, want %v", got, want)
	}
	list, err := as.PendingApprovals(t.Context(), "t")
	if err != nil {
		t.Fatalf("PendingApprovals(t): %v", err)
	}
	if len(list) != 2 || list[0].CallID != "call-v" || string(list[0].Arguments) != `{"id": "v"}` || !list[0].CreatedAt.Equal(base.Add(time.Nanosecond)) {
		t.Errorf("PendingApprovals(t) = %+v, want whole approvals v and y", list)
	}
}

func testDeleteSessionApprovals(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	create(t, st, "gone")
	create(t, st, "kept")
	for _, a := range []memory.Approval{approval("g1", "gone"), approval("g2", "gone"), approval("k1", "kept"), approval("n1", "no-session-row")} {
		a.Key = "key-" + a.ID
		createApproval(t, as, a)
	}
	decided := approval("g3", "gone")
	decided.Key, decided.Decided, decided.Decision = "key-g3", true, memory.ApprovalDecision{Principal: "policy:deny"}
	createApproval(t, as, decided)
	if _, err := as.DecideApproval(t.Context(), "gone", "g2", memory.ApprovalDecision{Approved: true}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if err := st.DeleteSession(t.Context(), "gone"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	for _, id := range []string{"g1", "g2", "g3"} {
		if _, err := as.GetApproval(t.Context(), id); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("GetApproval(%s) after its session was deleted: err = %v, want ErrNotFound", id, err)
		}
		if _, err := as.ApprovalByKey(t.Context(), "gone", "key-"+id); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("ApprovalByKey(gone, key-%s) after the session was deleted: err = %v, want ErrNotFound", id, err)
		}
	}
	if got, want := pendingIDs(t, as, ""), []string{"k1", "n1"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("PendingApprovals after delete = %v, want %v", got, want)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); len(got) != 0 {
		t.Errorf("Decisions after delete = %v, want none (the session's went with it)", got)
	}
	if a, err := as.ApprovalByKey(t.Context(), "kept", "key-k1"); err != nil || a.ID != "k1" {
		t.Errorf("ApprovalByKey(kept, key-k1) = %q, %v; want k1, kept with its session", a.ID, err)
	}
	// Its ids and keys are free again.
	again := approval("g1", "gone")
	again.Key = "key-g1"
	createApproval(t, as, again)
}

func testApprovalCopies(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	in := approval("a", "s")
	createApproval(t, as, in)
	in.Arguments[2] = 'X'
	got := getApproval(t, as, "a")
	got.Arguments[2] = 'Y'
	d := memory.ApprovalDecision{Approved: true, Arguments: json.RawMessage(`{"k":1}`)}
	out, err := as.DecideApproval(t.Context(), "s", "a", d)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	d.Arguments[2] = 'X'
	out.Decision.Arguments[2] = 'Y'
	again := getApproval(t, as, "a")
	if string(again.Arguments) != `{"id": "a"}` || string(again.Decision.Arguments) != `{"k":1}` {
		t.Errorf("stored approval changed through a caller's copy: arguments %s, decision arguments %s", again.Arguments, again.Decision.Arguments)
	}

	// Records created decided, and the reads by key and of decisions,
	// copy too.
	in = approval("b", "s")
	in.Key, in.Decided, in.Decision = "kb", true, memory.ApprovalDecision{Arguments: json.RawMessage(`{"k":2}`)}
	createApproval(t, as, in)
	in.Arguments[2], in.Decision.Arguments[2] = 'X', 'X'
	byKey, err := as.ApprovalByKey(t.Context(), "s", "kb")
	if err != nil {
		t.Fatalf("ApprovalByKey: %v", err)
	}
	byKey.Arguments[2], byKey.Decision.Arguments[2] = 'Y', 'Y'
	list, err := as.Decisions(t.Context(), memory.DecisionQuery{})
	if err != nil || len(list) != 2 {
		t.Fatalf("Decisions = %v, %v; want two records", list, err)
	}
	for _, a := range list {
		a.Arguments[2], a.Decision.Arguments[2] = 'Z', 'Z'
	}
	if b := getApproval(t, as, "b"); string(b.Arguments) != `{"id": "b"}` || string(b.Decision.Arguments) != `{"k":2}` {
		t.Errorf("stored approval changed through a caller's copy: arguments %s, decision arguments %s", b.Arguments, b.Decision.Arguments)
	}
	if a := getApproval(t, as, "a"); string(a.Arguments) != `{"id": "a"}` || string(a.Decision.Arguments) != `{"k":1}` {
		t.Errorf("stored approval changed through a copy of Decisions: arguments %s, decision arguments %s", a.Arguments, a.Decision.Arguments)
	}
}

func testApprovalCancelled(t *testing.T, st memory.Store) {
	as := st.(memory.ApprovalStore)
	a := approval("a", "s")
	a.Key = "ka"
	createApproval(t, as, a)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"CreateApproval": func() error { return as.CreateApproval(ctx, approval("b", "s")) },
		"DecideApproval": func() error {
			_, err := as.DecideApproval(ctx, "s", "a", memory.ApprovalDecision{Approved: true})
			return err
		},
		"GetApproval":      func() error { _, err := as.GetApproval(ctx, "a"); return err },
		"PendingApprovals": func() error { _, err := as.PendingApprovals(ctx, ""); return err },
		"ApprovalByKey":    func() error { _, err := as.ApprovalByKey(ctx, "s", "ka"); return err },
		"Decisions":        func() error { _, err := as.Decisions(ctx, memory.DecisionQuery{}); return err },
		"CreateApproval(decided)": func() error {
			a := approval("c", "s")
			a.Decided = true
			return as.CreateApproval(ctx, a)
		},
	}
	for name, call := range calls {
		if err := call(); err == nil {
			t.Errorf("%s with a cancelled context: got nil error", name)
		}
	}
	if got := pendingIDs(t, as, ""); !slices.Equal(got, []string{"a"}) {
		t.Errorf("PendingApprovals after cancelled calls = %v, want [a] still pending", got)
	}
	if got := decisionIDs(t, as, memory.DecisionQuery{}); len(got) != 0 {
		t.Errorf("Decisions after cancelled calls = %v, want none", got)
	}
}

func acquire(t *testing.T, l memory.Leaser, sessionID, holder string, ttl time.Duration) bool {
	t.Helper()
	ok, err := l.AcquireLease(t.Context(), sessionID, holder, ttl)
	if err != nil {
		t.Fatalf("AcquireLease(%q, %q, %s): %v", sessionID, holder, ttl, err)
	}
	return ok
}

func release(t *testing.T, l memory.Leaser, sessionID, holder string) {
	t.Helper()
	if err := l.ReleaseLease(t.Context(), sessionID, holder); err != nil {
		t.Fatalf("ReleaseLease(%q, %q): %v", sessionID, holder, err)
	}
}

func testLeaseHolders(t *testing.T, st memory.Store) {
	l := st.(memory.Leaser)
	const ttl = time.Hour
	if !acquire(t, l, "s", "a", ttl) {
		t.Fatalf("a could not take a free lease")
	}
	if acquire(t, l, "s", "b", ttl) {
		t.Errorf("b took the lease a holds")
	}
	if !acquire(t, l, "s", "a", ttl) {
		t.Errorf("a could not renew its own lease")
	}
	if !acquire(t, l, "other", "b", ttl) {
		t.Errorf("b could not take the free lease of another session")
	}
	release(t, l, "s", "b") // b does not hold it: nothing happens
	if acquire(t, l, "s", "b", ttl) {
		t.Errorf("b took the lease after releasing a lease it did not hold")
	}
	release(t, l, "never-leased", "a")
	release(t, l, "s", "a")
	if !acquire(t, l, "s", "b", ttl) {
		t.Errorf("b could not take the lease a released")
	}
	if acquire(t, l, "s", "a", ttl) {
		t.Errorf("a took the lease b now holds")
	}
	if acquire(t, l, "other", "a", ttl) {
		t.Errorf("a took the lease of the other session, which b holds")
	}
}

// leaseTTL is the lease the expiry tests wait out.
const leaseTTL = 200 * time.Millisecond

// waitLease polls AcquireLease for holder until it succeeds, for at most
// 10s, and returns when it did.
func waitLease(t *testing.T, l memory.Leaser, sessionID, holder string) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for range 1000 {
		if acquire(t, l, sessionID, holder, time.Hour) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s could not take the lease of %q within 10s of its expiry", holder, sessionID)
	return time.Time{}
}

func testLeaseExpiry(t *testing.T, st memory.Store) {
	l := st.(memory.Leaser)
	start := time.Now()
	if !acquire(t, l, "s", "a", leaseTTL) {
		t.Fatalf("a could not take a free lease")
	}
	if acquire(t, l, "s", "b", time.Hour) {
		t.Fatalf("b took a's lease at once")
	}
	got := waitLease(t, l, "s", "b")
	if held := got.Sub(start); held < leaseTTL {
		t.Errorf("b took the lease %s after a took it for %s", held, leaseTTL)
	}
	if acquire(t, l, "s", "a", leaseTTL) {
		t.Errorf("a took the lease back from b")
	}
}

func testLeaseRenew(t *testing.T, st memory.Store) {
	l := st.(memory.Leaser)
	start := time.Now()
	if !acquire(t, l, "s", "a", leaseTTL) {
		t.Fatalf("a could not take a free lease")
	}
	// Renewed for an hour: still a's after the first ttl has passed.
	if !acquire(t, l, "s", "a", time.Hour) {
		t.Fatalf("a could not renew its lease")
	}
	time.Sleep(leaseTTL + 50*time.Millisecond - time.Since(start)) // outlive the first ttl; nothing to wait for but time
	if acquire(t, l, "s", "b", time.Hour) {
		t.Errorf("b took the lease after the first ttl, though a renewed it for an hour")
	}
	// A renewal may also shorten the lease.
	if !acquire(t, l, "s", "a", leaseTTL) {
		t.Fatalf("a could not renew its lease")
	}
	waitLease(t, l, "s", "b")
}

func testLeaseInvalid(t *testing.T, st memory.Store) {
	l := st.(memory.Leaser)
	for _, c := range []struct {
		holder string
		ttl    time.Duration
	}{{"", time.Second}, {"a", 0}, {"a", -time.Second}} {
		if ok, err := l.AcquireLease(t.Context(), "s", c.holder, c.ttl); err == nil || ok {
			t.Errorf("AcquireLease(holder %q, ttl %s) = %v, %v; want an error", c.holder, c.ttl, ok, err)
		}
	}
	if !acquire(t, l, "s", "b", time.Hour) {
		t.Errorf("refused acquisitions took the lease")
	}
}

func testLeaseCancelled(t *testing.T, st memory.Store) {
	l := st.(memory.Leaser)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ok, err := l.AcquireLease(ctx, "s", "a", time.Hour); err == nil || ok {
		t.Errorf("AcquireLease with a cancelled context = %v, %v; want an error", ok, err)
	}
	if !acquire(t, l, "s", "b", time.Hour) {
		t.Errorf("b could not take the lease after a's cancelled acquisition")
	}
	if err := l.ReleaseLease(ctx, "s", "b"); err == nil {
		t.Errorf("ReleaseLease with a cancelled context: got nil error")
	}
	if acquire(t, l, "s", "a", time.Hour) {
		t.Errorf("a took the lease after b's cancelled release")
	}
}

// heard collects the payloads one listener was called with.
type heard struct {
	mu    sync.Mutex
	notes []string
	more  chan struct{} // a token after each note
	stop  func()
}

// listen starts a listener on channel of n; it is stopped when t ends.
func listen(t *testing.T, n memory.Notifier, channel string) *heard {
	t.Helper()
	h := &heard{more: make(chan struct{}, 1)}
	stop, err := n.Listen(t.Context(), channel, func(p string) {
		h.mu.Lock()
		h.notes = append(h.notes, p)
		h.mu.Unlock()
		select {
		case h.more <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatalf("Listen(%q): %v", channel, err)
	}
	h.stop = stop
	t.Cleanup(stop)
	return h
}

func (h *heard) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.notes)
}

// wait returns the notes heard once there are n of them, or what was heard
// after 10s.
func (h *heard) wait(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if got := h.got(); len(got) >= n {
			return got
		}
		select {
		case <-h.more:
		case <-timeout:
			got := h.got()
			t.Errorf("heard %d notes within 10s, want %d: %q", len(got), n, got)
			return got
		}
	}
}

func notify(t *testing.T, n memory.Notifier, channel, payload string) {
	t.Helper()
	if err := n.Notify(t.Context(), channel, payload); err != nil {
		t.Fatalf("Notify(%q, %.40q): %v", channel, payload, err)
	}
}

func testNotifyOrder(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	const count = 200
	a, b := listen(t, n, "c"), listen(t, n, "c")
	want := make([]string, count)
	for i := range want {
		want[i] = fmt.Sprint("note ", i)
		notify(t, n, "c", want[i])
	}
	if got := a.wait(t, count); !slices.Equal(got, want) {
		t.Errorf("first listener heard %q, want %q", got, want)
	}
	if got := b.wait(t, count); !slices.Equal(got, want) {
		t.Errorf("second listener heard %q, want %q", got, want)
	}
}

func testNotifyPayloads(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	h := listen(t, n, "c")
	ctx := t.Context()
	if err := n.Notify(ctx, "c", ""); err == nil {
		t.Errorf("Notify of an empty payload: got nil error")
	}
	if err := n.Notify(ctx, "c", strings.Repeat("x", memory.MaxNotifyPayload+1)); err == nil {
		t.Errorf("Notify of %d bytes: got nil error", memory.MaxNotifyPayload+1)
	}
	if err := n.Notify(ctx, "", "x"); err == nil {
		t.Errorf("Notify on an empty channel: got nil error")
	}
	if stop, err := n.Listen(ctx, "", func(string) {}); err == nil {
		stop()
		t.Errorf("Listen on an empty channel: got nil error")
	}
	if stop, err := n.Listen(ctx, "c", nil); err == nil {
		stop()
		t.Errorf("Listen with a nil function: got nil error")
	}
	largest := strings.Repeat("0123456789", memory.MaxNotifyPayload/10)[:memory.MaxNotifyPayload]
	odd := `{"approval": "ap-1", "text": "héllo 世界 \"quoted\" \\ ' ;"}`
	notify(t, n, "c", largest)
	notify(t, n, "c", odd)
	got := h.wait(t, 2)
	if len(got) != 2 || got[0] != largest || got[1] != odd {
		t.Errorf("heard %d notes (first of %d bytes), want the largest payload (%d bytes) then %q", len(got), len(got[0]), len(largest), odd)
	}
}

func testNotifyStop(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	var late atomic.Int32
	var stopped atomic.Bool
	stop, err := n.Listen(t.Context(), "c", func(p string) {
		if stopped.Load() {
			late.Add(1)
		}
	})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	witness := listen(t, n, "c")
	notify(t, n, "c", "before")
	witness.wait(t, 1)
	// Notes queued for the listener when stop is called are not delivered
	// once it has returned.
	for i := range 50 {
		notify(t, n, "c", fmt.Sprint("racing ", i))
	}
	stop()
	stopped.Store(true)
	stop() // a second stop does nothing
	for i := range 20 {
		notify(t, n, "c", fmt.Sprint("after ", i))
	}
	witness.wait(t, 71)
	if c := late.Load(); c != 0 {
		t.Errorf("the listener was called %d times after stop returned", c)
	}
	// The channel still works for a new listener.
	again := listen(t, n, "c")
	notify(t, n, "c", "again")
	if got := again.wait(t, 1); !slices.Equal(got, []string{"again"}) {
		t.Errorf("a new listener heard %q, want [again]", got)
	}
}

func testNotifyChannels(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	x, y := listen(t, n, "x"), listen(t, n, "y")
	notify(t, n, "x", "1")
	notify(t, n, "y", "2")
	notify(t, n, "nobody", "3")
	notify(t, n, "x", "end")
	notify(t, n, "y", "end")
	if got := x.wait(t, 2); !slices.Equal(got, []string{"1", "end"}) {
		t.Errorf("channel x heard %q, want [1 end]", got)
	}
	if got := y.wait(t, 2); !slices.Equal(got, []string{"2", "end"}) {
		t.Errorf("channel y heard %q, want [2 end]", got)
	}
	// A note sent before Listen is not delivered to it.
	z := listen(t, n, "nobody")
	notify(t, n, "nobody", "4")
	if got := z.wait(t, 1); !slices.Equal(got, []string{"4"}) {
		t.Errorf("late listener heard %q, want [4]", got)
	}
}

func testNotifyOneAtATime(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	var in, most atomic.Int32
	var calls atomic.Int32
	done := make(chan struct{})
	const count = 100
	stop, err := n.Listen(t.Context(), "c", func(string) {
		now := in.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(100 * time.Microsecond) // widen the window for a second caller
		in.Add(-1)
		if calls.Add(1) == count {
			close(done)
		}
	})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer stop()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range count / 4 {
				if err := n.Notify(t.Context(), "c", fmt.Sprint(w, "/", i)); err != nil {
					t.Errorf("Notify: %v", err)
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("heard %d of %d notes within 10s", calls.Load(), count)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("the listener ran %d times at once, want one at a time", m)
	}
}

func testNotifyCancelled(t *testing.T, st memory.Store) {
	n := st.(memory.Notifier)
	h := listen(t, n, "c")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := n.Notify(ctx, "c", "lost"); err == nil {
		t.Errorf("Notify with a cancelled context: got nil error")
	}
	if stop, err := n.Listen(ctx, "c", func(string) {}); err == nil {
		stop()
		t.Errorf("Listen with a cancelled context: got nil error")
	}
	notify(t, n, "c", "kept")
	if got := h.wait(t, 1); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("heard %q, want [kept] (the cancelled note not sent)", got)
	}
}
