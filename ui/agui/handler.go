package agui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/turn"
)

// Via names AG-UI in the audit of the decisions and answers taken through
// a Handler.
const Via = "ag-ui"

// Handler serves AG-UI runs over HTTP: a POST of a RunAgentInput is
// answered with the run's events as server-sent events (see the package
// doc). It is safe for concurrent use.
type Handler struct {
	cfg     ui.Config
	backend turn.Backend
	// filter, set by tests only, is given to every request's Encoder.
	filter func(typ string) filterAction
}

// NewHandler returns the Handler of cfg. It fails without a Runner or an
// Authorize. cfg.Authorize is called with every request and its thread id
// (the planround session id) before the handler does anything; a thread id
// is no credential.
func NewHandler(cfg ui.Config) (*Handler, error) {
	b, err := turn.NewBackend("agui", Via, cfg)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: b.Config, backend: b}, nil
}

// ServeHTTP answers one run. Before the stream starts a refused request is
// answered with a JSON {"error"} and its status: 400 for a malformed input
// or answer, 401/403 from Authorize (403 also for an answer to another
// thread's interrupt), 405 for a method other than POST, 409 when a run is
// active already or when an approval's answer comes with a call that is not
// the approval's (its name or arguments differ: nothing is decided), 413 for
// a body over Config.MaxBodyBytes, 415 for a body that is not JSON, 503
// when the runner is busy or closing.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in runInput
	if !httpjson.Decode(w, r, &in, h.cfg.MaxBodyBytes) {
		return
	}
	if err := in.validate(); err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	principal, ok := h.cfg.Authorize.Check(w, r, in.ThreadID)
	if !ok {
		return
	}
	ctx := r.Context()
	sid := in.ThreadID
	if len(in.Resume) > 0 {
		h.resume(ctx, w, &in, principal)
		return
	}
	text, ok := in.lastUserText()
	if !ok || text == "" {
		httpjson.WriteError(w, http.StatusBadRequest, "the run input ends with no user message to start a turn with, and resumes nothing")
		return
	}
	t, terr := h.backend.Start(ctx, agent.Input{SessionID: sid, Message: text})
	if terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	h.follow(ctx, w, &in, t.Seq-1, false)
}

// resume answers the interrupts the entries name, then follows the turn on.
// Every entry is checked before any is given: an approval's answer must
// come with the call the approval is for, as the client holds it in its
// messages. An input that also brings a new user message (the person moved
// on instead of answering, and the client cancels what waits) runs that
// message once the turn answered is over (see moveOn).
func (h *Handler) resume(ctx context.Context, w http.ResponseWriter, in *runInput, principal string) {
	sid := in.ThreadID
	text, moveOn := in.newUserText()
	// Where the log is before deciding: the decision's events come after.
	st, err := h.cfg.Runner.Log(ctx, sid)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, "reading the thread's events: "+err.Error())
		return
	}
	approvals, forms, err := h.backend.Pending(ctx, sid)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var decisions []turn.Decision
	var replies []interact.FormReply
	for _, re := range in.Resume {
		if d, found, terr := approvalDecision(in, re, approvals); terr != nil {
			httpjson.WriteError(w, terr.Status, terr.Msg)
			return
		} else if found {
			decisions = append(decisions, d)
			continue
		}
		if fr, found, terr := formReply(re, forms); terr != nil {
			if moveOn && re.Status == statusCancelled {
				// The person moved on: the form is dismissed.
				replies = append(replies, interact.FormReply{SessionID: sid, FormID: fr.FormID, Cancel: true, By: principal})
				continue
			}
			httpjson.WriteError(w, terr.Status, terr.Msg)
			return
		} else if found {
			fr.SessionID, fr.By = sid, principal
			replies = append(replies, fr)
		}
		// Neither pending: answered already (by an earlier request of this
		// client, or another one), timed out or cancelled. The turn is
		// followed on.
	}
	decided := false
	for _, d := range decisions {
		pending, terr := h.backend.Decide(ctx, sid, principal, d)
		if terr != nil {
			httpjson.WriteError(w, terr.Status, terr.Msg)
			return
		}
		decided = decided || pending
	}
	for _, fr := range replies {
		open, terr := h.backend.Answer(ctx, fr)
		if terr != nil {
			httpjson.WriteError(w, terr.Status, terr.Msg)
			return
		}
		decided = decided || open
	}
	if moveOn {
		h.moveOn(ctx, w, in, st, decided, text)
		return
	}
	if !decided && (len(approvals)+len(forms) > 0 || !st.Running()) {
		// The entries were stale. What waits for a person now (a second
		// approval of the turn, say) is what the client must answer: the run
		// finishes at once with its interrupts. With nothing waiting and no
		// turn in progress the run is over already.
		h.waiting(w, in, st.Turn, approvals, forms)
		return
	}
	h.follow(ctx, w, in, st.Last, true)
}

