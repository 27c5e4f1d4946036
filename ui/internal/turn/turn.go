// Package turn holds what the front-end protocol handlers (ui/aisdk and
// ui/agui) share: starting a turn on a runner, taking a person's decision or
// form answer bound to what that person saw, and following a turn's events
// until it ends or waits for a person.
package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
)

// Backend is what a protocol handler drives: the host's ui.Config (the
// runner that runs the turns and takes the decisions and answers, the owner
// check every request goes through, the limits) and the protocol's name.
type Backend struct {
	ui.Config
	// Via names the protocol in the audit of decisions and answers.
	Via string
}

// NewBackend returns the Backend of cfg, its defaults filled in, for the
// handler of package pkg whose decisions and answers the audit names via.
// It fails when cfg lacks its Runner or its Authorize.
func NewBackend(pkg, via string, cfg ui.Config) (Backend, error) {
	switch {
	case cfg.Runner == nil:
		return Backend{}, errors.New(pkg + ": ui.Config.Runner is nil")
	case cfg.Authorize == nil:
		return Backend{}, errors.New(pkg + ": ui.Config.Authorize is nil; set one that checks the caller owns the session, or ui.AllowAnyCaller for a single-user loopback tool")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = ui.DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return Backend{Config: cfg, Via: via}, nil
}

// MaxSessionID is the longest session id (a chat or thread id) a handler
// takes, in bytes.
const MaxSessionID = 256

// MaxAnswers is the most approvals and forms one request may answer.
const MaxAnswers = 100

// CheckSessionID refuses a session id a client should never send: empty,
// longer than MaxSessionID, not UTF-8, or holding control characters (the
// id is a key in the store, in logs and in URLs).
func CheckSessionID(id string) *Error {
	switch {
	case id == "":
		return errorf(http.StatusBadRequest, "missing the chat id")
	case len(id) > MaxSessionID:
		return errorf(http.StatusBadRequest, "the chat id is longer than 256 bytes")
	case !utf8.ValidString(id):
		return errorf(http.StatusBadRequest, "the chat id is not UTF-8")
	case strings.ContainsFunc(id, unicode.IsControl):
		return errorf(http.StatusBadRequest, "the chat id holds a control character")
	}
	return nil
}

// Error is a request the handler refuses: its HTTP status and what it says.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func errorf(status int, msg string) *Error { return &Error{Status: status, Msg: msg} }

// busyPatience bounds how long Start tries again a message that the
// runner refused because the session's turn runs, and waits for no person:
// the client may have just dropped that turn's stream to stop it (AG-UI's
// abortRun, useChat's stop()), and sent its message before the server saw
// the stream go and stopped the turn. Once it is stopped, the runner waits
// for its wind-down itself.
const busyPatience = 2 * time.Second

// Start starts a turn on in (see runner.Runner.Start) and says why it could
// not in the words and status a client needs. A session whose turn runs is
// tried again for a moment (busyPatience), unless that turn waits for a
// person.
func (b *Backend) Start(ctx context.Context, in agent.Input) (*runner.Turn, *Error) {
	t, err := b.Runner.Start(ctx, in)
	if errors.Is(err, agent.ErrBusy) && !b.Waiting(ctx, in.SessionID) {
		deadline := time.Now().Add(busyPatience)
		for wait := 10 * time.Millisecond; errors.Is(err, agent.ErrBusy) && time.Now().Add(wait).Before(deadline); wait = min(2*wait, 200*time.Millisecond) {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, errorf(http.StatusServiceUnavailable, "the request ended")
			}
			t, err = b.Runner.Start(ctx, in)
		}
	}
	if err != nil {
		return nil, StartError(err)
	}
	return t, nil
}

// StartError says why runner.Runner.Start refused a turn, in the words and
// status a client needs (409 for a session whose turn runs, 503 for a
// runner at MaxRuns or shutting down, 500 otherwise); nil for a nil err.
func StartError(err error) *Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agent.ErrBusy):
		return errorf(http.StatusConflict, "a run is already active in this session: wait for it or stop it")
	case errors.Is(err, runner.ErrTooManyRuns):
		return errorf(http.StatusServiceUnavailable, "the server is busy (too many runs active): try again shortly")
	case errors.Is(err, runner.ErrClosed):
		return errorf(http.StatusServiceUnavailable, "the server is shutting down")
	default:
		return errorf(http.StatusInternalServerError, "starting the run: "+err.Error())
	}
}

