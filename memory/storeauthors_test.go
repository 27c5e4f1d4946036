package memory_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

// A case of one check: what the helper for store authors says of an input
// (want "" when it accepts it), and, for an input it refuses, what MemStore
// says when given the same input, so that MemStore is seen to make the
// check every store makes.
type check struct {
	name   string
	helper func() error                                    // the exported helper on the input
	mem    func(st *memory.MemStore, session string) error // MemStore's method on it; nil when none applies
	want   string                                          // a part of the error, "" for none
}

var (
	ctx       = context.Background()
	farFuture = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	assistant = memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{
		{ID: "c1", Name: "get_time", Arguments: []byte(`{}`)},
		{ID: "c2", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)},
	}}
)

func sessionCases() []check {
	c := func(name string, s memory.Session, want string) check {
		return check{name, func() error { return memory.ValidateSession(s) },
			func(st *memory.MemStore, _ string) error { _, err := st.CreateSession(ctx, s); return err }, want}
	}
	return []check{
		c("session: zero", memory.Session{}, ""),
		c("session: times", memory.Session{ID: "s", CreatedAt: time.Now(), UpdatedAt: time.Now()}, ""),
		c("session: created far ahead", memory.Session{CreatedAt: farFuture}, "created_at"),
		c("session: updated far ahead", memory.Session{UpdatedAt: farFuture}, "updated_at"),
	}
}

func messageCases() []check {
	c := func(name string, msgs []memory.Message, want string) check {
		return check{name, func() error { return memory.ValidateMessages(msgs) },
			func(st *memory.MemStore, id string) error { _, err := st.Append(ctx, id, msgs...); return err }, want}
	}
	png := memory.Image{MIMEType: "image/png", Data: []byte("png")}
	return []check{
		c("messages: none", nil, ""),
		c("messages: a conversation", []memory.Message{{Role: memory.RoleUser, Content: "hi", Images: []memory.Image{png}}, assistant,
			{Role: memory.RoleTool, ToolCallID: "c1", Outcome: memory.OutcomeResult}}, ""),
		c("messages: role", []memory.Message{{Role: "robot"}}, `message 0: invalid role "robot"`),
		c("messages: archived", []memory.Message{{Role: memory.RoleUser, SummaryID: 3}}, "SummaryID is set"),
		c("messages: arguments", []memory.Message{{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Arguments: []byte(`[1]`)}}}}, "not a JSON object"),
		c("messages: outcome on a user message", []memory.Message{{Role: memory.RoleUser, Outcome: memory.OutcomeResult}}, "only tool messages"),
		c("messages: unknown outcome", []memory.Message{{Role: memory.RoleTool, Outcome: "maybe"}}, "unknown outcome"),
		c("messages: cause without rejection", []memory.Message{{Role: memory.RoleTool, Outcome: memory.OutcomeResult, Cause: "timeout"}}, "without the outcome"),
		c("messages: image on an assistant message", []memory.Message{{Role: memory.RoleAssistant, Images: []memory.Image{png}}}, "only user messages carry images"),
		c("messages: invalid image", []memory.Message{{Role: memory.RoleUser, Images: []memory.Image{{}}}}, "image 0: image has neither URL nor Data"),
		c("messages: created far ahead", []memory.Message{{Role: memory.RoleUser, CreatedAt: farFuture}}, "message 0: created_at"),
	}
}

func summaryCases() []check {
	c := func(name string, s memory.Summary, want string) check {
		mem := func(st *memory.MemStore, id string) error { _, err := st.Summarize(ctx, id, s); return err }
		if want == "" {
			mem = nil // a valid summary of messages the session does not hold is still refused
		}
		return check{name, func() error { return memory.ValidateSummary(s) }, mem, want}
	}
	return []check{
		c("summary: valid", memory.Summary{Content: "they said hi", FirstID: 1, LastID: 2}, ""),
		c("summary: blank", memory.Summary{Content: " \n", FirstID: 1, LastID: 2}, "empty summary content"),
		c("summary: no range", memory.Summary{Content: "x"}, "invalid message range [0, 0]"),
		c("summary: reversed range", memory.Summary{Content: "x", FirstID: 3, LastID: 2}, "invalid message range [3, 2]"),
		c("summary: created far ahead", memory.Summary{Content: "x", FirstID: 1, LastID: 1, CreatedAt: farFuture}, "created_at"),
	}
}

