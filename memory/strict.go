package memory

import "strings"

// The placeholders [Strict] inserts where a strict template needs a message
// that the conversation does not have.
const (
	// strictContinue is a user message between two assistant messages: the
	// transition the agent itself puts after a planning reply.
	strictContinue = "[continue]"
	// strictNoReply is an assistant message between tool results and the
	// next user message: the turn ended without an answer.
	strictNoReply = "[no reply]"
)

// Strict returns msgs laid out for strict chat templates (Mistral-family
// models, Gemma, some vLLM templates), which accept one system message, and
// only first, and user and assistant turns that alternate:
//
//   - the content of every system message, in order, becomes one system
//     message, the first (none when there is no system content);
//   - consecutive user messages become one, their contents joined by a
//     blank line and their images kept in order;
//   - between two assistant messages (a planning reply and the answer that
//     followed it) comes a user message "[continue]", as between the rounds
//     that wrote them, and before an assistant message that would come
//     first (a history whose start was summarised away) too;
//   - between a tool message and a user message (a turn that ended with
//     tool results, such as an interrupted one) comes an assistant message
//     "[no reply]";
//   - assistant messages with neither text nor tool calls are left out;
//   - tool messages keep their place after the assistant message whose
//     calls they answer.
//
// msgs should be valid history (see [Repair]). Strict never changes msgs;
// the result shares no memory with it.
func Strict(msgs []Message) []Message {
	var system []string
	out := make([]Message, 0, len(msgs)+2)
	for _, m := range msgs {
		m = m.clone()
		var prev *Message
		if len(out) > 0 {
			prev = &out[len(out)-1]
		}
		switch m.Role {
		case RoleSystem:
			if strings.TrimSpace(m.Content) != "" {
				system = append(system, m.Content)
			}
			continue
		case RoleUser:
			if prev != nil && prev.Role == RoleUser {
				prev.Content = joinContent(prev.Content, m.Content)
				prev.Images = append(prev.Images, m.Images...)
				continue
			}
			if prev != nil && prev.Role == RoleTool {
				out = append(out, Message{Role: RoleAssistant, Content: strictNoReply})
			}
		case RoleAssistant:
			if len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) == "" {
				continue
			}
			if prev == nil || (prev.Role == RoleAssistant && len(prev.ToolCalls) == 0) {
				out = append(out, Message{Role: RoleUser, Content: strictContinue})
			}
		}
		out = append(out, m)
	}
	if len(system) > 0 {
		out = append(out, Message{})
		copy(out[1:], out)
		out[0] = Message{Role: RoleSystem, Content: strings.Join(system, "\n\n")}
	}
	return out
}

// joinContent joins two message texts with a blank line, skipping an empty
// one.
func joinContent(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}
