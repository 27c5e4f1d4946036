package memory

// IncompleteToolCall is the content [Repair] gives the tool message it adds
// for a tool call that has none.
const IncompleteToolCall = "tool call was not completed"

// Repair returns msgs made valid for the chat-completions API: right after
// every assistant message with tool calls come the tool messages answering
// those calls, one per call.
//
//   - A call without an answer in that run of tool messages gets a tool
//     message with content [IncompleteToolCall], placed after the answers
//     that exist.
//   - A tool message that answers no call of the assistant message right
//     before its run (an orphan, a duplicate answer, or one separated from
//     its call by another message) is dropped.
//   - Tool-call arguments that are not a JSON object go through
//     [ValidArguments]: history saved before the agent wrapped arguments
//     the model got wrong is made acceptable to providers that parse them.
//
// Every other message keeps its place and content; a valid list comes back
// equal to the input. Repair never changes msgs; the result shares no
// memory with it.
func Repair(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for i := 0; i < len(msgs); {
		m := msgs[i]
		i++
		if m.Role == RoleTool {
			continue // not right after an assistant message with calls
		}
		m = m.clone()
		for k, c := range m.ToolCalls {
			m.ToolCalls[k].Arguments = ValidArguments(c.Arguments)
		}
		out = append(out, m)
		if m.Role != RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		answered := make([]bool, len(m.ToolCalls))
		for ; i < len(msgs) && msgs[i].Role == RoleTool; i++ {
			for k, c := range m.ToolCalls {
				if !answered[k] && c.ID == msgs[i].ToolCallID {
					answered[k] = true
					out = append(out, msgs[i].clone())
					break
				}
			}
		}
		for k, c := range m.ToolCalls {
			if !answered[k] {
				out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: IncompleteToolCall})
			}
		}
	}
	return out
}
