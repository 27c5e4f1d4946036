package memory_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

func call(id, name, args string) memory.ToolCall {
	return memory.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func asst(text string, calls ...memory.ToolCall) memory.Message {
	return memory.Message{Role: memory.RoleAssistant, Content: text, ToolCalls: calls}
}

func toolMsg(id, content string) memory.Message {
	return memory.Message{Role: memory.RoleTool, ToolCallID: id, Content: content}
}

func userMsg(text string) memory.Message { return memory.Message{Role: memory.RoleUser, Content: text} }

func TestRepair(t *testing.T) {
	missing := func(id, name string) memory.Message {
		return memory.Message{Role: memory.RoleTool, ToolCallID: id, Name: name, Content: memory.IncompleteToolCall}
	}
	tests := []struct {
		name string
		in   []memory.Message
		want []memory.Message
	}{
		{"empty", nil, []memory.Message{}},
		{"valid unchanged",
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}"), call("b", "g", "{}")), toolMsg("b", "2"), toolMsg("a", "1"), asst("done")},
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}"), call("b", "g", "{}")), toolMsg("b", "2"), toolMsg("a", "1"), asst("done")}},
		{"missing result at end",
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}"))},
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}")), missing("a", "f")}},
		{"one of two missing",
			[]memory.Message{asst("", call("a", "f", "{}"), call("b", "g", "{}")), toolMsg("b", "2"), userMsg("next")},
			[]memory.Message{asst("", call("a", "f", "{}"), call("b", "g", "{}")), toolMsg("b", "2"), missing("a", "f"), userMsg("next")}},
		{"orphan tool dropped",
			[]memory.Message{userMsg("q"), toolMsg("x", "lost"), asst("hi")},
			[]memory.Message{userMsg("q"), asst("hi")}},
		{"tool after another message is orphan",
			[]memory.Message{asst("", call("a", "f", "{}")), userMsg("interrupt"), toolMsg("a", "late")},
			[]memory.Message{asst("", call("a", "f", "{}")), missing("a", "f"), userMsg("interrupt")}},
		{"duplicate and foreign answers dropped",
			[]memory.Message{asst("", call("a", "f", "{}")), toolMsg("a", "1"), toolMsg("a", "again"), toolMsg("z", "other")},
			[]memory.Message{asst("", call("a", "f", "{}")), toolMsg("a", "1")}},
		{"duplicate call ids each answered once",
			[]memory.Message{asst("", call("a", "f", "{}"), call("a", "f", "{}")), toolMsg("a", "1")},
			[]memory.Message{asst("", call("a", "f", "{}"), call("a", "f", "{}")), toolMsg("a", "1"), missing("a", "f")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := memoryClone(tt.in)
			got := memory.Repair(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, in, tt.in, "Repair changed its input")
			assert.Equal(t, got, memory.Repair(got), "Repair is not idempotent")
		})
	}
}

