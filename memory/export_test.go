package memory_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

// fixture fills session "s" of st with a conversation holding tool calls,
// a hook message, two summaries (the second overlapping the first) and
// active messages after them.
func fixture(t *testing.T, st memory.Store) {
	t.Helper()
	ctx := t.Context()
	_, err := st.CreateSession(ctx, memory.Session{ID: "s", Title: "Trip", CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)})
	require.NoError(t, err)
	m, err := st.Append(ctx, "s",
		userWith("weather? <b>here</b>", png, catURL),
		asst("checking", call("c1", "get_weather", `{"city":"Paris"}`)),
		memory.Message{Role: memory.RoleTool, ToolCallID: "c1", Content: "sunny", Outcome: memory.OutcomeResult},
		asst("It is sunny. <no_tool>"),
		memory.Message{Role: memory.RoleUser, Content: "[hook]", Hook: true},
		userMsg("and tomorrow?"),
		asst("rain"),
		asst("", call("c2", "run_command", `{"command":"ls -la"}`), call("c3", "run_command", `{"command":"pwd"}`)),
		memory.Message{Role: memory.RoleTool, ToolCallID: "c2", Name: "run_command", Content: "rejected by user", Outcome: memory.OutcomeRejected, Cause: "user"},
		memory.Message{Role: memory.RoleTool, ToolCallID: "c3", Name: "run_command", Content: "tool call was not completed"},
	)
	require.NoError(t, err)
	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "asked weather", FirstID: m[0].ID, LastID: m[2].ID})
	require.NoError(t, err)
	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "it was sunny", FirstID: m[1].ID, LastID: m[4].ID})
	require.NoError(t, err)
}

// normalise replaces ids with their positions so that an import, whose ids
// differ, can be compared with the original.
func normalise(t *testing.T, msgs []memory.Message, sums []memory.Summary) ([]memory.Message, []memory.Summary) {
	t.Helper()
	pos := map[int64]int64{}
	for i, m := range msgs {
		pos[m.ID] = int64(i + 1)
	}
	spos := map[int64]int64{}
	for i, s := range sums {
		spos[s.ID] = int64(i + 1)
	}
	outM := memoryClone(msgs)
	for i := range outM {
		outM[i].ID = pos[outM[i].ID]
		outM[i].SummaryID = spos[outM[i].SummaryID]
	}
	outS := append([]memory.Summary(nil), sums...)
	for i := range outS {
		outS[i].ID, outS[i].FirstID, outS[i].LastID = spos[outS[i].ID], pos[outS[i].FirstID], pos[outS[i].LastID]
	}
	return outM, outS
}

func TestExportImportRoundTrip(t *testing.T) {
	stores := map[string]func(t *testing.T) memory.Store{
		"mem":    func(t *testing.T) memory.Store { return new(memory.MemStore) },
		"sqlite": func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "db")) },
	}
	for from, newFrom := range stores {
		for to, newTo := range stores {
			t.Run(from+"→"+to, func(t *testing.T) {
				ctx := t.Context()
				src, dst := newFrom(t), newTo(t)
				fixture(t, src)
				// Occupy some ids in dst so that import has to remap them.
				_, err := dst.CreateSession(ctx, memory.Session{ID: "other"})
				require.NoError(t, err)
				_, err = dst.Append(ctx, "other", userMsg("x"), userMsg("y"), userMsg("z"))
				require.NoError(t, err)

				data, err := memory.Export(ctx, src, "s")
				require.NoError(t, err)
				assert.Contains(t, string(data), `"format": "`+memory.ExportFormat+`"`)
				assert.Contains(t, string(data), `"outcome": "rejected",`+"\n"+`      "cause": "user"`)
				sess, err := memory.Import(ctx, dst, data)
				require.NoError(t, err)

				wantSess, _ := src.Session(ctx, "s")
				assert.Equal(t, wantSess.ID, sess.ID)
				assert.Equal(t, wantSess.Title, sess.Title)
				assert.True(t, wantSess.CreatedAt.Equal(sess.CreatedAt))

				wm, _ := src.Messages(ctx, "s", true)
				gm, _ := dst.Messages(ctx, "s", true)
				ws, _ := src.Summaries(ctx, "s")
				gs, _ := dst.Summaries(ctx, "s")
				wm, ws = normalise(t, wm, ws)
				gm, gs = normalise(t, gm, gs)
				assert.Equal(t, wm, gm)
				assert.Equal(t, ws, gs)
				wa, _ := src.Messages(ctx, "s", false)
				ga, _ := dst.Messages(ctx, "s", false)
				assert.Equal(t, len(wa), len(ga))

				// Importing again is refused; ImportAs takes a new id.
				_, err = memory.Import(ctx, dst, data)
				assert.ErrorIs(t, err, memory.ErrExists)
				copySess, err := memory.ImportAs(ctx, dst, data, "copy")
				require.NoError(t, err)
				assert.Equal(t, "copy", copySess.ID)
			})
		}
	}
}

