package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/httpjson"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/turn"
)

// NewHandler returns the http.Handler that serves useChat's
// DefaultChatTransport: mount it at the transport's api ("/api/chat") and
// below it (the reconnect and stop paths are under it):
//
//	h, err := aisdk.NewHandler(ui.Config{Runner: r, Authorize: owner})
//	mux.Handle("/api/chat", h)
//	mux.Handle("/api/chat/", h)
//
// It serves:
//
//   - POST {api}: a chat request (id, messages, trigger). When the last
//     message is the user's, its text starts a turn of session id, whose
//     events are streamed as the new assistant message. When the last
//     message is the assistant's, the approval responses on its tool parts
//     (addToolApprovalResponse) decide their pending approvals, each bound
//     to the call the part shows (its id, tool and input: a part whose
//     call is not the approval's is refused with 409; the input as the
//     client writes it back, with numbers in JavaScript's own way, such as
//     2.5 for 2.50, is the same input), and the turn is streamed on from
//     there as the continuation of that message. Responses to approvals
//     decided already (by an earlier request, or in another tab) while
//     the turn runs continue the message from where it stopped, at those
//     approvals, with the decisions taken (a tool-approval-response chunk
//     for one that is not the client's). A form
//     is answered with the request's body field planround.form ({"id",
//     "answers"} for an ask_user_question form; {"id", "action",
//     "content"} for an MCP elicitation), sent with sendMessage(undefined,
//     {body: ...}). A new message while the session's turn waits for a
//     person stops that turn first (its approvals and forms are
//     cancelled).
//   - GET {api}/{id}/stream: the reconnect of useChat's resume: the turn
//     in progress from its start, or 204 when none is.
//   - GET {api}/{id}/messages: the chat's messages for a page that loads
//     it again, as the ai package's client keeps them (see
//     Handler.Messages): give them to useChat or AbstractChat as messages,
//     then call resumeStream for a turn in progress. A call that waits for
//     its approval is a tool part in the state "approval-requested",
//     answered as in the stream. An unknown chat has none.
//   - POST {api}/{id}/stop: interrupts the session's turn and cancels its
//     approvals and forms; it answers {"success":true,"was_active":bool}
//     once the turn has stopped (false: nothing ran), so the next message
//     is not refused.
//
// A response streams until the turn ends or waits for a person (an
// approval, a form): the client answers with its next request. The
// session's history is the Store's: the messages the client sends are
// read for the last one only.
func NewHandler(cfg ui.Config) (*Handler, error) {
	b, err := turn.NewBackend("aisdk", Via, cfg)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: b.Config, b: b}, nil
}

// Via is the audit's name for decisions and answers taken through the
// handler.
const Via = "ai-sdk"

