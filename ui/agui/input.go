package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/planround/planround/internal/jsonw"
	"github.com/planround/planround/ui/internal/turn"
)

// runInput is what the handler reads of an AG-UI RunAgentInput. Unknown
// fields (tools, context, state, forwardedProps) are ignored: the agent's
// own tools and state are the server's.
type runInput struct {
	ThreadID string        `json:"threadId"`
	RunID    string        `json:"runId"`
	Messages []message     `json:"messages"`
	Resume   []resumeEntry `json:"resume"`
}

type message struct {
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []toolCall      `json:"toolCalls"`
}

type toolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// The statuses of a resume entry.
const (
	statusResolved  = "resolved"
	statusCancelled = "cancelled"
)

// validate checks what the handler relies on.
func (in *runInput) validate() error {
	switch {
	case in.ThreadID == "":
		return errors.New("the run input has no threadId")
	case in.RunID == "":
		return errors.New("the run input has no runId")
	case len(in.Resume) > turn.MaxAnswers:
		return fmt.Errorf("the run input has %d resume entries, more than the %d a run may answer", len(in.Resume), turn.MaxAnswers)
	}
	if terr := turn.CheckSessionID(in.ThreadID); terr != nil {
		return errors.New(strings.Replace(terr.Msg, "chat id", "threadId", 1))
	}
	seen := make(map[string]bool, len(in.Resume))
	for _, r := range in.Resume {
		if r.InterruptID == "" {
			return errors.New("a resume entry has no interruptId")
		}
		if seen[r.InterruptID] {
			return errors.New("two resume entries answer interrupt " + r.InterruptID)
		}
		seen[r.InterruptID] = true
		if r.Status != statusResolved && r.Status != statusCancelled {
			return errors.New(`a resume entry's status is "resolved" or "cancelled", not ` + strconvQuote(r.Status))
		}
	}
	return nil
}

func strconvQuote(s string) string { return string(jsonw.AppendString(nil, s)) }

// lastUserText returns the text of the last message when it is the
// user's: its content, or the text parts of its content joined.
func (in *runInput) lastUserText() (string, bool) {
	if len(in.Messages) == 0 {
		return "", false
	}
	m := in.Messages[len(in.Messages)-1]
	if m.Role != "user" {
		return "", false
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}

// newUserText returns the text of the last message when it is a user's
// message the person wrote after the turn the input resumes: it comes
// after an assistant message (the turn's calls the client holds). A
// resume whose messages end with the message that started the turn, or
// with the assistant's, brings none.
func (in *runInput) newUserText() (string, bool) {
	n := len(in.Messages)
	if n == 0 || in.Messages[n-1].Role != "user" {
		return "", false
	}
	for i := n - 2; i >= 0 && in.Messages[i].Role != "user"; i-- {
		if in.Messages[i].Role == "assistant" {
			text, ok := in.lastUserText()
			return text, ok && text != ""
		}
	}
	return "", false
}

// toolCallIDs returns the ids of the tool calls the client holds for the
// turn in progress: those after the last user message. (The calls of
// earlier turns are over; a model may use their ids again.)
func (in *runInput) toolCallIDs() []string {
	from := 0
	for i, m := range in.Messages {
		if m.Role == "user" {
			from = i + 1
		}
	}
	var ids []string
	for _, m := range in.Messages[from:] {
		for _, tc := range m.ToolCalls {
			ids = append(ids, tc.ID)
		}
	}
	return ids
}

// findCall returns the last tool call of the messages that is call id of
// some run: the call itself, or a sub-agent's (its id ends with "/" and id).
func (in *runInput) findCall(id string) (toolCall, bool) {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		calls := in.Messages[i].ToolCalls
		for j := len(calls) - 1; j >= 0; j-- {
			if c := calls[j]; c.ID == id || strings.HasSuffix(c.ID, "/"+id) {
				return c, true
			}
		}
	}
	return toolCall{}, false
}