func TestImportInvalid(t *testing.T) {
	src := new(memory.MemStore)
	fixture(t, src)
	good, err := memory.Export(t.Context(), src, "s")
	require.NoError(t, err)
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		require.NoError(t, json.Unmarshal(good, &doc))
		f(doc)
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		return b
	}
	msg := func(doc map[string]any, i int) map[string]any { return doc["messages"].([]any)[i].(map[string]any) }
	sum := func(doc map[string]any, i int) map[string]any { return doc["summaries"].([]any)[i].(map[string]any) }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"not json", []byte("{not json"), "invalid"},
		{"truncated", good[:len(good)/2], "invalid"},
		{"empty", nil, "invalid"},
		{"no format", []byte(`{"session":{"id":"x"}}`), `no "format"`},
		{"future version", edit(func(d map[string]any) { d["format"] = "planround.session/v4" }), `"planround.session/v4"`},
		{"arguments a string", edit(func(d map[string]any) {
			msg(d, 1)["tool_calls"].([]any)[0].(map[string]any)["arguments"] = `{"city":"Paris"}`
		}), "not a JSON object"},
		{"unknown field", edit(func(d map[string]any) { d["extra"] = 1 }), "unknown field"},
		{"trailing data", append(append([]byte(nil), good...), []byte(" {}")...), "after top-level value"},
		{"no session id", edit(func(d map[string]any) { d["session"].(map[string]any)["id"] = "" }), "no id"},
		{"bad role", edit(func(d map[string]any) { msg(d, 0)["role"] = "robot" }), "invalid role"},
		{"bad image", edit(func(d map[string]any) { msg(d, 0)["images"] = []any{map[string]any{"url": "file:///etc/passwd"}} }), "image 0"},
		{"image on an assistant message", edit(func(d map[string]any) { msg(d, 1)["images"] = msg(d, 0)["images"] }), "only user messages"},
		{"ids out of order", edit(func(d map[string]any) { msg(d, 1)["id"] = 0.5 }), "invalid"},
		{"summary link broken", edit(func(d map[string]any) { msg(d, 0)["summary_id"] = sum(d, 1)["id"] }), "summary_id"},
		{"archived flag dropped", edit(func(d map[string]any) { delete(msg(d, 4), "summary_id") }), "summary_id"},
		{"empty summary", edit(func(d map[string]any) { sum(d, 0)["content"] = "" }), "empty"},
		{"field twice", []byte(strings.Replace(string(good), `"summaries"`, `"Messages": [], "summaries"`, 1)), `"Messages" given twice`},
		{"messages not an array", edit(func(d map[string]any) { d["messages"] = map[string]any{} }), "want an array"},
		{"document not an object", []byte(`[{"format":"planround.session/v2"}]`), "want a JSON object"},
		{"outcome on a user message", edit(func(d map[string]any) { msg(d, 0)["outcome"] = "result" }), "only tool messages"},
		{"unknown outcome", edit(func(d map[string]any) { msg(d, 2)["outcome"] = "done" }), "unknown outcome"},
		{"cause of a result", edit(func(d map[string]any) { msg(d, 2)["cause"] = "user" }), "only a rejected call"},
		{"outcome in version 2", edit(func(d map[string]any) { d["format"] = "planround.session/v2" }), "outcome or a cause in a planround.session/v2 document"},
		{"cause in version 1", edit(func(d map[string]any) {
			d["format"] = "planround.session/v1"
			for _, m := range d["messages"].([]any) {
				m := m.(map[string]any)
				delete(m, "outcome")
				calls, _ := m["tool_calls"].([]any)
				for _, c := range calls {
					c.(map[string]any)["arguments"] = "{}"
				}
			}
			msg(d, 8)["cause"] = "user"
		}), "outcome or a cause in a planround.session/v1 document"},
		{"summary of nothing", edit(func(d map[string]any) { sum(d, 1)["first_id"] = 1e6; sum(d, 1)["last_id"] = 2e6 }), "no message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, st := range []memory.Store{new(memory.MemStore), openSQLite(t, filepath.Join(t.TempDir(), "db"))} {
				_, err := memory.Import(t.Context(), st, tt.data)
				require.Error(t, err)
				assert.ErrorIs(t, err, memory.ErrInvalidExport)
				assert.Contains(t, err.Error(), tt.want)
				list, err := st.Sessions(t.Context())
				require.NoError(t, err)
				assert.Empty(t, list, "a failed import wrote something")
			}
		})
	}
}