func callCases() []check {
	save := func(name string, oc memory.OpenCall, want string) check {
		mem := func(st *memory.MemStore, id string) error { return st.SaveCall(ctx, id, oc) }
		if want == "" {
			mem = nil // valid, but the session holds no message 1
		}
		return check{name, func() error { return memory.ValidateOpenCall(oc) }, mem, want}
	}
	appendCalls := func(name string, calls []memory.OpenCall, msgs []memory.Message, want string) check {
		return check{name, func() error { return memory.ValidateAppendCalls(calls, msgs) },
			func(st *memory.MemStore, id string) error {
				_, err := st.AppendCalls(ctx, id, calls, msgs...)
				return err
			}, want}
	}
	return []check{
		save("open call: valid", memory.OpenCall{MessageID: 1, CallID: "c1", Arguments: []byte(`{"a":1}`), State: "task-7"}, ""),
		save("open call: no message", memory.OpenCall{CallID: "c1"}, "message id 0"),
		save("open call: no call id", memory.OpenCall{MessageID: 1}, "without a call id"),
		save("open call: arguments", memory.OpenCall{MessageID: 1, CallID: "c1", Arguments: []byte(`"a"`)}, "not a JSON object"),
		save("open call: state", memory.OpenCall{MessageID: 1, CallID: "c1", State: strings.Repeat("s", memory.MaxCallState+1)}, "state of 4097 bytes"),

		appendCalls("append calls: valid", []memory.OpenCall{{CallID: "c1"}, {CallID: "c2", Round: 1}}, []memory.Message{{Role: memory.RoleUser}, assistant}, ""),
		appendCalls("append calls: invalid message", nil, []memory.Message{{Role: "robot"}}, "invalid role"),
		appendCalls("append calls: no messages", []memory.OpenCall{{CallID: "c1"}}, nil, "no messages"),
		appendCalls("append calls: last is a user message", []memory.OpenCall{{CallID: "c1"}}, []memory.Message{assistant, {Role: memory.RoleUser}}, "the last message is a user message"),
		appendCalls("append calls: unknown call", []memory.OpenCall{{CallID: "c9"}}, []memory.Message{assistant}, `open call "c9"`),
		appendCalls("append calls: twice", []memory.OpenCall{{CallID: "c1"}, {CallID: "c1"}}, []memory.Message{assistant}, `open call "c1"`),
		appendCalls("append calls: arguments", []memory.OpenCall{{CallID: "c1", Arguments: []byte(`{}`)}}, []memory.Message{assistant}, "the appended message holds them"),
		appendCalls("append calls: state", []memory.OpenCall{{CallID: "c1", State: strings.Repeat("s", memory.MaxCallState+1)}}, []memory.Message{assistant}, "at most 4096"),
	}
}

func approvalCases() []check {
	c := func(name string, a memory.Approval, want string) check {
		return check{name, func() error { return memory.ValidateApproval(a) },
			func(st *memory.MemStore, _ string) error { return st.CreateApproval(ctx, a) }, want}
	}
	ok := memory.Approval{ID: "a1", SessionID: "s", CallID: "c1", Tool: "get_time"}
	with := func(f func(*memory.Approval)) memory.Approval { a := ok; f(&a); return a }
	return []check{
		c("approval: valid", ok, ""),
		c("approval: form, decided", with(func(a *memory.Approval) { a.ID, a.Kind, a.Decided = "a2", memory.KindForm, true }), ""),
		c("approval: no id", with(func(a *memory.Approval) { a.ID = "" }), "without an id"),
		c("approval: no session", with(func(a *memory.Approval) { a.SessionID = "" }), "without a session"),
		c("approval: no tool", with(func(a *memory.Approval) { a.Tool = "" }), "without its call id or tool"),
		c("approval: kind", with(func(a *memory.Approval) { a.Kind = "vote" }), `of kind "vote"`),
		c("approval: key", with(func(a *memory.Approval) { a.Key = strings.Repeat("k", memory.MaxApprovalKey+1) }), "key of 513 bytes"),
		c("approval: digest", with(func(a *memory.Approval) { a.Digest = strings.Repeat("d", 101) }), "digest of 101 bytes"),
	}
}

