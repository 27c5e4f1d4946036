// Package storetest is a conformance suite for implementations of
// [memory.Store].
//
// The functions a store calls inside its methods (the checks of its input,
// session ids, copies) are in package memory, whose documentation says
// under "For store authors" which method calls which. A store author calls [Run] from an
// ordinary test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) memory.Store { return newMyStore(t) })
//	}
//
// The suite checks the contract written on [memory.Store]: session CRUD,
// [memory.ErrNotFound] on every method, atomic and ordered appends, messages
// that come back whole (tool calls, images, how tool calls ended),
// active versus archived messages, summarisation, copies instead of
// aliases, concurrent appends and cancelled contexts. It runs in bounded
// time and starts no goroutine that outlives it.
//
// A store that also implements the optional interfaces of durable runs
// ([memory.CallLog], [memory.ApprovalStore], [memory.Leaser],
// [memory.Notifier], [memory.EventLog]) calls [RunDurable], which tests
// those it implements; when its notes travel between processes,
// [RunNotifierPair] with two handles on one backing store, and when its
// event logs are shared between processes, [RunEventLogPair]. A store that
// keeps a log of model calls ([memory.APILog]) calls [RunAPILog].
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// Run runs the conformance suite as subtests of t. newStore must return a
// new, empty store for each call; it should register its own clean-up with
// t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) memory.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, st memory.Store)
	}{
		{"Sessions", testSessions},
		{"NotFound", testNotFound},
		{"AppendOrder", testAppendOrder},
		{"AppendInvalid", testAppendInvalid},
		{"RoundTrip", testRoundTrip},
		{"Summarize", testSummarize},
		{"SummarizeInvalid", testSummarizeInvalid},
		{"SummarizeInterleaved", testSummarizeInterleaved},
		{"Delete", testDelete},
		{"Copies", testCopies},
		{"Concurrent", testConcurrent},
		{"Cancelled", testCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func create(t *testing.T, st memory.Store, id string) memory.Session {
	t.Helper()
	s, err := st.CreateSession(t.Context(), memory.Session{ID: id})
	if err != nil {
		t.Fatalf("CreateSession(%q): %v", id, err)
	}
	return s
}

func appendMsgs(t *testing.T, st memory.Store, id string, msgs ...memory.Message) []memory.Message {
	t.Helper()
	out, err := st.Append(t.Context(), id, msgs...)
	if err != nil {
		t.Fatalf("Append(%q): %v", id, err)
	}
	return out
}

func messages(t *testing.T, st memory.Store, id string, all bool) []memory.Message {
	t.Helper()
	out, err := st.Messages(t.Context(), id, all)
	if err != nil {
		t.Fatalf("Messages(%q, %v): %v", id, all, err)
	}
	return out
}

func user(text string) memory.Message { return memory.Message{Role: memory.RoleUser, Content: text} }

func contents(msgs []memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

func testSessions(t *testing.T, st memory.Store) {
	ctx := t.Context()
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	a, err := st.CreateSession(ctx, memory.Session{ID: "a", Title: "first", CreatedAt: at})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if !a.CreatedAt.Equal(at) || a.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want %v in UTC", a.CreatedAt, at)
	}
	if !a.UpdatedAt.Equal(at) {
		t.Errorf("UpdatedAt = %v, want CreatedAt %v", a.UpdatedAt, at)
	}
	gen, err := st.CreateSession(ctx, memory.Session{})
	if err != nil {
		t.Fatalf("CreateSession with empty id: %v", err)
	}
	if gen.ID == "" || gen.CreatedAt.IsZero() {
		t.Errorf("CreateSession with empty id = %+v, want generated id and time", gen)
	}
	if _, err := st.CreateSession(ctx, memory.Session{ID: "a"}); err == nil {
		t.Errorf("CreateSession of an existing id: got nil error")
	} else if !errors.Is(err, memory.ErrExists) {
		t.Errorf("CreateSession of an existing id: err = %v, want ErrExists", err)
	}
	got, err := st.Session(ctx, "a")
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	if got.ID != "a" || got.Title != "first" || !got.CreatedAt.Equal(at) {
		t.Errorf("Session = %+v, want id a, title first, created %v", got, at)
	}
	if err := st.RenameSession(ctx, "a", "renamed"); err != nil {
		t.Fatalf("RenameSession: %v", err)
	}
	if got, _ := st.Session(ctx, "a"); got.Title != "renamed" {
		t.Errorf("Title after rename = %q, want %q", got.Title, "renamed")
	}
	// Appending to gen makes it the most recently updated.
	time.Sleep(2 * time.Millisecond) // distinct UpdatedAt on coarse clocks
	appendMsgs(t, st, gen.ID, user("hi"))
	list, err := st.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if want := []string{gen.ID, "a"}; !slices.Equal(ids, want) {
		t.Errorf("Sessions ids = %v, want %v (most recently updated first)", ids, want)
	}
}

func testNotFound(t *testing.T, st memory.Store) {
	ctx := t.Context()
	const id = "no-such-session"
	calls := []struct {
		name string
		call func() error
	}{
		{"Session", func() error { _, err := st.Session(ctx, id); return err }},
		{"RenameSession", func() error { return st.RenameSession(ctx, id, "x") }},
		{"DeleteSession", func() error { return st.DeleteSession(ctx, id) }},
		{"Append", func() error { _, err := st.Append(ctx, id, user("x")); return err }},
		{"AppendNone", func() error { _, err := st.Append(ctx, id); return err }},
		{"Messages", func() error { _, err := st.Messages(ctx, id, false); return err }},
		{"MessagesAll", func() error { _, err := st.Messages(ctx, id, true); return err }},
		{"Summarize", func() error {
			_, err := st.Summarize(ctx, id, memory.Summary{Content: "s", FirstID: 1, LastID: 1})
			return err
		}},
		{"Summaries", func() error { _, err := st.Summaries(ctx, id); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, memory.ErrNotFound) {
				t.Errorf("%s(unknown session): err = %v, want ErrNotFound", c.name, err)
			}
		})
	}
}

func testAppendOrder(t *testing.T, st memory.Store) {
	create(t, st, "s")
	create(t, st, "other")
	first := appendMsgs(t, st, "s", user("1"), user("2"), user("3"))
	appendMsgs(t, st, "other", user("x"))
	second := appendMsgs(t, st, "s", user("4"))
	if none := appendMsgs(t, st, "s"); len(none) != 0 {
		t.Errorf("Append of nothing returned %d messages", len(none))
	}
	all := append(first, second...)
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Fatalf("ids not increasing: %d then %d", all[i-1].ID, all[i].ID)
		}
	}
	got := messages(t, st, "s", false)
	if want := []string{"1", "2", "3", "4"}; !slices.Equal(contents(got), want) {
		t.Errorf("Messages = %v, want %v", contents(got), want)
	}
	for i := range got {
		if got[i].ID != all[i].ID {
			t.Errorf("message %d: stored id %d, Append returned %d", i, got[i].ID, all[i].ID)
		}
		if got[i].CreatedAt.IsZero() {
			t.Errorf("message %d: zero CreatedAt", i)
		}
	}
}