func memoryClone(msgs []memory.Message) []memory.Message {
	b, _ := json.Marshal(msgs)
	var out []memory.Message
	json.Unmarshal(b, &out)
	return out
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 20) // 20 runes, 40 bytes
	opts := memory.TruncateOptions{Limit: 5, Keep: []string{"get_skill"}}
	in := []memory.Message{
		userMsg("first"),
		asst("", call("a", "search", `{"q":"`+long+`"}`), call("s", "get_skill", `{"name":"`+long+`"}`)),
		toolMsg("a", long),
		toolMsg("s", long),
		{Role: memory.RoleTool, ToolCallID: "gone", Name: "get_skill", Content: long}, // call not in list: Name decides
		asst(long), // assistant text is never truncated
		userMsg("current " + long),
		asst("", call("b", "search", `{"q":"`+long+`"}`)),
		toolMsg("b", long),
	}
	orig := memoryClone(in)
	got := memory.Truncate(in, opts)
	require.Len(t, got, len(in))
	assert.Equal(t, orig, in, "Truncate changed its input")

	tests := []struct {
		name string
		got  string
		want string
	}{
		{"old result", got[2].Content, "ééééé…[truncated 15 chars]"},
		{"kept tool result", got[3].Content, long},
		{"kept by name", got[4].Content, long},
		{"assistant text", got[5].Content, long},
		{"kept tool arguments", string(got[1].ToolCalls[1].Arguments), `{"name":"` + long + `"}`},
		{"current turn user", got[6].Content, "current " + long},
		{"current turn arguments", string(got[7].ToolCalls[0].Arguments), `{"q":"` + long + `"}`},
		{"current turn result", got[8].Content, long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	t.Run("old arguments stay JSON", func(t *testing.T) {
		args := got[1].ToolCalls[0].Arguments
		var v struct{ Truncated string }
		require.NoError(t, json.Unmarshal(args, &v), "arguments %q", args)
		assert.Equal(t, `{"q":…[truncated 23 chars]`, v.Truncated)
	})
	t.Run("default limit", func(t *testing.T) {
		big := strings.Repeat("x", 1234+memory.DefaultTruncateLimit)
		got := memory.Truncate([]memory.Message{asst("", call("a", "f", "{}")), toolMsg("a", big), userMsg("now")}, memory.TruncateOptions{})
		assert.True(t, strings.HasSuffix(got[1].Content, "…[truncated 1234 chars]"), got[1].Content[memory.DefaultTruncateLimit:])
	})
	t.Run("off", func(t *testing.T) {
		got := memory.Truncate(in, memory.TruncateOptions{Limit: -1})
		assert.Equal(t, in, got)
	})
	t.Run("no user message", func(t *testing.T) {
		in := []memory.Message{asst("", call("a", "f", "{}")), toolMsg("a", long)}
		assert.Equal(t, in, memory.Truncate(in, opts), "a list without a user turn is all current turn")
	})
}

func TestLayers(t *testing.T) {
	ctx := t.Context()
	st := new(memory.MemStore)
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	m, err := st.Append(ctx, "s", userMsg("q1"), asst("a1"), userMsg("q2"), asst("a2"), userMsg("now"))
	require.NoError(t, err)

	sl := memory.SummaryLayer{Store: st}
	blocks, err := sl.Blocks(ctx, "s")
	require.NoError(t, err)
	assert.Empty(t, blocks, "no summaries, no block")

	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "they talked", FirstID: m[0].ID, LastID: m[1].ID})
	require.NoError(t, err)
	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "and again", FirstID: m[2].ID, LastID: m[3].ID})
	require.NoError(t, err)
	blocks, err = sl.Blocks(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, []string{"Summary of earlier conversation:\n\nthey talked\n\nand again"}, blocks)
	blocks, err = memory.SummaryLayer{Store: st, Prefix: "Before:"}.Blocks(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, []string{"Before:\n\nthey talked\n\nand again"}, blocks)

	_, err = sl.Blocks(ctx, "nope")
	assert.ErrorIs(t, err, memory.ErrNotFound)
	_, err = memory.SummaryLayer{}.Blocks(ctx, "s")
	assert.Error(t, err)

	tl := memory.TextLayer{"Documents: a.md", ""}
	blocks, err = tl.Blocks(ctx, "s")
	require.NoError(t, err)
	blocks[0] = "changed"
	assert.Equal(t, "Documents: a.md", tl[0], "TextLayer returns a copy")
}

// Servers that number calls per response (call_0, call_1, ...) reuse ids
// across messages: a tool message belongs to the call of the assistant
// message before it, not to the latest call with that id.
func TestTruncateReusedCallIDs(t *testing.T) {
	long := strings.Repeat("x", 50)
	opts := memory.TruncateOptions{Limit: 5, Keep: []string{"get_skill"}}
	in := []memory.Message{
		userMsg("one"),
		asst("", call("call_0", "get_skill", `{"name":"`+long+`"}`)),
		toolMsg("call_0", long),
		userMsg("two"),
		asst("", call("call_0", "search", `{"q":"`+long+`"}`)),
		toolMsg("call_0", long),
		userMsg("now"),
	}
	got := memory.Truncate(in, opts)
	assert.Equal(t, long, got[2].Content, "get_skill's result was truncated as if it were search's")
	assert.Equal(t, "xxxxx…[truncated 45 chars]", got[5].Content, "search's result was kept as if it were get_skill's")

	// And the other way round: the latest call is the kept one.
	in[1].ToolCalls[0].Name, in[4].ToolCalls[0].Name = "search", "get_skill"
	got = memory.Truncate(in, opts)
	assert.Equal(t, "xxxxx…[truncated 45 chars]", got[2].Content)
	assert.Equal(t, long, got[5].Content)
}