// Handler is the endpoint of useChat's DefaultChatTransport (see NewHandler).
type Handler struct {
	cfg ui.Config
	b   turn.Backend
	// mangle is the Writers' mangle (tests).
	mangle func(typ string) int
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.EscapedPath(), "/")
	switch {
	case strings.HasSuffix(path, "/stream"):
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		h.reconnect(w, r, chatID(path, "/stream"))
	case strings.HasSuffix(path, "/messages"):
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		h.history(w, r, chatID(path, "/messages"))
	case strings.HasSuffix(path, "/stop"):
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		h.stop(w, r, chatID(path, "/stop"))
	default:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		h.chat(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	httpjson.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
}

// chatID returns the chat id of a path that ends with /{id}{suffix}.
func chatID(path, suffix string) string {
	path = strings.TrimSuffix(path, suffix)
	seg := path[strings.LastIndexByte(path, '/')+1:]
	id, err := url.PathUnescape(seg)
	if err != nil {
		return ""
	}
	return id
}

// chatRequest is the body DefaultChatTransport sends.
type chatRequest struct {
	ID        string            `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   string            `json:"trigger"`
	MessageID string            `json:"messageId"`
	Planround *struct {
		Form *formAnswer `json:"form"`
	} `json:"planround"`
}

// formAnswer answers a form.
type formAnswer struct {
	ID      string           `json:"id"`
	Answers interact.Answers `json:"answers"`
	Action  string           `json:"action"`
	Content map[string]any   `json:"content"`
}

// uiMessage is the part of a UIMessage the handler reads.
type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

type uiPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// toolName returns the tool of a tool part: a dynamic tool part's
// toolName, or what follows "tool-" in a static one's type.
func (p *uiPart) toolName() string {
	if p.Type == "dynamic-tool" {
		return p.ToolName
	}
	return strings.TrimPrefix(p.Type, "tool-")
}

func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !httpjson.Decode(w, r, &req, h.cfg.MaxBodyBytes) {
		return
	}
	if terr := turn.CheckSessionID(req.ID); terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	principal, ok := h.cfg.Authorize.Check(w, r, req.ID)
	if !ok {
		return
	}
	if req.Trigger == "regenerate-message" {
		httpjson.WriteError(w, http.StatusBadRequest, "regenerating a message is not supported: send a new message")
		return
	}
	if len(req.Messages) == 0 {
		httpjson.WriteError(w, http.StatusBadRequest, "missing messages")
		return
	}
	var last uiMessage
	if err := json.Unmarshal(req.Messages[len(req.Messages)-1], &last); err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, "the last message: "+err.Error())
		return
	}
	ctx := r.Context()
	var form *formAnswer
	if req.Planround != nil {
		form = req.Planround.Form
	}
	if last.Role == "user" && form == nil {
		h.newTurn(w, r, req.ID, last)
		return
	}

	// Answers: to approvals on the last assistant message, or to a form.
	state, err := h.cfg.Runner.Log(ctx, req.ID)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// answered: the request answers something; took: something that was
	// still pending (a client that retries answers what it answered, and
	// a second tab what the first one did). asked: the approvals and form
	// it answers; mine: its approval responses not taken.
	answered, took := false, false
	asked := map[string]bool{}
	mine := map[string]bool{}
	if form != nil {
		reply := interact.FormReply{SessionID: req.ID, FormID: form.ID, Answers: form.Answers, By: principal}
		if form.Action != "" {
			reply.Elicitation = &interact.ElicitationAnswer{Action: form.Action, Content: form.Content}
		} else if form.Answers == nil {
			httpjson.WriteError(w, http.StatusBadRequest, "a form answer has no answers")
			return
		}
		open, terr := h.b.Answer(ctx, reply)
		if terr != nil {
			httpjson.WriteError(w, terr.Status, terr.Msg)
			return
		}
		answered, took = true, open
		asked[form.ID] = true
	}
	if last.Role == "assistant" {
		n := 0
		for _, p := range last.Parts {
			if p.State == "approval-responded" {
				n++
			}
		}
		if n > turn.MaxAnswers {
			httpjson.WriteError(w, http.StatusBadRequest, fmt.Sprintf("the message answers %d approvals, more than the %d a request may", n, turn.MaxAnswers))
			return
		}
		for i := range last.Parts {
			p := &last.Parts[i]
			if p.State != "approval-responded" || p.Approval == nil || p.Approval.Approved == nil {
				continue
			}
			pending, terr := h.b.Decide(ctx, req.ID, principal, turn.Decision{
				ApprovalID: p.Approval.ID, CallID: p.ToolCallID, Tool: p.toolName(),
				Arguments: p.Input, Approved: *p.Approval.Approved, Reason: p.Approval.Reason,
			})
			if terr != nil {
				httpjson.WriteError(w, terr.Status, terr.Msg)
				return
			}
			answered, took = true, took || pending
			asked[p.Approval.ID] = true
			if !pending {
				mine[p.Approval.ID] = *p.Approval.Approved
			}
		}
	}
	const stale = "the approvals or form this request answers are no longer pending (answered already, timed out or cancelled)"
	switch {
	case answered && took:
		h.stream(w, r, req.ID, state.Last, state.Turn, &continuation{known: known(last)})
	case answered && state.Running():
		// Decided already, by this client's earlier request or another
		// tab, while the turn runs: the message goes on from where it
		// stopped, at what it answers, with the decisions taken.
		at, ok := h.b.AskedAt(ctx, req.ID, state.Turn-1, state.Last, asked)
		if !ok {
			httpjson.WriteError(w, http.StatusConflict, stale+": load the conversation again")
			return
		}
		h.stream(w, r, req.ID, at, state.Turn, &continuation{known: known(last), taken: h.taken(ctx, req.ID, mine)})
	case answered:
		httpjson.WriteError(w, http.StatusConflict, stale)
	case state.Running():
		// A client that sends its messages again while the turn runs
		// (a retry): the turn from its start.
		h.stream(w, r, req.ID, state.Turn-1, state.Turn, nil)
	default:
		httpjson.WriteError(w, http.StatusBadRequest, "nothing to do: the last message is not the user's and answers no approval or form")
	}
}

// continuation is what a response that continues the client's last
// assistant message knows of it.
type continuation struct {
	// known are its tool parts, which are not shown again.
	known map[string]call
	// taken are the decisions taken by another request on approvals it
	// answered otherwise.
	taken []taken
}

// taken is a decision on an approval.
type taken struct {
	approvalID string
	approved   bool
	reason     string
}

// taken returns the decisions taken on the approvals of mine (approval id:
// the client's decision) that differ from the client's, as the audit
// keeps them.
func (h *Handler) taken(ctx context.Context, sessionID string, mine map[string]bool) []taken {
	if len(mine) == 0 {
		return nil
	}
	var out []taken
	left := len(mine)
	for d, err := range h.cfg.Runner.Decisions(ctx, approval.DecisionQuery{SessionID: sessionID}) {
		if err != nil {
			h.cfg.Logger.Warn("aisdk: reading the decisions", "session", sessionID, "err", err)
			break
		}
		approved, ok := mine[d.ApprovalID]
		if !ok {
			continue
		}
		if d.Decision.Approved != approved {
			out = append(out, taken{d.ApprovalID, d.Decision.Approved, d.Decision.Reason})
		}
		if left--; left == 0 {
			break
		}
	}
	return out
}

// known returns the tool parts of the client's message m, which a
// continuation does not show again.
func known(m uiMessage) map[string]call {
	if m.Role != "assistant" {
		return nil
	}
	calls := map[string]call{}
	for _, p := range m.Parts {
		if p.ToolCallID == "" || (p.Type != "dynamic-tool" && !strings.HasPrefix(p.Type, "tool-")) {
			continue
		}
		calls[p.ToolCallID] = call{
			input: p.State != "input-streaming",
			done:  strings.HasPrefix(p.State, "output-"),
		}
	}
	return calls
}

// newTurn starts a turn with the user's message m and streams it.
func (h *Handler) newTurn(w http.ResponseWriter, r *http.Request, sessionID string, m uiMessage) {
	var text strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" && p.Text != "" {
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(p.Text)
		}
	}
	if text.Len() == 0 {
		httpjson.WriteError(w, http.StatusBadRequest, "the user's message has no text")
		return
	}
	t, terr := h.start(r.Context(), agent.Input{SessionID: sessionID, Message: text.String()})
	if terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	h.stream(w, r, sessionID, t.Seq-1, t.Seq, nil)
}

// start starts a turn; when the session's turn waits for a person, that
// turn is stopped first (the user moved on without answering).
func (h *Handler) start(ctx context.Context, in agent.Input) (*runner.Turn, *turn.Error) {
	t, terr := h.b.Start(ctx, in)
	if terr == nil || terr.Status != http.StatusConflict || !h.b.Waiting(ctx, in.SessionID) {
		return t, terr
	}
	h.interrupt(in.SessionID)
	// The stopped turn ends in its own goroutine: try again, bounded.
	for wait := 10 * time.Millisecond; wait < 3*time.Second; wait *= 2 {
		select {
		case <-ctx.Done():
			return nil, &turn.Error{Status: http.StatusServiceUnavailable, Msg: "the request ended"}
		case <-time.After(wait):
		}
		if t, terr = h.b.Start(ctx, in); terr == nil || terr.Status != http.StatusConflict {
			return t, terr
		}
	}
	return t, terr
}

// stream answers with the session's events after Seq after as a UI
// message stream, until the turn ends or waits for a person: as the new
// message "turn-<turnSeq>", or, with cont, as the continuation of the
// client's last message after a decision (its tool parts known, and the
// decisions taken on its approvals by other requests written first).
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sessionID string, after, turnSeq int64, cont *continuation) {
	for k, v := range Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sw := NewWriter(w, rc.Flush)
	sw.mangle = h.mangle
	sw.turn = turnSeq
	decided := cont != nil
	if decided {
		sw.continues(cont.known)
		sw.Start("")
		for _, d := range cont.taken {
			sw.approvalResponse(d.approvalID, d.approved, d.reason)
		}
	} else {
		sw.Start(fmt.Sprintf("turn-%d", turnSeq))
	}
	ctx := r.Context()
	last, end, err := h.b.Follow(ctx, sessionID, after, decided, func(e runner.Event) bool {
		sw.Event(e)
		return sw.Err() == nil
	})
	switch {
	case end == turn.EndWaiting:
		sw.Waiting(last)
	case end == turn.EndGone && errors.Is(err, runner.ErrEventsLost):
		sw.Error("the turn's events are no longer kept: load the conversation again")
		sw.finish("other", map[string]any{"status": "lost"})
	case end == turn.EndGone && (ctx.Err() != nil || sw.Err() != nil):
		if !h.cfg.KeepRunningOnDisconnect {
			h.interrupt(sessionID)
		}
		return
	case end == turn.EndGone && err != nil:
		h.cfg.Logger.Warn("aisdk: following a turn", "session", sessionID, "err", err)
		sw.Error(err.Error())
		sw.finish("error", map[string]any{"status": "error"})
	case end == turn.EndTurn && !sw.finished():
		// The session was deleted, or a turn stayed suspended.
		sw.closeAll()
		sw.finish("other", map[string]any{"status": "ended"})
	}
	sw.Done()
}

// reconnect answers useChat's resume: the turn in progress from its start.
func (h *Handler) reconnect(w http.ResponseWriter, r *http.Request, sessionID string) {
	if terr := turn.CheckSessionID(sessionID); terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	if _, ok := h.cfg.Authorize.Check(w, r, sessionID); !ok {
		return
	}
	state, err := h.cfg.Runner.Log(r.Context(), sessionID)
	if err != nil {
		httpjson.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !state.Running() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.stream(w, r, sessionID, state.Turn-1, state.Turn, nil)
}

// stop interrupts the session's turn and cancels what it asks.
func (h *Handler) stop(w http.ResponseWriter, r *http.Request, sessionID string) {
	if terr := turn.CheckSessionID(sessionID); terr != nil {
		httpjson.WriteError(w, terr.Status, terr.Msg)
		return
	}
	if _, ok := h.cfg.Authorize.Check(w, r, sessionID); !ok {
		return
	}
	active := h.interrupt(sessionID)
	httpjson.WriteJSON(w, http.StatusOK, stopAnswer{Success: true, WasActive: active})
}

// interrupt stops the session's turn and cancels what it asks (see
// turn.Backend.Stop); it reports whether there was something to stop.
func (h *Handler) interrupt(sessionID string) bool {
	stopped, err := h.b.Stop(sessionID)
	if err != nil {
		h.cfg.Logger.Warn("aisdk: stopping a turn", "session", sessionID, "err", err)
	}
	return stopped
}

// stopAnswer is the answer to a stop: {"success":true,"was_active":bool}.
type stopAnswer struct {
	Success   bool `json:"success"`
	WasActive bool `json:"was_active"`
}
