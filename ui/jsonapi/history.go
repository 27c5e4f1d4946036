package jsonapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// HistoryEntry is one stored message as GET {prefix}/history returns it.
type HistoryEntry struct {
	memory.Message
	// Text is an assistant message's content with its control tags
	// removed, as a client shows it (agent.Agent.VisibleText).
	Text string `json:"text,omitempty"`
	// Images describe a user message's images ("image/png, 48 KB", or the
	// URL), which a client shows as placeholders: their bytes stay on the
	// server. It hides Message.Images in the JSON.
	Images []string `json:"images,omitempty"`
	// OpenCalls are the calls of an assistant message that have no tool
	// message yet (a turn that waits for decisions, or runs them), with
	// what a client needs to draw them: answerable ones with their
	// approval id.
	OpenCalls []OpenCall `json:"open_calls,omitempty"`
}

// OpenCall is a call of a stored assistant message whose tool message is
// not stored yet (memory.OpenCall), as GET {prefix}/history tells it.
type OpenCall struct {
	CallID string `json:"call_id"`
	// State is "approval" (waits for a decision: answerable with
	// ApprovalID), "pending" (its approval is not requested yet),
	// "approved" or "rejected" (decided: the turn goes on when it is
	// resumed), or "executing" (its tool was running).
	State      string `json:"state"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Tool and ArgumentsDigest are, with CallID, the call the approval
	// shows (approval.PendingApproval.Call), as a decision names it: set
	// with ApprovalID.
	Tool            string `json:"tool,omitempty"`
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Reason is a rejection's reason.
	Reason string `json:"reason,omitempty"`
	// Form is the open form of an executing ask_user_question call (one
	// that waits for the person's answers, perhaps in a suspended turn).
	Form *interact.FormRequest `json:"form,omitempty"`
	// Elicitation is the open form of an MCP server's request for input
	// of an executing call.
	Elicitation *interact.ElicitationRequest `json:"elicitation,omitempty"`
}

// history answers GET /history?session_id=...
func (h *Handler) history(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if _, ok := h.authorized(w, r, id); !ok {
		return
	}
	ctx := r.Context()
	var (
		state runner.LogState
		msgs  []memory.Message
		open  map[int64][]OpenCall
		err   error
	)
	// The log, the messages, and the log again: a run that started or
	// ended in between is read again, so the messages and the number
	// agree.
	for range 3 {
		var before runner.LogState
		if before, err = h.b.Runner.Log(ctx, id); err != nil {
			break
		}
		if msgs, err = h.store.Messages(ctx, id, true); errors.Is(err, memory.ErrNotFound) {
			msgs, err = nil, nil
		}
		if err != nil {
			break
		}
		if open, err = h.openCalls(ctx, id); err != nil {
			break
		}
		if state, err = h.b.Runner.Log(ctx, id); err != nil || (state.Last == before.Last && state.Turn == before.Turn) {
			break
		}
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	seq := state.Last
	if state.Running() {
		msgs = slices.DeleteFunc(msgs, func(m memory.Message) bool { return m.ID > state.Started.History })
		seq = state.Turn - 1
		w.Header().Set(HeaderRunning, "true")
	}
	w.Header().Set(HeaderSeq, strconv.FormatInt(seq, 10))
	a := h.b.Runner.Agent()
	out := make([]HistoryEntry, 0, len(msgs))
	for _, m := range msgs {
		if m.Hook {
			continue // sent to the model, never shown
		}
		e := HistoryEntry{Message: m, OpenCalls: open[m.ID]}
		if m.Role == memory.RoleAssistant {
			e.Text = a.VisibleText(m.Content)
		}
		for _, img := range m.Images {
			e.Images = append(e.Images, img.String())
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, out)
}

// openCalls returns the session's open calls by the id of their assistant
// message, when the Store keeps them; nil otherwise.
func (h *Handler) openCalls(ctx context.Context, id string) (map[int64][]OpenCall, error) {
	calls, ok := h.store.(memory.CallLog)
	if !ok {
		return nil, nil
	}
	recs, err := calls.OpenCalls(ctx, id)
	if errors.Is(err, memory.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the open calls: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	approvals, _ := h.store.(memory.ApprovalStore)
	list, err := h.b.Runner.Pending(ctx, id)
	if err != nil {
		return nil, err
	}
	// The digests the approvals show, as the runner lists them: it gives a
	// record stored without one (by a version before digests) the digest
	// of its arguments.
	digests := make(map[string]string)
	for _, a := range list {
		if a.Approval != nil {
			digests[a.Approval.ApprovalID] = a.Approval.Call.ArgumentsDigest
		}
	}
	out := make(map[int64][]OpenCall)
	for _, rec := range recs {
		oc := OpenCall{CallID: rec.CallID, State: "pending", ApprovalID: rec.ApprovalID}
		switch {
		case rec.Executing:
			oc.State = "executing"
			oc.Form, oc.Elicitation = openForm(list, rec)
		case rec.ApprovalID != "" && approvals != nil:
			a, err := approvals.GetApproval(ctx, rec.ApprovalID)
			switch {
			case errors.Is(err, memory.ErrNotFound):
				// Requested but not stored: a resumed turn asks again.
			case err != nil:
				return nil, fmt.Errorf("reading approval %s: %w", rec.ApprovalID, err)
			case !a.Decided:
				oc.State = "approval"
				oc.Tool, oc.ArgumentsDigest = a.Tool, digests[a.ID]
			case a.Decision.Approved:
				oc.State = "approved"
			default:
				oc.State, oc.Reason = "rejected", a.Decision.Reason
			}
		}
		if oc.State != "approval" {
			oc.ApprovalID = "" // nothing to answer
		}
		out[rec.MessageID] = append(out[rec.MessageID], oc)
	}
	return out, nil
}

// openForm returns the open form of the executing call rec (a question
// form or an MCP server's request for input), or nils: the form whose id
// the record holds (a call that suspended its run while the form waits),
// or, for a record without one, the open form of its call id.
func openForm(list []runner.Ask, rec memory.OpenCall) (*interact.FormRequest, *interact.ElicitationRequest) {
	for _, a := range list {
		f := a.Form
		if f == nil {
			continue
		}
		if rec.ApprovalID == f.FormID || rec.ApprovalID == "" && rec.CallID == f.CallID {
			if f.Elicitation != nil {
				return nil, f.Elicitation
			}
			return &f.FormRequest, nil
		}
	}
	return nil, nil
}