func TestImportCleansUp(t *testing.T) {
	src := new(memory.MemStore)
	fixture(t, src)
	data, err := memory.Export(t.Context(), src, "s")
	require.NoError(t, err)
	dst := &summarizeFails{}
	_, err = memory.Import(t.Context(), dst, data)
	require.ErrorContains(t, err, "disk full")
	list, err := dst.Sessions(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list, "half-imported session left behind")
}

func TestExportUnknownSession(t *testing.T) {
	_, err := memory.Export(t.Context(), new(memory.MemStore), "nope")
	assert.ErrorIs(t, err, memory.ErrNotFound)
	assert.True(t, strings.Contains(err.Error(), "nope"))
}

// TestImportVersion1: a document of the first format, whose tool-call
// arguments are strings holding JSON text (not always an object), imports
// with the arguments as objects.
func TestImportVersion1(t *testing.T) {
	data := []byte(`{
  "format": "planround.session/v1",
  "session": {"id": "old", "title": "Old", "created_at": "2025-01-02T03:04:05Z"},
  "messages": [
    {"id": 1, "role": "user", "content": "weather?", "created_at": "2025-01-02T03:04:05Z"},
    {"id": 2, "role": "assistant", "content": "checking", "tool_calls": [
      {"id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris <1>\"}"},
      {"id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Par"},
      {"id": "c3", "name": "ls", "arguments": ""}
    ], "created_at": "2025-01-02T03:04:06Z"},
    {"id": 3, "role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather", "created_at": "2025-01-02T03:04:07Z"},
    {"id": 4, "role": "tool", "content": "bad", "tool_call_id": "c2", "name": "get_weather", "created_at": "2025-01-02T03:04:07Z"},
    {"id": 5, "role": "tool", "content": "", "tool_call_id": "c3", "name": "ls", "created_at": "2025-01-02T03:04:07Z"}
  ],
  "summaries": []
}`)
	for _, st := range []memory.Store{new(memory.MemStore), openSQLite(t, filepath.Join(t.TempDir(), "db"))} {
		_, err := memory.Import(t.Context(), st, data)
		require.NoError(t, err)
		msgs, err := st.Messages(t.Context(), "old", true)
		require.NoError(t, err)
		require.Len(t, msgs, 5)
		calls := msgs[1].ToolCalls
		require.Len(t, calls, 3)
		assert.Equal(t, `{"city":"Paris <1>"}`, string(calls[0].Arguments))
		assert.JSONEq(t, `{"invalid_arguments": "{\"city\": \"Par"}`, string(calls[1].Arguments))
		assert.JSONEq(t, `{}`, string(calls[2].Arguments))

		// Exported again, it is the current format, and reads back the same.
		again, err := memory.Export(t.Context(), st, "old")
		require.NoError(t, err)
		assert.Contains(t, string(again), `"format": "`+memory.ExportFormat+`"`)
		_, err = memory.ImportAs(t.Context(), st, again, "copy")
		require.NoError(t, err)
		copied, err := st.Messages(t.Context(), "copy", true)
		require.NoError(t, err)
		assert.Equal(t, calls, copied[1].ToolCalls)
	}
}