// moveOn answers an input that resumes the turn and brings a new user
// message, text: the pattern of an AG-UI client whose person writes instead
// of answering (its resume entries cancel what waits). The entries were
// given (decided tells whether one took); st is the log before. The turn
// they answered is followed to its end; when it waits for a person again,
// or something of the thread still does, it is stopped (what it waits for
// is cancelled); then text starts a turn, followed in the same run. A new
// turn that cannot start ends the run with RUN_ERROR: the message is
// answered or refused, never dropped.
func (h *Handler) moveOn(ctx context.Context, w http.ResponseWriter, in *runInput, st runner.LogState, decided bool, text string) {
	sid := in.ThreadID
	enc := h.encoder(w, in)
	// The calls the client holds are those before the new message.
	before := runInput{Messages: in.Messages[:len(in.Messages)-1]}
	enc.Known(before.toolCallIDs()...)
	if enc.Begin() != nil {
		h.gone(sid)
		return
	}
	encode := func(e runner.Event) bool { return enc.Encode(e) == nil }
	last, end := st.Last, turn.EndTurn
	var err error
	waits := h.backend.Waiting(ctx, sid)
	if decided || st.Running() && !waits {
		// The answered turn goes on (resumed, when it was suspended).
		last, end, err = h.backend.Follow(ctx, sid, last, decided, encode)
		waits = end == turn.EndWaiting || end == turn.EndTurn && err == nil && h.backend.Waiting(ctx, sid)
	}
	if waits {
		if _, err := h.backend.Stop(sid); err != nil {
			enc.Fail("stopping the turn that waits, to run the new message: "+err.Error(), "error")
			return
		}
		var now runner.LogState
		if now, err = h.cfg.Runner.Log(ctx, sid); err == nil && now.Running() {
			_, end, err = h.backend.Follow(ctx, sid, last, false, encode)
		}
	}
	if h.ended(ctx, enc, sid, end, err) {
		return
	}
	t, terr := h.backend.Start(ctx, agent.Input{SessionID: sid, Message: text})
	if terr != nil {
		enc.Fail("the new message was not run: "+terr.Msg, "not_started")
		return
	}
	_, end, err = h.backend.Follow(ctx, sid, t.Seq-1, false, encode)
	if !h.ended(ctx, enc, sid, end, err) {
		enc.End()
	}
}

// ended handles a follow that ended otherwise than with its turn (see
// follow) and reports whether it did.
func (h *Handler) ended(ctx context.Context, enc *Encoder, sid string, end turn.End, err error) bool {
	switch {
	case end == turn.EndGone && (ctx.Err() != nil || enc.err != nil):
		h.gone(sid)
	case err != nil:
		code := "error"
		if errors.Is(err, runner.ErrEventsLost) {
			code = "events_lost"
		}
		enc.Fail("following the run: "+err.Error(), code)
	default:
		return false
	}
	return true
}

// waiting answers with a run that finishes with the interrupts of what
// waits for a person in the thread, as the stores list it (or with the
// cancelled outcome when nothing does). turnSeq is the turn in progress,
// whose rounds' messages hold the calls the client was not shown.
func (h *Handler) waiting(w http.ResponseWriter, in *runInput, turnSeq int64, approvals []approval.PendingApproval, forms []interact.PendingForm) {
	enc := h.encoder(w, in)
	enc.turn = turnSeq
	if enc.Begin() != nil {
		return
	}
	shown := func(id string) (string, bool) {
		if c, ok := in.findCall(id); ok {
			return c.ID, true
		}
		return id, false
	}
	for _, p := range approvals {
		call := p.Call
		call.State, call.ApprovalRequired, call.ApprovalID = agent.StateApprovalRequired, true, p.ApprovalID
		id, held := shown(call.ID)
		enc.ask(id, held, &agent.Chunk{Kind: agent.KindToolCall, Round: p.Round, Tool: &call})
	}
	for _, f := range forms {
		var side any = f.FormRequest
		if f.Elicitation != nil {
			side = *f.Elicitation
		}
		id, held := shown(f.CallID)
		enc.ask(id, held, &agent.Chunk{Kind: agent.KindSide, Tool: &agent.ToolCall{ID: f.CallID}, Side: side})
	}
	enc.End()
}

