// Package historytest checks, for tests, that a conversation is what a
// provider accepts as history.
package historytest

import (
	"fmt"

	"github.com/planround/planround/memory"
)

// Check returns an error when msgs is not valid history: right after each
// assistant message with tool calls must come its tool messages, exactly
// one per call, and no tool message may stand anywhere else.
func Check(msgs []memory.Message) error {
	for i := 0; i < len(msgs); {
		m := msgs[i]
		i++
		if m.Role == memory.RoleTool {
			return fmt.Errorf("message %d (id %d): a tool message (call %q) that follows no call", i-1, m.ID, m.ToolCallID)
		}
		if m.Role != memory.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		answers := map[string]int{}
		for _, c := range m.ToolCalls {
			answers[c.ID] = 0
		}
		for ; i < len(msgs) && msgs[i].Role == memory.RoleTool; i++ {
			n, ok := answers[msgs[i].ToolCallID]
			if !ok {
				return fmt.Errorf("message %d (id %d): a tool message for call %q, which message %d does not make", i, msgs[i].ID, msgs[i].ToolCallID, m.ID)
			}
			answers[msgs[i].ToolCallID] = n + 1
		}
		for _, c := range m.ToolCalls {
			if answers[c.ID] != 1 {
				return fmt.Errorf("call %q of message %d has %d tool messages, want 1", c.ID, m.ID, answers[c.ID])
			}
		}
	}
	return nil
}