func noteCases() []check {
	c := func(name, channel, payload, want string) check {
		return check{name, func() error { return memory.ValidateNote(channel, payload) },
			func(st *memory.MemStore, _ string) error { return st.Notify(ctx, channel, payload) }, want}
	}
	return []check{
		c("note: valid", "approvals", "a1", ""),
		c("note: longest", "approvals", strings.Repeat("p", memory.MaxNotifyPayload), ""),
		c("note: no channel", "", "a1", "empty channel name"),
		c("note: no payload", "approvals", "", "empty payload"),
		c("note: payload too long", "approvals", strings.Repeat("p", memory.MaxNotifyPayload+1), "payload of 7001 bytes"),
	}
}

func eventCases() []check {
	c := func(name string, evs []memory.Event, want string) check {
		return check{name, func() error { return memory.ValidateEvents(evs) },
			func(st *memory.MemStore, id string) error { return st.AppendEvents(ctx, id, evs...) }, want}
	}
	return []check{
		c("events: none", nil, ""),
		c("events: a turn", []memory.Event{{Seq: 1, Turn: 1, Kind: "turn"}, {Seq: 2, Turn: 1, Kind: "text", Data: []byte(`"hi"`)}}, ""),
		c("events: seq 0", []memory.Event{{Seq: 0, Kind: "turn"}}, "seq 0, want 1 or more"),
		c("events: gap", []memory.Event{{Seq: 1, Kind: "a"}, {Seq: 3, Kind: "b"}}, "seq 3 after 1"),
		c("events: turn ahead", []memory.Event{{Seq: 1, Turn: 2, Kind: "a"}}, "turn 2"),
		c("events: no kind", []memory.Event{{Seq: 1}}, "empty kind"),
		c("events: control in kind", []memory.Event{{Seq: 1, Kind: "a\nb"}}, "control character"),
		c("events: kind too long", []memory.Event{{Seq: 1, Kind: strings.Repeat("k", memory.MaxEventKind+1)}}, "kind of 65 bytes"),
		c("events: created far ahead", []memory.Event{{Seq: 1, Kind: "a", CreatedAt: farFuture}}, "created_at"),
	}
}

func kvCases() []check {
	c := func(name, ns, key string, value []byte, want string) check {
		return check{name, func() error { return memory.ValidateKV(ns, key, value) },
			func(st *memory.MemStore, _ string) error { return st.PutValue(ctx, ns, key, value) }, want}
	}
	return []check{
		c("kv: valid", "mcp.pins", "user 1/server", []byte("v"), ""),
		c("kv: nil value", "mcp.pins", "k", nil, ""),
		c("kv: longest", strings.Repeat("n", memory.MaxKVNamespace), strings.Repeat("k", memory.MaxKVKey), make([]byte, memory.MaxKVValue), ""),
		c("kv: no namespace", "", "k", nil, "empty namespace"),
		c("kv: no key", "n", "", nil, "empty key"),
		c("kv: namespace too long", strings.Repeat("n", memory.MaxKVNamespace+1), "k", nil, "namespace of 65 bytes"),
		c("kv: key too long", "n", strings.Repeat("k", memory.MaxKVKey+1), nil, "key of 513 bytes"),
		c("kv: NUL in key", "n", "a\x00b", nil, "without NUL bytes"),
		c("kv: invalid UTF-8", "n\xff", "k", nil, "not UTF-8 text"),
		c("kv: value too long", "n", "k", make([]byte, memory.MaxKVValue+1), "value of 1048577 bytes"),
	}
}

