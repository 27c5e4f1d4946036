package agent

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/planround/planround/memory"
)

// History rebuilds, from a run's chunks, the messages the run added to the
// conversation after the user's message, with the merge rule a front end
// uses:
//
//   - the text of one round becomes one assistant message (its raw text, tags
//     included); round_end separates rounds;
//   - text followed by tool calls in the same round becomes one assistant
//     message with content and tool calls, then one tool message per call
//     (its result, or its rejection reason after any partial output), which
//     says how the call ended: [memory.OutcomeResult] for a result chunk,
//     [memory.OutcomeRejected] with the chunk's Cause for a rejection;
//   - calls whose arguments were still streaming when the run ended
//     ([CauseIncomplete]) are left out: they never ran;
//   - reasoning, side messages and warnings are not history, and neither are
//     the chunks of sub-agents' runs (those with a Depth).
//
// For the chunks of one complete run, History returns the same messages as
// [Turn.Messages] without the first (the user's), apart from CreatedAt and
// the persistent injections of [Config.Hooks], which are not chunks. It
// lets a host that logs chunks (such as the CLI's -json output) rebuild the
// conversation, and its result is always valid history: the calls a
// suspended run left open get the tool message of a call that never ran
// (rejected, [CauseNotRun], with its [Cause.DefaultReason]) here, where Turn.Messages leaves them open for
// [Agent.Resume].
func History(chunks []Chunk) []memory.Message {
	var (
		out   []memory.Message
		raw   strings.Builder
		calls []*historyCall
		index = map[string]*historyCall{}
	)
	flush := func() {
		if len(calls) == 0 {
			if raw.Len() > 0 {
				out = append(out, memory.Message{Role: memory.RoleAssistant, Content: raw.String()})
			}
		} else {
			asst := memory.Message{Role: memory.RoleAssistant, Content: raw.String()}
			var tools []memory.Message
			for _, c := range calls {
				if c.incomplete {
					continue
				}
				asst.ToolCalls = append(asst.ToolCalls, memory.ToolCall{ID: c.id, Name: c.name, Arguments: c.args})
				if !c.done {
					c.content, c.state, c.cause = reasonNotRun, StateRejected, CauseNotRun
				}
				tools = append(tools, toolMessage(c.id, c.name, c.content, c.state, c.cause))
			}
			if len(asst.ToolCalls) == 0 {
				if asst.Content != "" {
					out = append(out, asst)
				}
			} else {
				out = append(out, asst)
				out = append(out, tools...)
			}
		}
		raw.Reset()
		calls = calls[:0]
		clear(index)
	}
	call := func(t *ToolCall) *historyCall {
		c, ok := index[t.ID]
		if !ok {
			c = &historyCall{id: t.ID, name: t.Name}
			index[t.ID] = c
			calls = append(calls, c)
		}
		switch {
		case t.Arguments != nil:
			c.args = bytes.Clone(t.Arguments)
		case t.ArgumentsRaw != "":
			c.args = memory.ValidArguments([]byte(t.ArgumentsRaw))
		}
		return c
	}
	for _, ch := range chunks {
		if ch.Depth > 0 {
			continue // a sub-agent's: its call's result is the history
		}
		switch ch.Kind {
		case KindText:
			if ch.Raw != "" {
				raw.WriteString(ch.Raw)
			} else {
				raw.WriteString(ch.Text)
			}
		case KindToolCall:
			if ch.Tool == nil {
				continue
			}
			c := call(ch.Tool)
			if ch.Tool.State == StateResult {
				c.content, c.state, c.done = ch.Tool.Result, StateResult, true
			}
		case KindToolRejected:
			if ch.Tool == nil {
				continue
			}
			c := call(ch.Tool)
			if ch.Tool.Cause == CauseIncomplete {
				c.incomplete = true
				continue
			}
			c.content, c.state, c.cause, c.done = joinPartial(ch.Tool.PartialResult, ch.Tool.Reason), StateRejected, ch.Tool.Cause, true
		case KindRoundEnd, KindInterrupted:
			flush()
		}
	}
	flush()
	return out
}

type historyCall struct {
	id, name   string
	args       json.RawMessage
	content    string
	state      ToolState // StateResult or StateRejected, once done
	cause      Cause
	done       bool
	incomplete bool
}
