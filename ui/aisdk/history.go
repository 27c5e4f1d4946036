package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui/internal/turn"
)

// UIMessage is a message of a chat as the ai package's client keeps it
// (its UIMessage type): what GET {api}/{id}/messages answers, for a page
// that gives it to useChat or AbstractChat as messages.
type UIMessage struct {
	ID       string         `json:"id"`
	Role     string         `json:"role"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Parts    []UIPart       `json:"parts"`
}

// UIPart is a part of a UIMessage: a text part ("text"), a dynamic tool
// part ("dynamic-tool", executed by the server) or a data part
// ("data-planround-form").
type UIPart struct {
	Type string `json:"type"`
	// Text is a text part's text; State is "done" for a text part, and a
	// tool part's state ("input-available", "approval-requested",
	// "approval-responded", "output-available", "output-error",
	// "output-denied").
	Text  string `json:"text,omitempty"`
	State string `json:"state,omitempty"`

	ToolCallID       string          `json:"toolCallId,omitempty"`
	ToolName         string          `json:"toolName,omitempty"`
	ProviderExecuted bool            `json:"providerExecuted,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           *string         `json:"output,omitempty"`
	ErrorText        string          `json:"errorText,omitempty"`
	Approval         *UIApproval     `json:"approval,omitempty"`
	// ToolMetadata is a tool part's metadata: under "planround", the
	// arguments as the model wrote them (arguments_text), and for an
	// approval what the stream's tool-input-available gives
	// (arguments_digest, hints, details, must_ask).
	ToolMetadata map[string]any `json:"toolMetadata,omitempty"`

	// ID and Data are a data part's.
	ID   string `json:"id,omitempty"`
	Data any    `json:"data,omitempty"`
}

// UIApproval is a tool part's approval: requested (ID), or answered
// (Approved, Reason).
type UIApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// history answers GET {api}/{id}/messages: the chat's messages for a page
// that loads it again (see NewHandler).
func (h *Handler) history(w http.ResponseWriter, r *http.Request, sessionID string) {
	if terr := turn.CheckSessionID(sessionID); terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	if _, ok := h.cfg.Authorize.Check(w, r, sessionID); !ok {
		return
	}
	msgs, err := h.Messages(r.Context(), sessionID)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, msgs)
}

// Messages returns the chat sessionID as the ai package's client keeps its
// messages, built from the Store's messages (archived ones included, hook
// injections left out): a user message per user message, and an assistant
// message per turn, with its text and its calls in the state they ended
// in, or wait in: a call whose approval waits is "approval-requested",
// answerable as in the stream. An unknown session has none (and is not
// created).
//
// While a turn runs, the messages end with its user message: the page
// gets the turn itself from the reconnect (GET {api}/{id}/stream, the ai
// client's resumeStream).
func (h *Handler) Messages(ctx context.Context, sessionID string) ([]UIMessage, error) {
	a := h.cfg.Runner.Agent()
	store := a.Store()
	var (
		state runner.LogState
		msgs  []memory.Message
		open  []memory.OpenCall
		err   error
	)
	// The log, the messages, and the log again: a turn that started or
	// ended in between is read again, so that both agree.
	for range 3 {
		var before runner.LogState
		if before, err = h.cfg.Runner.Log(ctx, sessionID); err != nil {
			return nil, err
		}
		msgs, err = store.Messages(ctx, sessionID, true)
		if errors.Is(err, memory.ErrNotFound) {
			return []UIMessage{}, nil
		}
		if err != nil {
			return nil, err
		}
		open = nil
		if calls, ok := store.(memory.CallLog); ok {
			if open, err = calls.OpenCalls(ctx, sessionID); err != nil && !errors.Is(err, memory.ErrNotFound) {
				return nil, fmt.Errorf("reading the open calls: %w", err)
			}
		}
		if state, err = h.cfg.Runner.Log(ctx, sessionID); err != nil {
			return nil, err
		}
		if state.Last == before.Last && state.Turn == before.Turn {
			break
		}
	}
	running := ""
	if state.Running() {
		cut := len(msgs)
		for i, m := range msgs {
			if m.ID > state.Started.History {
				cut = i
				break
			}
		}
		msgs = msgs[:cut]
		if !state.Started.Resumed {
			running = state.Started.Message
		}
		open = nil // the reconnect shows them
	}
	b := historyBuilder{h: h, a: a, store: store, sessionID: sessionID}
	if err := b.index(ctx, msgs, open); err != nil {
		return nil, err
	}
	out := b.build(msgs)
	if running != "" {
		out = append(out, UIMessage{ID: "turn-" + strconv.FormatInt(state.Turn, 10) + "-user", Role: "user",
			Parts: []UIPart{{Type: "text", Text: running}}})
	}
	return out, nil
}

// historyBuilder builds a chat's UI messages from its stored ones.
type historyBuilder struct {
	h         *Handler
	a         *agent.Agent
	store     memory.Store
	sessionID string
	// results are the tool messages by call id; open the open calls, by
	// call id; pending the approvals that wait, by approval id; forms the
	// open forms, by call id.
	results map[string]memory.Message
	open    map[string]memory.OpenCall
	pending map[string]approval.PendingApproval
	decided map[string]memory.Approval
	forms   map[string]interact.PendingForm
}

