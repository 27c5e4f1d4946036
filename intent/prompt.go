package intent

import "strings"

// ContinueMessage is the content of the transition user message the agent
// appends, after the planning reply, to the working message list (never
// to persisted history).
const ContinueMessage = "[continue]"

// The default prompts. They are English on purpose and tell the model to
// answer in the user's own language; see the package documentation.
const (
	planningIntro = `Reply to the user's latest message now, in words, in the same language the user writes in.
- If you can answer fully from what you know and what is in this conversation, give the answer.
- If you need tools to answer (to look something up, to read or change something, or to act outside this conversation), say in one or two sentences what you are going to do. Tools are not available in this reply, only after it: do not write tool calls or code meant to call a tool, and never describe results you have not received.

End your reply with exactly one of these tags, as the very last thing you write:
`
	planningOutro = `
The user never sees the tag. Write it once, at the end, and nowhere else.`

	continuationPrompt = `Continue your reply and answer the user completely now. Do not repeat what you have already said, and do not end with a tag. Write in the same language the user writes in.`
)

// PlanningPrompt returns the planning prompt for the [DefaultDictionary]:
// the temporary system message appended after the user's message in the
// planning round (round 0). See [Dictionary.PlanningPrompt].
func PlanningPrompt() string { return DefaultDictionary().PlanningPrompt() }

// PlanningPrompt returns the planning prompt for the dictionary's tags. It
// asks the model to answer in words first, in the user's language; to say
// briefly what it will do if it needs tools, without writing tool calls or
// inventing results; and to end with exactly one tag, each listed with its
// [Tag.Description]. The request that carries it has no tools, and the
// prompt names none, so the model cannot rehearse a call.
//
// The prompt is English and tells the model to answer in the user's
// language.
func (d Dictionary) PlanningPrompt() string {
	var b strings.Builder
	b.WriteString(planningIntro)
	for _, t := range d.all() {
		b.WriteString(t.Name)
		b.WriteString(" - ")
		b.WriteString(describe(t))
		b.WriteByte('\n')
	}
	b.WriteString(planningOutro)
	return b.String()
}

func describe(t Tag) string {
	switch {
	case t.Description != "":
		return t.Description
	case t.SkipTools:
		return "you can answer fully without tools"
	default:
		return "you need tools to answer"
	}
}

// ContinuationPrompt returns the continuation prompt: the temporary system
// message the agent appends after [ContinueMessage] in the continuation
// round that follows a planning reply whose tag skips tools. It asks the
// model to answer the user completely now, without repeating itself,
// without a tag, in the user's language. The prompt is English.
func ContinuationPrompt() string { return continuationPrompt }