// TestImportVersion2: a document of version 2, written before tool
// messages said how their call ended, imports with every tool message's
// outcome unknown (never a result), and is exported again as the current
// version with the outcome still unknown.
func TestImportVersion2(t *testing.T) {
	data := []byte(`{
  "format": "planround.session/v2",
  "session": {"id": "old", "title": "Old", "created_at": "2025-01-02T03:04:05Z"},
  "messages": [
    {"id": 1, "role": "user", "content": "list the files", "created_at": "2025-01-02T03:04:05Z"},
    {"id": 2, "role": "assistant", "content": "<need_tool>", "tool_calls": [
      {"id": "c1", "name": "run_command", "arguments": {"command": "ls -la"}}
    ], "created_at": "2025-01-02T03:04:06Z"},
    {"id": 3, "role": "tool", "content": "rejected by user", "tool_call_id": "c1", "name": "run_command", "created_at": "2025-01-02T03:04:07Z"}
  ],
  "summaries": []
}`)
	for _, st := range []memory.Store{new(memory.MemStore), openSQLite(t, filepath.Join(t.TempDir(), "db"))} {
		_, err := memory.Import(t.Context(), st, data)
		require.NoError(t, err)
		msgs, err := st.Messages(t.Context(), "old", true)
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		assert.Equal(t, "rejected by user", msgs[2].Content)
		assert.Empty(t, msgs[2].Outcome, "a version 2 tool message's outcome is unknown")
		assert.Empty(t, msgs[2].Cause)

		again, err := memory.Export(t.Context(), st, "old")
		require.NoError(t, err)
		assert.Contains(t, string(again), `"format": "`+memory.ExportFormat+`"`)
		assert.NotContains(t, string(again), `"outcome"`)
	}
}

// TestImportLinear repeats the attack of issue 19: an export of n messages
// whose n summaries each archive one, some with ranges that hold all the
// messages before (the i-th of "nested" covers [1, i]), made the import and
// the export look at n² messages (and MemStore.Summarize at n²/2 for the
// nested ones). Every replay must now look at a bounded number per message,
// for the import into MemStore and SQLite and for the export after it. The
// count is of the work, not of the time.
func TestImportLinear(t *testing.T) {
	stores := []struct {
		name string
		n    int
		open func(t *testing.T) memory.Store
	}{
		{"mem", 20_000, func(t *testing.T) memory.Store { return new(memory.MemStore) }},
		// A summary is a transaction: fewer of them.
		{"sqlite", 2_000, func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "db")) }},
	}
	const perMessage = 10 // visits allowed per message and pass
	for _, s := range stores {
		for _, shape := range exportShapes {
			t.Run(s.name+"/"+shape.name, func(t *testing.T) {
				n := s.n
				data := exportDoc(t, n, shape.sums(n))
				st := s.open(t)
				before := memory.ReplayVisits()
				_, err := memory.ImportAs(t.Context(), st, data, "s")
				require.NoError(t, err)
				visits := memory.ReplayVisits() - before
				// The check, and the replay in the store when it is a
				// MemStore.
				t.Logf("import: %d visits for %d messages", visits, n)
				assert.LessOrEqual(t, visits, int64(2*perMessage*n), "import: messages looked at")

				sums, err := st.Summaries(t.Context(), "s")
				require.NoError(t, err)
				assert.Len(t, sums, len(shape.sums(n)))
				active, err := st.Messages(t.Context(), "s", false)
				require.NoError(t, err)
				assert.Empty(t, active, "every message is archived")

				before = memory.ReplayVisits()
				_, err = memory.Export(t.Context(), st, "s")
				require.NoError(t, err)
				visits = memory.ReplayVisits() - before
				assert.LessOrEqual(t, visits, int64(perMessage*n), "export: messages looked at")
			})
		}
	}
}