func testAppendInvalid(t *testing.T, st memory.Store) {
	create(t, st, "s")
	appendMsgs(t, st, "s", user("kept"))
	bad := []struct {
		name string
		msgs []memory.Message
	}{
		{"role", []memory.Message{user("ok"), {Role: "robot", Content: "x"}}},
		{"empty role", []memory.Message{{Content: "x"}}},
		{"archived", []memory.Message{user("ok"), {Role: memory.RoleUser, Content: "x", SummaryID: 7}}},
		{"arguments cut short", []memory.Message{user("ok"), {Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f", Arguments: json.RawMessage(`{"city": "Par`)}}}}},
		{"arguments not an object", []memory.Message{{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f", Arguments: json.RawMessage(`["x"]`)}}}}},
		{"image without data", []memory.Message{user("ok"), {Role: memory.RoleUser, Images: []memory.Image{{MIMEType: "image/png", Data: []byte{}}}}}},
		{"image on an assistant message", []memory.Message{user("ok"), {Role: memory.RoleAssistant, Images: []memory.Image{{URL: "https://example.com/a.png"}}}}},
		{"image too large", []memory.Message{{Role: memory.RoleUser, Images: []memory.Image{{MIMEType: "image/png", Data: make([]byte, memory.MaxImageSize+1)}}}}},
		{"outcome on an assistant message", []memory.Message{user("ok"), {Role: memory.RoleAssistant, Content: "x", Outcome: memory.OutcomeResult}}},
		{"unknown outcome", []memory.Message{user("ok"), {Role: memory.RoleTool, ToolCallID: "c", Content: "x", Outcome: "done"}}},
		{"cause of a result", []memory.Message{user("ok"), {Role: memory.RoleTool, ToolCallID: "c", Content: "x", Outcome: memory.OutcomeResult, Cause: "user"}}},
		{"cause without an outcome", []memory.Message{user("ok"), {Role: memory.RoleTool, ToolCallID: "c", Content: "x", Cause: "user"}}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if _, err := st.Append(t.Context(), "s", b.msgs...); err == nil {
				t.Errorf("Append(%s): got nil error", b.name)
			}
			if got := contents(messages(t, st, "s", true)); !slices.Equal(got, []string{"kept"}) {
				t.Errorf("after failed Append: messages %v, want only [kept] (all or nothing)", got)
			}
		})
	}
}

func testRoundTrip(t *testing.T, st memory.Store) {
	create(t, st, "s")
	at := time.Date(2025, 1, 2, 3, 4, 5, 987654321, time.FixedZone("Y", -7*3600))
	in := []memory.Message{
		{Role: memory.RoleSystem, Content: "sys"},
		{Role: memory.RoleUser, Content: "héllo 世界 \x00 \"quoted\"", CreatedAt: at},
		{Role: memory.RoleAssistant, Content: "calling <need_tool>", ToolCalls: []memory.ToolCall{
			{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			{ID: "c2", Name: "run", Arguments: json.RawMessage(` {"cmd": "a <b> && c", "n": [1, 2.5e3, null], "é": {}} `)},
			{ID: "c3", Name: "wrapped", Arguments: memory.ValidArguments([]byte(`{"unterminated`))},
			{ID: "c4", Name: "none"},
			{ID: "c5", Name: "run"},
			{ID: "c6", Name: "run"},
		}},
		// How each call ended: a result, rejections with their causes
		// (one this version does not know, kept as it is), and unknown.
		{Role: memory.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: "sunny", Outcome: memory.OutcomeResult},
		{Role: memory.RoleTool, ToolCallID: "c2", Name: "run", Content: "", Outcome: memory.OutcomeRejected, Cause: "user"},
		{Role: memory.RoleTool, ToolCallID: "c3", Name: "wrapped", Content: "invalid", Outcome: memory.OutcomeRejected, Cause: "invalid_arguments"},
		{Role: memory.RoleTool, ToolCallID: "c4", Name: "none", Content: "ok"},
		{Role: memory.RoleTool, ToolCallID: "c5", Name: "run", Content: "a.txt\n[tool call interrupted]", Outcome: memory.OutcomeRejected, Cause: "a cause from \x00 elsewhere é"},
		{Role: memory.RoleTool, ToolCallID: "c6", Name: "run", Content: "rejected", Outcome: memory.OutcomeRejected},
		{Role: memory.RoleUser, Content: "[hook]", Hook: true},
		{Role: memory.RoleUser, Content: "what is this?", Images: []memory.Image{
			{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\xff bytes")},
			{URL: "https://example.com/cat.jpg"},
			{URL: "https://example.com/dog", MIMEType: "image/webp"},
			{URL: "data:image/gif;base64,R0lGODlhAQABAAAAACw="},
		}},
		{Role: memory.RoleUser, Images: []memory.Image{{MIMEType: "image/jpeg", Data: []byte{0}}}},
	}
	out := appendMsgs(t, st, "s", in...)
	got := messages(t, st, "s", true)
	if len(got) != len(in) {
		t.Fatalf("got %d messages, want %d", len(got), len(in))
	}
	for i := range in {
		want := in[i]
		want.ID = out[i].ID
		if want.CreatedAt.IsZero() {
			want.CreatedAt = out[i].CreatedAt
		}
		if !equalMessage(got[i], want) {
			t.Errorf("message %d:\n got %+v\nwant %+v", i, got[i], want)
		}
		if got[i].CreatedAt.Location() != time.UTC {
			t.Errorf("message %d: CreatedAt in %v, want UTC", i, got[i].CreatedAt.Location())
		}
		if !got[i].CreatedAt.Equal(out[i].CreatedAt) {
			t.Errorf("message %d: stored CreatedAt %v, Append returned %v", i, got[i].CreatedAt, out[i].CreatedAt)
		}
	}
	if !got[1].CreatedAt.Equal(at) {
		t.Errorf("explicit CreatedAt = %v, want %v (sub-second precision kept)", got[1].CreatedAt, at)
	}
}

// equalMessage compares messages with time.Time.Equal, nil and empty
// tool-call lists as equal, and tool-call arguments as JSON values (a store
// may reformat them).
func equalMessage(a, b memory.Message) bool {
	return a.ID == b.ID && a.Role == b.Role && a.Content == b.Content &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, equalCall) && slices.EqualFunc(a.Images, b.Images, equalImage) &&
		a.ToolCallID == b.ToolCallID &&
		a.Name == b.Name && a.CreatedAt.Equal(b.CreatedAt) && a.Hook == b.Hook &&
		a.SummaryID == b.SummaryID && a.Outcome == b.Outcome && a.Cause == b.Cause
}

// equalImage compares images, their bytes exactly.
func equalImage(a, b memory.Image) bool {
	return a.URL == b.URL && a.MIMEType == b.MIMEType && bytes.Equal(a.Data, b.Data)
}

// equalCall compares tool calls, their arguments as JSON values; empty
// arguments equal only empty ones.
func equalCall(a, b memory.ToolCall) bool {
	if a.ID != b.ID || a.Name != b.Name || (len(a.Arguments) == 0) != (len(b.Arguments) == 0) {
		return false
	}
	if len(a.Arguments) == 0 {
		return true
	}
	var x, y any
	return json.Unmarshal(a.Arguments, &x) == nil && json.Unmarshal(b.Arguments, &y) == nil && reflect.DeepEqual(x, y)
}

func testSummarize(t *testing.T, st memory.Store) {
	ctx := t.Context()
	create(t, st, "s")
	var in []memory.Message
	for i := range 8 {
		in = append(in, user(fmt.Sprint(i)))
	}
	m := appendMsgs(t, st, "s", in...)

	s1, err := st.Summarize(ctx, "s", memory.Summary{Content: "zero to two", FirstID: m[0].ID, LastID: m[2].ID})
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	if s1.ID == 0 || s1.CreatedAt.IsZero() || s1.Content != "zero to two" || s1.FirstID != m[0].ID || s1.LastID != m[2].ID {
		t.Errorf("Summarize returned %+v", s1)
	}
	if got, want := contents(messages(t, st, "s", false)), []string{"3", "4", "5", "6", "7"}; !slices.Equal(got, want) {
		t.Errorf("active after first summary = %v, want %v", got, want)
	}
	// An overlapping range archives only what is still active.
	s2, err := st.Summarize(ctx, "s", memory.Summary{Content: "up to four", FirstID: m[1].ID, LastID: m[4].ID})
	if err != nil {
		t.Fatalf("second Summarize: %v", err)
	}
	if s2.ID <= s1.ID {
		t.Errorf("summary ids %d then %d, want increasing", s1.ID, s2.ID)
	}
	all := messages(t, st, "s", true)
	if len(all) != 8 {
		t.Fatalf("Messages(all) = %d messages, want 8 (archived ones kept)", len(all))
	}
	wantSum := []int64{s1.ID, s1.ID, s1.ID, s2.ID, s2.ID, 0, 0, 0}
	for i, msg := range all {
		if msg.SummaryID != wantSum[i] {
			t.Errorf("message %d: SummaryID = %d, want %d", i, msg.SummaryID, wantSum[i])
		}
	}
	// A range with nothing active left is an error and changes nothing.
	if _, err := st.Summarize(ctx, "s", memory.Summary{Content: "again", FirstID: m[0].ID, LastID: m[4].ID}); err == nil {
		t.Errorf("Summarize of archived-only range: got nil error")
	}
	sums, err := st.Summaries(ctx, "s")
	if err != nil {
		t.Fatalf("Summaries: %v", err)
	}
	if len(sums) != 2 || sums[0].ID != s1.ID || sums[1].ID != s2.ID || sums[1].Content != "up to four" {
		t.Errorf("Summaries = %+v, want [%d %d] oldest first", sums, s1.ID, s2.ID)
	}
	if !sums[0].CreatedAt.Equal(s1.CreatedAt) {
		t.Errorf("summary CreatedAt %v, Summarize returned %v", sums[0].CreatedAt, s1.CreatedAt)
	}
	// Ids of another session are not archived through this one.
	create(t, st, "other")
	o := appendMsgs(t, st, "other", user("o"))
	if _, err := st.Summarize(ctx, "s", memory.Summary{Content: "x", FirstID: o[0].ID, LastID: o[0].ID}); err == nil {
		t.Errorf("Summarize with another session's ids: got nil error")
	}
	if got := messages(t, st, "other", false); len(got) != 1 {
		t.Errorf("other session lost active messages: %v", contents(got))
	}
}

// testSummarizeInterleaved appends and summarises in turn, with ranges
// that overlap earlier summaries, hold messages appended after them, reach
// past the last id (up to the largest id) or hold nothing active, and
// checks each result against a model of the session: a summary archives
// exactly the active messages of its range; a range with none is refused
// and changes nothing.
func testSummarizeInterleaved(t *testing.T, st memory.Store) {
	ctx := t.Context()
	create(t, st, "s")
	var ids []int64               // the session's message ids, in order
	archived := map[int64]int64{} // message id → summary id, by the model
	rng := rand.New(rand.NewPCG(19, 2))
	for round := range 60 {
		for _, m := range appendMsgs(t, st, "s", slices.Repeat([]memory.Message{user(fmt.Sprint(round))}, 1+rng.IntN(3))...) {
			ids = append(ids, m.ID)
		}
		a, b := rng.IntN(len(ids)), rng.IntN(len(ids))
		if a > b {
			a, b = b, a
		}
		first, last := ids[a], ids[b]
		if round%10 == 9 {
			last = math.MaxInt64
		}
		var want []int64
		for _, id := range ids {
			if id >= first && id <= last && archived[id] == 0 {
				want = append(want, id)
			}
		}
		sum, err := st.Summarize(ctx, "s", memory.Summary{Content: fmt.Sprint("summary ", round), FirstID: first, LastID: last})
		switch {
		case len(want) == 0 && err == nil:
			t.Fatalf("round %d: Summarize of [%d, %d], whose messages are all archived: got nil error", round, first, last)
		case len(want) > 0 && err != nil:
			t.Fatalf("round %d: Summarize of [%d, %d] holding %d active messages: %v", round, first, last, len(want), err)
		}
		for _, id := range want {
			archived[id] = sum.ID
		}
		all := messages(t, st, "s", true)
		if len(all) != len(ids) {
			t.Fatalf("round %d: %d messages, want %d", round, len(all), len(ids))
		}
		for i, m := range all {
			if m.ID != ids[i] || m.SummaryID != archived[m.ID] {
				t.Fatalf("round %d: message %d (id %d): SummaryID %d, want %d", round, i, m.ID, m.SummaryID, archived[ids[i]])
			}
		}
	}
	active := messages(t, st, "s", false)
	n := 0
	for _, id := range ids {
		if archived[id] == 0 {
			if n >= len(active) || active[n].ID != id {
				t.Fatalf("active messages %v, want the ids without a summary", contents(active))
			}
			n++
		}
	}
	if n != len(active) {
		t.Fatalf("%d active messages, want %d", len(active), n)
	}
}

func testSummarizeInvalid(t *testing.T, st memory.Store) {
	create(t, st, "s")
	m := appendMsgs(t, st, "s", user("a"), user("b"))
	bad := []struct {
		name string
		s    memory.Summary
	}{
		{"empty content", memory.Summary{Content: "  ", FirstID: m[0].ID, LastID: m[1].ID}},
		{"reversed range", memory.Summary{Content: "x", FirstID: m[1].ID, LastID: m[0].ID}},
		{"zero range", memory.Summary{Content: "x"}},
		{"no messages in range", memory.Summary{Content: "x", FirstID: m[1].ID + 1000, LastID: m[1].ID + 2000}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if _, err := st.Summarize(t.Context(), "s", b.s); err == nil {
				t.Errorf("Summarize(%+v): got nil error", b.s)
			}
		})
	}
	if got := messages(t, st, "s", false); len(got) != 2 {
		t.Errorf("active messages after failed Summarize = %d, want 2", len(got))
	}
	if sums, err := st.Summaries(t.Context(), "s"); err != nil || len(sums) != 0 {
		t.Errorf("Summaries after failed Summarize = %v, %v; want none", sums, err)
	}
}

func testDelete(t *testing.T, st memory.Store) {
	ctx := t.Context()
	create(t, st, "gone")
	create(t, st, "kept")
	m := appendMsgs(t, st, "gone", user("a"), user("b"))
	appendMsgs(t, st, "kept", user("k"))
	if _, err := st.Summarize(ctx, "gone", memory.Summary{Content: "s", FirstID: m[0].ID, LastID: m[0].ID}); err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if _, err := st.Messages(ctx, "gone", true); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Messages after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := st.Summaries(ctx, "gone"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Summaries after delete: err = %v, want ErrNotFound", err)
	}
	list, err := st.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "kept" {
		t.Errorf("Sessions after delete = %v, %v; want only kept", list, err)
	}
	// The id can be used again and starts empty.
	create(t, st, "gone")
	if got := messages(t, st, "gone", true); len(got) != 0 {
		t.Errorf("recreated session holds %d messages, want 0", len(got))
	}
	if got := messages(t, st, "kept", true); len(got) != 1 {
		t.Errorf("other session holds %d messages, want 1", len(got))
	}
}

func testCopies(t *testing.T, st memory.Store) {
	create(t, st, "s")
	in := []memory.Message{
		{Role: memory.RoleAssistant, Content: "a", ToolCalls: []memory.ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`{"k":"v"}`)}}},
		{Role: memory.RoleUser, Images: []memory.Image{{MIMEType: "image/png", Data: []byte("png")}}},
	}
	out := appendMsgs(t, st, "s", in...)
	in[0].Content = "changed"
	in[0].ToolCalls[0].Name = "changed"
	in[0].ToolCalls[0].Arguments[6] = 'X'
	in[1].Images[0].Data[0] = 'X'
	out[0].ToolCalls[0].Name = "changed"
	out[0].ToolCalls[0].Arguments[6] = 'Y'
	out[1].Images[0].Data[0] = 'Y'
	got := messages(t, st, "s", false)
	got[0].ToolCalls[0].Name = "changed"
	got[0].ToolCalls[0].Arguments[6] = 'Z'
	got[0].Content = "changed"
	got[1].Images[0].Data[0] = 'Z'
	got[1].Images[0].MIMEType = "image/gif"
	again := messages(t, st, "s", false)
	if again[0].Content != "a" || again[0].ToolCalls[0].Name != "n" || !equalCall(again[0].ToolCalls[0], memory.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"k":"v"}`)}) {
		t.Errorf("stored message changed through a caller's copy: %+v", again[0])
	}
	if !equalImage(again[1].Images[0], memory.Image{MIMEType: "image/png", Data: []byte("png")}) {
		t.Errorf("stored image changed through a caller's copy: %+v", again[1].Images[0])
	}
}

func testConcurrent(t *testing.T, st memory.Store) {
	const (
		sessions  = 8
		writers   = 4 // per session
		perWriter = 10
		batch     = 3
	)
	ctx := t.Context()
	for s := range sessions {
		create(t, st, fmt.Sprint("c", s))
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*writers)
	for s := range sessions {
		for w := range writers {
			wg.Go(func() {
				id := fmt.Sprint("c", s)
				for i := range perWriter {
					msgs := make([]memory.Message, batch)
					for j := range msgs {
						msgs[j] = user(fmt.Sprintf("%d/%d/%d", w, i, j))
					}
					if _, err := st.Append(ctx, id, msgs...); err != nil {
						errs <- err
						return
					}
					if _, err := st.Messages(ctx, id, false); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Append: %v", err)
	}
	for s := range sessions {
		got := messages(t, st, fmt.Sprint("c", s), true)
		if len(got) != writers*perWriter*batch {
			t.Fatalf("session %d: %d messages, want %d", s, len(got), writers*perWriter*batch)
		}
		// Batches are whole and each writer's batches are in order.
		next := make([]int, writers)
		for k := 0; k < len(got); k += batch {
			var w, i int
			fmt.Sscanf(got[k].Content, "%d/%d/", &w, &i)
			for j := range batch {
				if want := fmt.Sprintf("%d/%d/%d", w, i, j); got[k+j].Content != want {
					t.Fatalf("session %d: message %d = %q, want %q (batch torn)", s, k+j, got[k+j].Content, want)
				}
				if k+j > 0 && got[k+j].ID <= got[k+j-1].ID {
					t.Fatalf("session %d: ids not increasing at %d", s, k+j)
				}
			}
			if i != next[w] {
				t.Fatalf("session %d: writer %d batch %d came before batch %d", s, w, i, next[w])
			}
			next[w]++
		}
	}
}

func testCancelled(t *testing.T, st memory.Store) {
	create(t, st, "s")
	m := appendMsgs(t, st, "s", user("a"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateSession", func() error { _, err := st.CreateSession(ctx, memory.Session{ID: "new"}); return err }},
		{"Session", func() error { _, err := st.Session(ctx, "s"); return err }},
		{"Sessions", func() error { _, err := st.Sessions(ctx); return err }},
		{"RenameSession", func() error { return st.RenameSession(ctx, "s", "x") }},
		{"Append", func() error { _, err := st.Append(ctx, "s", user("b")); return err }},
		{"Messages", func() error { _, err := st.Messages(ctx, "s", true); return err }},
		{"Summarize", func() error {
			_, err := st.Summarize(ctx, "s", memory.Summary{Content: "x", FirstID: m[0].ID, LastID: m[0].ID})
			return err
		}},
		{"Summaries", func() error { _, err := st.Summaries(ctx, "s"); return err }},
		{"DeleteSession", func() error { return st.DeleteSession(ctx, "s") }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); err == nil {
				t.Errorf("%s with a cancelled context: got nil error", c.name)
			}
		})
	}
	// Nothing changed.
	if _, err := st.Session(t.Context(), "new"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("session created with a cancelled context: err = %v", err)
	}
	if got := messages(t, st, "s", false); !slices.Equal(contents(got), []string{"a"}) {
		t.Errorf("messages after cancelled calls = %v, want [a]", contents(got))
	}
}
