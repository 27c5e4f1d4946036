package historytest

import (
	"testing"

	"github.com/planround/planround/memory"
)

func TestCheck(t *testing.T) {
	call := func(ids ...string) memory.Message {
		m := memory.Message{Role: memory.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: id, Name: "f"})
		}
		return m
	}
	tool := func(id string) memory.Message { return memory.Message{Role: memory.RoleTool, ToolCallID: id} }
	user := memory.Message{Role: memory.RoleUser}
	for _, tc := range []struct {
		name string
		msgs []memory.Message
		ok   bool
	}{
		{"answered", []memory.Message{user, call("a", "b"), tool("b"), tool("a"), user}, true},
		{"no calls", []memory.Message{user, {Role: memory.RoleAssistant}}, true},
		{"unanswered", []memory.Message{user, call("a", "b"), tool("a")}, false},
		{"answered twice", []memory.Message{user, call("a"), tool("a"), tool("a")}, false},
		{"another call's", []memory.Message{user, call("a"), tool("x")}, false},
		{"after a user message", []memory.Message{user, call("a"), user, tool("a")}, false},
		{"orphan", []memory.Message{user, tool("a")}, false},
	} {
		if err := Check(tc.msgs); (err == nil) != tc.ok {
			t.Errorf("%s: Check = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