// TestSummarizeSameRange: n summaries of one range, all but the first of
// which find nothing left to archive, look at a bounded number of messages
// each in a MemStore (a scan of the range looked at n each).
func TestSummarizeSameRange(t *testing.T) {
	const n = 20_000
	ctx := t.Context()
	st := new(memory.MemStore)
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	msgs := make([]memory.Message, n)
	for i := range msgs {
		msgs[i] = userMsg(fmt.Sprint(i))
	}
	out, err := st.Append(ctx, "s", msgs...)
	require.NoError(t, err)
	first, last := out[0].ID, out[n-1].ID
	before := memory.ReplayVisits()
	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "all", FirstID: first, LastID: last})
	require.NoError(t, err)
	for range n - 1 {
		_, err := st.Summarize(ctx, "s", memory.Summary{Content: "again", FirstID: first, LastID: last})
		require.Error(t, err)
	}
	assert.LessOrEqual(t, memory.ReplayVisits()-before, int64(3*n), "messages looked at")
	sums, err := st.Summaries(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, sums, 1)
}

// TestImportFrom: ImportFrom decodes the document as it reads it, in any
// order of its fields and read a byte at a time; an error of the reader is
// returned as it is, not as an invalid export, and leaves nothing behind.
func TestImportFrom(t *testing.T) {
	src := new(memory.MemStore)
	fixture(t, src)
	good, err := memory.Export(t.Context(), src, "s")
	require.NoError(t, err)
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(good, &doc))
	// The format last, names in other cases, one field null.
	reordered := []byte(`{"Summaries":` + string(doc["summaries"]) + `,"SESSION":` + string(doc["session"]) +
		`,"messages":` + string(doc["messages"]) + `,"format":` + string(doc["format"]) + "}\n\t ")
	empty := []byte(`{"format":"planround.session/v2","session":{"id":"e"},"messages":null,"summaries":null}`)

	for _, st := range []memory.Store{new(memory.MemStore), openSQLite(t, filepath.Join(t.TempDir(), "db"))} {
		sess, err := memory.ImportFrom(t.Context(), st, iotest.OneByteReader(bytes.NewReader(good)), "bytewise")
		require.NoError(t, err)
		assert.Equal(t, "Trip", sess.Title)
		wm, _ := src.Messages(t.Context(), "s", true)
		ws, _ := src.Summaries(t.Context(), "s")
		gm, _ := st.Messages(t.Context(), "bytewise", true)
		gs, _ := st.Summaries(t.Context(), "bytewise")
		wm, ws = normalise(t, wm, ws)
		gm, gs = normalise(t, gm, gs)
		assert.Equal(t, wm, gm)
		assert.Equal(t, ws, gs)

		_, err = memory.ImportFrom(t.Context(), st, bytes.NewReader(reordered), "reordered")
		require.NoError(t, err)
		msgs, err := st.Messages(t.Context(), "reordered", true)
		require.NoError(t, err)
		assert.Len(t, msgs, 10)

		_, err = memory.ImportFrom(t.Context(), st, bytes.NewReader(empty), "")
		require.NoError(t, err)

		boom := errors.New("connection reset")
		_, err = memory.ImportFrom(t.Context(), st, io.MultiReader(bytes.NewReader(good[:len(good)/2]), iotest.ErrReader(boom)), "broken")
		require.ErrorIs(t, err, boom)
		assert.NotErrorIs(t, err, memory.ErrInvalidExport)
		_, err = st.Session(t.Context(), "broken")
		assert.ErrorIs(t, err, memory.ErrNotFound)
	}
}
