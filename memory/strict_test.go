package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/planround/planround/memory"
)

func sysMsg(text string) memory.Message {
	return memory.Message{Role: memory.RoleSystem, Content: text}
}

func TestStrict(t *testing.T) {
	cont := userMsg("[continue]")
	noReply := asst("[no reply]")
	tests := []struct {
		name string
		in   []memory.Message
		want []memory.Message
	}{
		{"empty", nil, []memory.Message{}},
		{"alternating unchanged",
			[]memory.Message{sysMsg("s"), userMsg("q"), asst("", call("a", "f", "{}")), toolMsg("a", "r"), asst("done"), userMsg("q2")},
			[]memory.Message{sysMsg("s"), userMsg("q"), asst("", call("a", "f", "{}")), toolMsg("a", "r"), asst("done"), userMsg("q2")}},
		{"system messages become one, first",
			[]memory.Message{sysMsg("a"), sysMsg(" "), sysMsg("b"), userMsg("q"), sysMsg("hook"), asst("x"), userMsg("y")},
			[]memory.Message{sysMsg("a\n\nb\n\nhook"), userMsg("q"), asst("x"), userMsg("y")}},
		{"consecutive users merged",
			[]memory.Message{userMsg("one"), userMsg(""), userMsg("two")},
			[]memory.Message{userMsg("one\n\ntwo")}},
		{"consecutive assistants get a continue between",
			[]memory.Message{userMsg("q"), asst("plan <no_tool>"), asst("answer"), userMsg("q2")},
			[]memory.Message{userMsg("q"), asst("plan <no_tool>"), cont, asst("answer"), userMsg("q2")}},
		{"text then calls",
			[]memory.Message{userMsg("q"), asst("plan"), asst("", call("a", "f", "{}")), toolMsg("a", "r"), asst("done")},
			[]memory.Message{userMsg("q"), asst("plan"), cont, asst("", call("a", "f", "{}")), toolMsg("a", "r"), asst("done")}},
		{"assistant first",
			[]memory.Message{sysMsg("s"), asst("earlier"), userMsg("q")},
			[]memory.Message{sysMsg("s"), cont, asst("earlier"), userMsg("q")}},
		{"tool then user",
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}"), call("b", "f", "{}")), toolMsg("a", "r"), toolMsg("b", "r"), userMsg("q2")},
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}"), call("b", "f", "{}")), toolMsg("a", "r"), toolMsg("b", "r"), noReply, userMsg("q2")}},
		{"empty assistants left out",
			[]memory.Message{userMsg("q"), asst(""), asst(" \n"), userMsg("q2")},
			[]memory.Message{userMsg("q\n\nq2")}},
		{"tool calls with empty text kept",
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}")), toolMsg("a", "r")},
			[]memory.Message{userMsg("q"), asst("", call("a", "f", "{}")), toolMsg("a", "r")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := cloneAll(tt.in)
			got := memory.Strict(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, in, tt.in, "Strict changed its input")
			assert.Equal(t, got, memory.Strict(got), "Strict of its own result changes it")
			for i := range got {
				for k := range got[i].ToolCalls {
					got[i].ToolCalls[k].Name = "changed"
				}
			}
			assert.Equal(t, in, tt.in, "changing the result changed the input")
		})
	}
}

func cloneAll(msgs []memory.Message) []memory.Message {
	if msgs == nil {
		return nil
	}
	out := make([]memory.Message, len(msgs))
	for i, m := range msgs {
		m.ToolCalls = append([]memory.ToolCall(nil), m.ToolCalls...)
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = msgs[i].ToolCalls
		}
		out[i] = m
	}
	return out
}