// Waiting reports whether a turn of the session waits for a person: an
// approval or a form of it is pending.
func (b *Backend) Waiting(ctx context.Context, sessionID string) bool {
	p, err := b.Runner.Pending(ctx, sessionID)
	return err == nil && len(p) > 0
}

// Pending returns the session's pending approvals and open forms, each
// oldest first (runner.Runner.Pending).
func (b *Backend) Pending(ctx context.Context, sessionID string) ([]approval.PendingApproval, []interact.PendingForm, error) {
	list, err := b.Runner.Pending(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	var approvals []approval.PendingApproval
	var forms []interact.PendingForm
	for _, a := range list {
		switch {
		case a.Approval != nil:
			approvals = append(approvals, *a.Approval)
		case a.Form != nil:
			forms = append(forms, *a.Form)
		}
	}
	return approvals, forms, nil
}

// Stop stops the session (runner.Runner.Stop: its turn interrupted
// wherever it runs, its approvals and forms cancelled), within 10 seconds.
// It reports whether there was something to stop, and what failed.
func (b *Backend) Stop(sessionID string) (stopped bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.Runner.Stop(ctx, sessionID)
	return s.Any(), err
}

// Decision is a person's decision on an approval as a client sends it,
// with the call the client showed.
type Decision struct {
	ApprovalID string
	// CallID is the call's id as the client shows it: a sub-agent's call
	// may carry the ids of the calls above it ("call_1/call_7"), of which
	// the last names the call.
	CallID string
	// Tool is the tool's name and Arguments the arguments the person saw
	// as the client sends them back: the decision is taken only when they
	// are the approval's, or what the client made of them (SameArguments).
	Tool      string
	Arguments json.RawMessage
	Approved  bool
	Reason    string
}

// Decide gives d to the pending approval of session sessionID, from
// principal. It reports false, and no error, when the approval is no longer
// pending (decided already, by this client's earlier request or another
// one, timed out or cancelled): a client that sends its answered approvals
// again follows the turn on.
//
// The decision binds to the call the approval shows: its id, its tool and
// its arguments. A client that sends the arguments back as it read them
// (a JavaScript client writes 2.50 as 2.5, and 12345678901234567890 as
// 12345678901234567000) decides the call it was shown, whose arguments are
// those that run; arguments of another value are refused (409).
func (b *Backend) Decide(ctx context.Context, sessionID, principal string, d Decision) (bool, *Error) {
	if d.ApprovalID == "" {
		return false, errorf(http.StatusBadRequest, "an approval response has no approval id")
	}
	callID := d.CallID
	if i := strings.LastIndexByte(callID, '/'); i >= 0 {
		callID = callID[i+1:]
	}
	args := d.Arguments
	if string(args) == "null" {
		args = nil // a call without arguments shows {}
	}
	reply := runner.Reply{
		SessionID: sessionID, ApprovalID: d.ApprovalID,
		CallID: callID, Tool: d.Tool, ArgumentsDigest: agent.ArgumentsDigest(args),
		Decision: agent.Decision{Approved: d.Approved, Reason: d.Reason, By: principal, Via: b.Via},
	}
	pending, err := b.Runner.Decide(ctx, reply)
	if errors.Is(err, approval.ErrMismatch) {
		// The arguments, as the client sent them back, are not the text
		// shown: they may be what the client made of it.
		pending, err = b.decideEcho(ctx, reply, args)
	}
	switch {
	case errors.Is(err, approval.ErrWrongSession):
		return false, errorf(http.StatusForbidden, err.Error())
	case errors.Is(err, approval.ErrMismatch):
		return false, errorf(http.StatusConflict, "the approval response is not for the call the approval shows (its id, tool or input differ)")
	case err != nil:
		return false, errorf(http.StatusInternalServerError, err.Error())
	}
	return pending, nil
}

// decideEcho gives reply, which Respond refused for its binding, to its
// pending approval of the same session when its call id and tool are the
// approval's and the arguments the client sent back, echo, are the
// approval's as the client read them (SameArguments): bound to the
// approval's own arguments digest. It fails with approval.ErrMismatch
// otherwise, and reports false when the approval was decided meanwhile.
func (b *Backend) decideEcho(ctx context.Context, reply runner.Reply, echo json.RawMessage) (bool, error) {
	list, _, err := b.Pending(ctx, reply.SessionID)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(list, func(p approval.PendingApproval) bool { return p.ApprovalID == reply.ApprovalID })
	if i < 0 {
		return false, nil // decided since Respond looked
	}
	call := list[i].Call
	digest := call.ArgumentsDigest
	if digest == "" {
		digest = agent.ArgumentsDigest(call.Arguments)
	}
	if call.ID != reply.CallID || call.Name != reply.Tool || !SameArguments(call.Arguments, echo) {
		return false, fmt.Errorf("%w: the arguments sent back are not those the approval shows", approval.ErrMismatch)
	}
	reply.ArgumentsDigest = digest
	return b.Runner.Decide(ctx, reply)
}

// Answer gives r to its form. It reports false, and no error, when the
// form is no longer open.
func (b *Backend) Answer(ctx context.Context, r interact.FormReply) (bool, *Error) {
	if r.FormID == "" {
		return false, errorf(http.StatusBadRequest, "a form answer has no form id")
	}
	if r.Via == "" {
		r.Via = b.Via
	}
	open, err := b.Runner.Answer(ctx, runner.FormReply{SessionID: r.SessionID, FormID: r.FormID, Answers: r.Answers,
		Elicitation: r.Elicitation, Cancel: r.Cancel, By: r.By, Via: r.Via})
	switch {
	case errors.Is(err, interact.ErrWrongSession):
		return false, errorf(http.StatusForbidden, err.Error())
	case errors.Is(err, interact.ErrInvalidAnswers):
		return false, errorf(http.StatusBadRequest, strings.TrimPrefix(strings.TrimPrefix(err.Error(), interact.ErrInvalidAnswers.Error()+": "), "interact: "))
	case err != nil:
		return false, errorf(http.StatusInternalServerError, err.Error())
	}
	return open, nil
}

// End says why Follow returned.
type End int

const (
	// EndTurn: the turn ended (its EventTurnEnded was yielded), or the
	// session was deleted.
	EndTurn End = iota
	// EndWaiting: the turn waits for a person (the approval_required chunk
	// or the form was yielded last).
	EndWaiting
	// EndGone: ctx ended, or yield asked to stop.
	EndGone
)

// resumeWait bounds how long Follow waits for the resumed turn of a turn
// that suspended after the client's decision.
const resumeWait = 30 * time.Second

// Follow yields the events of session sessionID after Seq after, until the
// turn ends or waits for a person. With decided set (the client just
// decided an approval or answered a form) a turn that ends suspended is not
// the end: the decision resumes it, and Follow goes on with the resumed
// turn (for up to 30 seconds before it comes), without yielding the
// suspension. It returns the Seq of the last event yielded (after when
// none), why it returned, and the subscription's error (such as
// runner.ErrEventsLost).
//
// A chunk that asks a person ends it only while its approval or form is
// still pending: a client that replays a turn
// from its start (a reconnect) goes past the approvals and forms answered
// already, up to the one the turn waits for (and a follow goes past one
// that another client answered in the meantime).
func (b *Backend) Follow(ctx context.Context, sessionID string, after int64, decided bool, yield func(runner.Event) bool) (last int64, end End, err error) {
	return follow(ctx, b.Runner, sessionID, after, decided, func(c *agent.Chunk) bool { return b.pending(ctx, sessionID, c) }, yield)
}

// pending reports whether the approval or form that c asks is pending;
// true when that cannot be told.
func (b *Backend) pending(ctx context.Context, sessionID string, c *agent.Chunk) bool {
	id := askID(c)
	if id == "" && c.Kind != agent.KindToolCall {
		return true // a form that cannot be told
	}
	list, err := b.Runner.Pending(ctx, sessionID)
	if err != nil {
		return true
	}
	for _, p := range list {
		if p.Approval != nil && c.Kind == agent.KindToolCall && p.Approval.ApprovalID == id ||
			p.Form != nil && c.Kind != agent.KindToolCall && p.Form.FormID == id {
			return true
		}
	}
	return false
}

// AskedAt returns the Seq of the last event of session sessionID after Seq
// from and up to Seq to whose chunk asks a person (AsksPerson) for one of
// ids: an approval id, or a form id. It reports false when none does, or
// when the log cannot be read there.
func (b *Backend) AskedAt(ctx context.Context, sessionID string, from, to int64, ids map[string]bool) (int64, bool) {
	if to <= from || len(ids) == 0 {
		return 0, false
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var at int64
	for e, err := range b.Runner.Subscribe(ctx, sessionID, from) {
		if err != nil || e.Kind == runner.EventSessionDeleted {
			return 0, false
		}
		if e.Kind == runner.EventChunk && AsksPerson(e.Chunk) && ids[askID(e.Chunk)] {
			at = e.Seq
		}
		if e.Seq >= to {
			break
		}
	}
	return at, at > 0
}

// askID returns the approval id or the form id a chunk that asks a person
// asks for.
func askID(c *agent.Chunk) string {
	if c.Kind == agent.KindToolCall {
		return c.Tool.ApprovalID
	}
	return FormID(c.Side)
}

// FormID returns the form id of a side payload that asks a person (typed,
// or decoded from another process's event log), "" for any other.
func FormID(side any) string {
	switch s := side.(type) {
	case interact.FormRequest:
		return s.FormID
	case *interact.FormRequest:
		return s.FormID
	case interact.ElicitationRequest:
		return s.FormID
	case *interact.ElicitationRequest:
		return s.FormID
	case map[string]any:
		id, _ := s["form_id"].(string)
		return id
	case json.RawMessage:
		var v struct {
			FormID string `json:"form_id"`
		}
		_ = json.Unmarshal(s, &v)
		return v.FormID
	}
	return ""
}

func follow(ctx context.Context, r *runner.Runner, sessionID string, after int64, decided bool, pending func(*agent.Chunk) bool, yield func(runner.Event) bool) (last int64, end End, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	last = after
	held := false // a suspended turn_ended was held back, or no turn runs
	if decided {
		// A decision on a suspended turn resumes it: until it does, the
		// wait is bounded as after a held suspension.
		if state, err := r.Log(ctx, sessionID); err == nil && !state.Running() {
			held = true
			timer = time.AfterFunc(resumeWait, cancel)
		}
	}
	for e, err := range r.Subscribe(ctx, sessionID, after) {
		if err != nil {
			return last, EndGone, err
		}
		switch e.Kind {
		case runner.EventSessionDeleted:
			return last, EndTurn, nil
		case runner.EventTurnStarted:
			if held {
				held = false
				timer.Stop()
			}
		case runner.EventTurnEnded:
			if decided && e.Ended != nil && e.Ended.Status == runner.StatusSuspended {
				held = true
				if timer == nil {
					timer = time.AfterFunc(resumeWait, cancel)
				} else {
					timer.Reset(resumeWait)
				}
				continue
			}
		case runner.EventChunk:
			if held {
				// A chunk after a held suspension without a new turn: not
				// expected; show what comes.
				held = false
			}
		}
		if !yield(e) {
			return e.Seq, EndGone, nil
		}
		last = e.Seq
		switch {
		case e.Kind == runner.EventTurnEnded:
			return last, EndTurn, nil
		case e.Kind == runner.EventChunk && AsksPerson(e.Chunk) && pending(e.Chunk):
			return last, EndWaiting, nil
		}
	}
	if held {
		// No resumed turn came: the turn stays suspended.
		return last, EndTurn, nil
	}
	return last, EndGone, ctx.Err()
}

// AsksPerson reports whether c is where its run waits for a person: an
// approval_required chunk, or the side chunk of a form (an
// ask_user_question form, an MCP elicitation), of the run or of a
// sub-agent's.
func AsksPerson(c *agent.Chunk) bool {
	switch c.Kind {
	case agent.KindToolCall:
		return c.Tool != nil && c.Tool.State == agent.StateApprovalRequired
	case agent.KindSide:
		return SideAsks(c.Side)
	}
	return false
}

// SideAsks reports whether a side payload asks a person: a typed payload
// says so by its AwaitsPerson method; one decoded from another process's
// event log by its "type" (a form_request or an elicitation_request).
func SideAsks(side any) bool {
	switch s := side.(type) {
	case interface{ AwaitsPerson() bool }:
		return s.AwaitsPerson()
	case map[string]any:
		t, _ := s["type"].(string)
		return t == interact.TypeFormRequest || t == interact.TypeElicitationRequest
	case json.RawMessage:
		var v struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(s, &v)
		return v.Type == interact.TypeFormRequest || v.Type == interact.TypeElicitationRequest
	}
	return false
}