// Repair on pathological lists: the result is always valid (every call
// answered right after its message, no tool message elsewhere) and keeps
// every non-tool message in order.
func TestRepairPathological(t *testing.T) {
	tests := []struct {
		name string
		in   []memory.Message
		want []memory.Message
	}{
		{"tool before any assistant", []memory.Message{toolMsg("x", "r"), userMsg("q")}, []memory.Message{userMsg("q")}},
		{"same call id in two messages", []memory.Message{
			asst("", call("call_0", "a", "{}")), toolMsg("call_0", "1"), userMsg("q"),
			asst("", call("call_0", "b", "{}")), toolMsg("call_0", "2"),
		}, []memory.Message{
			asst("", call("call_0", "a", "{}")), toolMsg("call_0", "1"), userMsg("q"),
			asst("", call("call_0", "b", "{}")), toolMsg("call_0", "2"),
		}},
		{"answer of an earlier message with a reused id is not taken", []memory.Message{
			asst("", call("call_0", "a", "{}")), userMsg("q"), asst("", call("call_0", "b", "{}")), userMsg("r"), toolMsg("call_0", "late"),
		}, []memory.Message{
			asst("", call("call_0", "a", "{}")), {Role: memory.RoleTool, ToolCallID: "call_0", Name: "a", Content: memory.IncompleteToolCall}, userMsg("q"),
			asst("", call("call_0", "b", "{}")), {Role: memory.RoleTool, ToolCallID: "call_0", Name: "b", Content: memory.IncompleteToolCall}, userMsg("r"),
		}},
		{"one id twice in one message", []memory.Message{asst("", call("d", "f", `{"n":1}`), call("d", "f", `{"n":2}`)), toolMsg("d", "r")}, []memory.Message{
			asst("", call("d", "f", `{"n":1}`), call("d", "f", `{"n":2}`)), toolMsg("d", "r"), {Role: memory.RoleTool, ToolCallID: "d", Name: "f", Content: memory.IncompleteToolCall},
		}},
		{"arguments that are not an object are wrapped", []memory.Message{
			asst("", call("a", "f", `{"city": "Par`), call("b", "f", `[1]`), call("c", "f", " "), call("d", "f", ` {"ok":true} `)),
			toolMsg("a", "1"), toolMsg("b", "2"), toolMsg("c", "3"), toolMsg("d", "4"),
		}, []memory.Message{
			asst("", call("a", "f", `{"invalid_arguments":"{\"city\": \"Par"}`), call("b", "f", `{"invalid_arguments":"[1]"}`), call("c", "f", "{}"), call("d", "f", ` {"ok":true} `)),
			toolMsg("a", "1"), toolMsg("b", "2"), toolMsg("c", "3"), toolMsg("d", "4"),
		}},
		{"empty assistant without calls", []memory.Message{userMsg("q"), asst(""), toolMsg("x", "r")}, []memory.Message{userMsg("q"), asst("")}},
		{"empty call list", []memory.Message{{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{}}, toolMsg("x", "r")}, []memory.Message{asst("")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memory.Repair(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, memory.Repair(got), "Repair of a repaired list changes it")
		})
	}
}

func TestValidArguments(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"city":"Paris"}`, `{"city":"Paris"}`},
		{" {\n} ", " {\n} "},
		{"", "{}"},
		{" \t", "{}"},
		{`{"city": "Par`, `{"invalid_arguments":"{\"city\": \"Par"}`},
		{`["Paris"]`, `{"invalid_arguments":"[\"Paris\"]"}`},
		{`"Paris"`, `{"invalid_arguments":"\"Paris\""}`},
		{`null`, `{"invalid_arguments":"null"}`},
		{`{"a":1}{"b":2}`, `{"invalid_arguments":"{\"a\":1}{\"b\":2}"}`},
		{"<b>&", `{"invalid_arguments":"<b>&"}`},
		{"\xff", `{"invalid_arguments":"\ufffd"}`},
	}
	for _, tt := range tests {
		got := memory.ValidArguments([]byte(tt.in))
		assert.Equal(t, tt.want, string(got), "ValidArguments(%q)", tt.in)
		assert.True(t, memory.IsObject(got), "ValidArguments(%q) = %q is not an object", tt.in, got)
		assert.Equal(t, got, memory.ValidArguments(got), "not a fixed point")
	}
}