// index reads what the calls of msgs need: their results, and the state
// of those still open.
func (b *historyBuilder) index(ctx context.Context, msgs []memory.Message, open []memory.OpenCall) error {
	b.results = map[string]memory.Message{}
	for _, m := range msgs {
		if m.Role == memory.RoleTool {
			b.results[m.ToolCallID] = m
		}
	}
	b.open = map[string]memory.OpenCall{}
	b.decided = map[string]memory.Approval{}
	approvals, _ := b.store.(memory.ApprovalStore)
	asks := false
	for _, oc := range open {
		b.open[oc.CallID] = oc
		if oc.ApprovalID != "" && !oc.Executing {
			asks = true
			if approvals != nil {
				ap, err := approvals.GetApproval(ctx, oc.ApprovalID)
				switch {
				case errors.Is(err, memory.ErrNotFound):
				case err != nil:
					return fmt.Errorf("reading approval %s: %w", oc.ApprovalID, err)
				case ap.Decided:
					b.decided[oc.ApprovalID] = ap
				}
			}
		}
	}
	b.pending = map[string]approval.PendingApproval{}
	b.forms = map[string]interact.PendingForm{}
	if !asks && len(open) == 0 {
		return nil
	}
	pendingApprovals, openForms, err := b.h.b.Pending(ctx, b.sessionID)
	if err != nil {
		return err
	}
	if asks {
		for _, p := range pendingApprovals {
			b.pending[p.ApprovalID] = p
		}
	}
	if len(open) > 0 {
		for _, f := range openForms {
			b.forms[f.CallID] = f
		}
	}
	return nil
}

// build groups msgs: each user message, and the assistant and tool
// messages after it as one assistant message.
func (b *historyBuilder) build(msgs []memory.Message) []UIMessage {
	out := []UIMessage{}
	var cur *UIMessage
	for _, m := range msgs {
		if m.Hook {
			continue // sent to the model, never shown
		}
		switch m.Role {
		case memory.RoleUser:
			cur = nil
			out = append(out, UIMessage{ID: "msg-" + strconv.FormatInt(m.ID, 10), Role: "user",
				Parts: []UIPart{{Type: "text", Text: m.Content}}})
		case memory.RoleAssistant:
			if cur == nil {
				out = append(out, UIMessage{ID: "msg-" + strconv.FormatInt(m.ID, 10), Role: "assistant", Parts: []UIPart{}})
				cur = &out[len(out)-1]
			}
			if text := b.a.VisibleText(m.Content); text != "" {
				cur.Parts = append(cur.Parts, UIPart{Type: "text", Text: text, State: "done"})
			}
			for _, c := range m.ToolCalls {
				cur.Parts = append(cur.Parts, b.call(c)...)
			}
		}
	}
	// The last message waits when one of its calls does.
	if n := len(out); n > 0 && out[n-1].Role == "assistant" {
		for _, p := range out[n-1].Parts {
			if p.State == "approval-requested" || p.Type == "data-planround-form" {
				out[n-1].Metadata = map[string]any{"planround": map[string]any{"status": "waiting"}}
				break
			}
		}
	}
	return out
}

// call returns the parts of a stored call: its tool part in the state it
// ended in or waits in, and the form it waits for.
func (b *historyBuilder) call(c memory.ToolCall) []UIPart {
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	meta := map[string]any{"arguments_text": string(args)}
	p := UIPart{Type: "dynamic-tool", ToolCallID: c.ID, ToolName: c.Name, ProviderExecuted: true,
		Input: args, State: "input-available"}
	var parts []UIPart
	if res, ok := b.results[c.ID]; ok {
		switch {
		case res.Outcome == memory.OutcomeResult:
			p.State, p.Output = "output-available", &res.Content
		case res.Cause == string(agent.CauseUser) || res.Cause == string(agent.CausePolicy):
			no := false
			p.State, p.Approval = "output-denied", &UIApproval{Approved: &no, Reason: res.Content}
		default:
			p.State, p.ErrorText = "output-error", res.Content
			if p.ErrorText == "" {
				p.ErrorText = "the call ended without a result"
			}
		}
		if res.Cause != "" {
			meta["cause"] = res.Cause
		}
	} else if oc, ok := b.open[c.ID]; ok && oc.ApprovalID != "" && !oc.Executing {
		if pa, ok := b.pending[oc.ApprovalID]; ok {
			p.State, p.Approval = "approval-requested", &UIApproval{ID: oc.ApprovalID}
			if pa.Call.ArgumentsDigest != "" {
				meta["arguments_digest"] = pa.Call.ArgumentsDigest
			}
			if pa.Call.Hints != nil {
				meta["hints"] = pa.Call.Hints
			}
			if len(pa.Call.Details) > 0 {
				meta["details"] = pa.Call.Details
			}
			if pa.Call.MustAsk {
				meta["must_ask"] = true
			}
		} else if ap, ok := b.decided[oc.ApprovalID]; ok {
			yes := ap.Decision.Approved
			p.State, p.Approval = "approval-responded", &UIApproval{ID: oc.ApprovalID, Approved: &yes, Reason: ap.Decision.Reason}
		}
	} else if f, ok := b.forms[c.ID]; ok {
		name, payload := "form", any(f.FormRequest)
		if f.Elicitation != nil {
			name, payload = "elicitation", f.Elicitation
		}
		parts = append(parts, UIPart{Type: "data-planround-" + name, ID: f.FormID,
			Data: map[string]any{"toolCallId": c.ID, "payload": payload}})
	}
	p.ToolMetadata = map[string]any{"planround": meta}
	return append([]UIPart{p}, parts...)
}