func apiCallCases() []check {
	c := func(name string, a memory.APICall, want string) check {
		return check{name, func() error { return memory.ValidateAPICall(a) },
			func(st *memory.MemStore, _ string) error { _, err := st.AppendAPICall(ctx, a); return err }, want}
	}
	ok := memory.APICall{Purpose: memory.PurposePlanning, Status: memory.APICallOK, Request: []byte(`{"model":"m"}`), Latency: time.Second}
	with := func(f func(*memory.APICall)) memory.APICall { a := ok; f(&a); return a }
	return []check{
		c("api call: valid", ok, ""),
		c("api call: error", with(func(a *memory.APICall) { a.Status, a.Error = memory.APICallError, "503" }), ""),
		c("api call: purpose", with(func(a *memory.APICall) { a.Purpose = "fun" }), `unknown purpose "fun"`),
		c("api call: status", with(func(a *memory.APICall) { a.Status = "meh" }), `unknown status "meh"`),
		c("api call: error with ok", with(func(a *memory.APICall) { a.Error = "503" }), "an error with status ok"),
		c("api call: request", with(func(a *memory.APICall) { a.Request = []byte("{") }), "not JSON"),
		c("api call: latency", with(func(a *memory.APICall) { a.Latency = -1 }), "negative duration"),
		c("api call: round", with(func(a *memory.APICall) { a.Round = -1 }), "round -1"),
		c("api call: started far ahead", with(func(a *memory.APICall) { a.Started = farFuture }), "started"),
	}
}

// Every check accepts what it should, refuses what it should with a clear
// error, and MemStore refuses the same input with the same error, wrapped.
func TestChecks(t *testing.T) {
	var cases []check
	for _, f := range []func() []check{sessionCases, messageCases, summaryCases, callCases, approvalCases, noteCases, eventCases, kvCases, apiCallCases} {
		cases = append(cases, f()...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			helperErr := c.helper()
			if c.want == "" {
				require.NoError(t, helperErr)
			} else {
				require.ErrorContains(t, helperErr, c.want)
			}
			if c.mem == nil {
				return
			}
			st := new(memory.MemStore)
			s, err := st.CreateSession(ctx, memory.Session{ID: "existing"})
			require.NoError(t, err)
			memErr := c.mem(st, s.ID)
			if c.want == "" {
				assert.NoError(t, memErr, "MemStore refuses what the helper accepts")
				return
			}
			require.Error(t, memErr, "MemStore accepts what the helper refuses (%v)", helperErr)
			assert.Contains(t, memErr.Error(), helperErr.Error(), "MemStore's error does not hold the helper's")
		})
	}
}

func TestNewSessionID(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		id := memory.NewSessionID()
		b, err := hex.DecodeString(id)
		require.NoError(t, err, "id %q", id)
		require.Len(t, b, 16, "id %q: want 128 bits", id)
		require.False(t, seen[id], "id %q twice", id)
		seen[id] = true
	}
	// MemStore gives the same kind of id to a session created without one.
	s, err := new(memory.MemStore).CreateSession(ctx, memory.Session{})
	require.NoError(t, err)
	b, err := hex.DecodeString(s.ID)
	require.NoError(t, err, "MemStore's id %q", s.ID)
	assert.Len(t, b, 16, "MemStore's id %q", s.ID)
}

func TestCloneMessages(t *testing.T) {
	assert.Empty(t, memory.CloneMessages(nil))
	orig := []memory.Message{
		{Role: memory.RoleUser, Content: "look", Images: []memory.Image{{MIMEType: "image/png", Data: []byte("png")}}},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}},
	}
	clone := memory.CloneMessages(orig)
	require.Equal(t, orig, clone)

	// Change every byte the clone holds: the original keeps its own.
	clone[0].Content = "changed"
	clone[0].Images[0].Data[0] = 'X'
	clone[1].ToolCalls[0].Name = "rm"
	clone[1].ToolCalls[0].Arguments[2] = 'X'
	assert.Equal(t, "look", orig[0].Content)
	assert.Equal(t, "png", string(orig[0].Images[0].Data))
	assert.Equal(t, "get_weather", orig[1].ToolCalls[0].Name)
	assert.JSONEq(t, `{"city":"Paris"}`, string(orig[1].ToolCalls[0].Arguments))
}