// approvalDecision returns the decision a resume entry gives to a pending
// approval, bound to the call the client holds for it.
func approvalDecision(in *runInput, re resumeEntry, pending []approval.PendingApproval) (turn.Decision, bool, *turn.Error) {
	var p *approval.PendingApproval
	for i := range pending {
		if pending[i].ApprovalID == re.InterruptID {
			p = &pending[i]
		}
	}
	if p == nil {
		return turn.Decision{}, false, nil
	}
	c, ok := in.findCall(p.Call.ID)
	if !ok {
		return turn.Decision{}, false, &turn.Error{Status: http.StatusConflict, Msg: "the messages hold no tool call " + p.Call.ID + " for approval " + re.InterruptID + ": send the call the person decided on"}
	}
	args := json.RawMessage(c.Function.Arguments)
	if c.Function.Name != p.Call.Name || agent.ArgumentsDigest(args) != p.Call.ArgumentsDigest && !turn.SameArguments(p.Call.Arguments, args) {
		// Checked here, before anything is decided, and again when it is
		// (a client that parsed the arguments may write their numbers
		// another way: the same call).
		return turn.Decision{}, false, &turn.Error{Status: http.StatusConflict, Msg: "the approval response is not for the call the approval shows (its tool or arguments differ)"}
	}
	d := turn.Decision{ApprovalID: p.ApprovalID, CallID: c.ID, Tool: c.Function.Name, Arguments: args}
	if re.Status == statusCancelled {
		d.Reason = "the person cancelled the approval"
		return d, true, nil
	}
	var v struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(re.Payload, &v); err != nil || v.Approved == nil {
		return turn.Decision{}, false, &turn.Error{Status: http.StatusBadRequest, Msg: `the answer to approval ` + re.InterruptID + ` is {"approved": true|false, "reason": "..."}`}
	}
	d.Approved, d.Reason = *v.Approved, v.Reason
	return d, true, nil
}

// formReply returns the answer a resume entry gives to an open form.
func formReply(re resumeEntry, open []interact.PendingForm) (interact.FormReply, bool, *turn.Error) {
	var f *interact.PendingForm
	for i := range open {
		if open[i].FormID == re.InterruptID {
			f = &open[i]
		}
	}
	if f == nil {
		return interact.FormReply{}, false, nil
	}
	r := interact.FormReply{FormID: f.FormID}
	if f.Elicitation != nil {
		a := interact.ElicitationAnswer{Action: interact.ActionCancel}
		if re.Status == statusResolved {
			var v struct {
				Action string `json:"action"`
			}
			_ = json.Unmarshal(re.Payload, &v)
			switch v.Action {
			case interact.ActionAccept, interact.ActionDecline, interact.ActionCancel:
				a.Action = v.Action
			case "":
				a.Action = interact.ActionAccept
				if err := json.Unmarshal(re.Payload, &a.Content); err != nil {
					return r, false, &turn.Error{Status: http.StatusBadRequest, Msg: "the answer to form " + re.InterruptID + " is the content its responseSchema describes: " + err.Error()}
				}
			}
		}
		r.Elicitation = &a
		return r, true, nil
	}
	if re.Status == statusCancelled {
		return r, false, &turn.Error{Status: http.StatusBadRequest, Msg: "form " + re.InterruptID + " cannot be cancelled: answer it, or stop the run"}
	}
	if err := json.Unmarshal(re.Payload, &r.Answers); err != nil || r.Answers == nil {
		return r, false, &turn.Error{Status: http.StatusBadRequest, Msg: "the answer to form " + re.InterruptID + " is an object of the answers by question id"}
	}
	return r, true, nil
}

func (h *Handler) encoder(w http.ResponseWriter, in *runInput) *Encoder {
	h.streamHeaders(w)
	enc := NewEncoder(w, in.ThreadID, in.RunID)
	enc.Known(in.toolCallIDs()...)
	enc.filter = h.filter
	return enc
}

func (h *Handler) streamHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
}

// follow streams the thread's events after Seq after until its turn ends
// or waits for a person. A client that goes away stops the following, and
// interrupts the turn unless Config.KeepRunningOnDisconnect.
func (h *Handler) follow(ctx context.Context, w http.ResponseWriter, in *runInput, after int64, decided bool) {
	enc := h.encoder(w, in)
	if enc.Begin() != nil {
		h.gone(in.ThreadID)
		return
	}
	_, end, err := h.backend.Follow(ctx, in.ThreadID, after, decided, func(e runner.Event) bool {
		return enc.Encode(e) == nil
	})
	if !h.ended(ctx, enc, in.ThreadID, end, err) {
		enc.End()
	}
}

// gone stops the turn of a client that went away (turn.Backend.Stop:
// bounded, wherever the turn runs).
func (h *Handler) gone(sid string) {
	if h.cfg.KeepRunningOnDisconnect {
		return
	}
	_, _ = h.backend.Stop(sid)
}
