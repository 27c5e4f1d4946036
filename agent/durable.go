package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/planround/planround/internal/drive"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// Suspension is the error a [ToolDefinition.Resumable] tool returns (see
// [Suspend]) to suspend the run while its call waits for something from
// outside the run, such as a form's answers. It wraps [ErrSuspended].
type Suspension struct {
	// WaitID is the id of what the call waits for (a form's id), recorded
	// in the call's open-call record (memory.OpenCall.ApprovalID) so that
	// a sweeper knows the call waits for a person and resumes the turn
	// only once that is answered.
	WaitID string
}

func (s *Suspension) Error() string {
	return fmt.Sprintf("%v: the call waits for %s", ErrSuspended, s.WaitID)
}

// Unwrap returns [ErrSuspended].
func (s *Suspension) Unwrap() error { return ErrSuspended }

// Suspend returns the error with which a resumable tool's Execute suspends
// the run while its call waits for waitID (see [ToolDefinition.Resumable]).
func Suspend(waitID string) error { return &Suspension{WaitID: waitID} }

// suspendedWait returns the wait id of an error of Execute that suspends the
// run, and whether err is one.
func suspendedWait(err error) (string, bool) {
	var s *Suspension
	if errors.As(err, &s) {
		return s.WaitID, true
	}
	return "", errors.Is(err, ErrSuspended)
}

// errLeaseLost cancels a run whose session this process no longer holds:
// it suspends, so another process can resume the turn.
var errLeaseLost = fmt.Errorf("%w: the session's lease was lost", ErrSuspended)

// Reasons of the rejections of durable runs.
const (
	// reasonStopped is the reason of a call that was running when its
	// process stopped; a resumed turn never runs it again.
	reasonStopped = "tool call stopped: the process stopped while it ran, and it is not run again"
	// reasonMovedOn is the reason of a call that still waited for its
	// approval when a new user message came.
	reasonMovedOn = "rejected: the user moved on without deciding"
)

// ApprovalCanceler is implemented by an Approver that keeps approvals beyond
// a run, such as a runner's approvals. When a new user message comes to a
// session whose last turn still has open calls, the agent closes those
// calls and calls CancelApproval for each undecided one that had an
// approval id (CauseMovedOn), and for each call of a resumable tool found
// executing whose record names what it waited for (the wait id of its
// [Suspension], such as a form's id, or else the approval it ran with),
// so that nobody can answer it any more. An error is logged; the calls are
// closed all the same.
type ApprovalCanceler interface {
	CancelApproval(ctx context.Context, sessionID, approvalID string) error
}

// Resume continues the last turn of a session that stopped with open tool
// calls: after a crash, a restart, or a suspension (ErrSuspended). It needs a
// Config.Store that implements memory.CallLog; the turn's messages and the
// state of its open calls come from it.
//
// It yields chunks as Run does from that point. A call found executing
// (its process stopped while the tool ran, or its tool suspended the run)
// is rejected with CauseStopped and the output it had saved, and never runs
// again, unless its tool is resumable ([ToolDefinition.Resumable]): then
// it runs again, without being asked about again (it was approved before
// it started), with the same [CallInfo.Key]: executing, its side message,
// and its result (or another suspension). Every other open call is asked
// about again with the same key (ApprovalRequest.Key): a durable Approver
// answers with the approval asked before, so a decision taken meanwhile
// proceeds at once (executing and result, or rejected), and an undecided
// call is approval_required again with the same approval id. The round
// then ends with round_end, and the tool loop goes on as in Run.
// Input.Settings of the run that stopped are not kept: the resumed turn
// uses Config.Settings.
//
// A session with nothing open yields the error [ErrNothingToResume]; one
// that another run drives, [ErrBusy]. Turn messages are saved as in Run.
func (a *Agent) Resume(ctx context.Context, sessionID string) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		obs := a.observer(ctx)
		ctx, tel := obs.tel.startRun(ctx, sessionID, true)
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		t := &Turn{a: a, in: Input{SessionID: sessionID}, used: true}
		r := &run{t: t, a: a, ctx: ctx, cancel: func() { cancel(nil) }, cancelCause: cancel, yield: yield, tools: a.cfg.Tools.tools(), obs: obs, tel: tel}
		r.emitPiece = r.textPiece
		r.resume()
		r.endRun()
	}
}

func (r *run) resume() {
	id := r.t.in.SessionID
	st := r.a.cfg.Store
	log, ok := st.(memory.CallLog)
	if !ok || id == "" {
		r.fail(errors.New("agent: Resume needs a session id and a Config.Store that implements memory.CallLog"))
		return
	}
	r.log = log
	r.settings = r.a.cfg.Settings.merge(ModelSettings{})
	if r.ctx.Err() != nil {
		r.emit(Chunk{Kind: KindInterrupted})
		return
	}
	release, err := r.claim()
	if err != nil {
		r.failOrInterrupt(err)
		return
	}
	defer release()
	msgs, err := st.Messages(r.ctx, id, false)
	if err != nil {
		r.failOrInterrupt(fmt.Errorf("agent: loading session %q: %w", id, err))
		return
	}
	at, open := openTail(msgs)
	if len(open) == 0 {
		r.fail(fmt.Errorf("agent: session %q: %w", id, ErrNothingToResume))
		return
	}
	recs, err := log.OpenCalls(r.ctx, id)
	if err != nil {
		r.failOrInterrupt(fmt.Errorf("agent: loading the open calls of session %q: %w", id, err))
		return
	}
	if r.prefix, err = r.contextPrefix(); err != nil {
		r.failOrInterrupt(err)
		return
	}
	defer r.persist()

	// What the model sees: the turns before this one made valid and
	// shortened as in Run, then this turn as stored, without its intent
	// tags. The messages the resumed run adds follow.
	start := memory.CurrentTurn(msgs[:at+1])
	if u := msgs[start]; u.Role == memory.RoleUser {
		r.t.in.Message = u.Content // for the hooks
	}
	r.past = append(memory.Truncate(memory.Repair(msgs[:start]), r.tools.truncate(r.a.truncate)), msgs[start:]...)
	for _, m := range msgs[start:] {
		if r.intent == "" && m.Role == memory.RoleAssistant && !r.a.cfg.DisablePlanning {
			if det := r.a.cfg.Intents.Detect(m.Content); det.Found {
				r.intent = Intent(det.Intent)
			}
		}
	}
	r.stripTags()

	asst := msgs[at]
	calls := make([]*callState, len(open))
	r.round = 1
	for i, tc := range open {
		cs := &callState{call: streamCall(tc), reg: &unknownTool, chunk: ToolCall{ID: tc.ID, Name: tc.Name}, record: &open[i]}
		cs.open = &memory.OpenCall{MessageID: asst.ID, CallID: tc.ID}
		for _, rec := range recs {
			if rec.MessageID == asst.ID && rec.CallID == tc.ID {
				cs.open = &rec
				r.round = max(r.round, rec.Round)
			}
		}
		if !cs.open.Executing && cs.open.ApprovalID == "" {
			// Its run stopped after it stored the call and before it
			// recorded an approval for it: the call is asked about now,
			// by its key, so a durable Approver that registered an
			// approval before the stop answers with that one.
			r.obs.logger.LogAttrs(r.ctx, slog.LevelInfo, "resuming a call whose stopped run had recorded no approval for it",
				slog.String("session", id), slog.String("tool", tc.Name), slog.String("call", tc.ID))
		}
		if args, err := parseArgs(string(tc.Arguments)); err == nil {
			cs.args, cs.chunk.Arguments = args, args
		} else {
			cs.argErr, cs.chunk.ArgumentsRaw = err, string(tc.Arguments)
		}
		calls[i] = cs
	}
	r.calls = calls
	goOn := func() bool {
		defer r.closeRound()
		for _, cs := range calls {
			if cs.open.Executing {
				if r.resumable(cs.call.Name) || cs.open.State != "" {
					// Its tool takes the call up where it left it (by
					// the call's key, or the state it saved): it runs
					// again, without being asked about again.
					cs.rerun = true
					continue
				}
				// The process stopped while the tool ran: what it did is
				// unknown, and it is never run again.
				r.stoppedTool(cs)
				r.interrupted(cs, CauseStopped, reasonStopped, cs.open.Partial)
				if r.stopped {
					return false
				}
			}
		}
		return r.runCalls(calls)
	}()
	if !goOn || !r.endRound(roundResult{}, "") {
		return
	}
	r.toolLoop(r.round + 1)
}

// resumable reports whether the run's tool called name is resumable
// (ToolDefinition.Resumable).
func (r *run) resumable(name string) bool {
	reg, ok := r.tools.byName[name]
	return ok && reg.def.Resumable
}

// openTail finds the open calls of msgs: the calls of its last assistant
// message with calls that have no tool message after it, when nothing but
// tool messages and hook injections follows that message. It returns the
// message's index and the open calls, in call order.
func openTail(msgs []memory.Message) (at int, open []memory.ToolCall) {
	at = -1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == memory.RoleAssistant && len(m.ToolCalls) > 0 {
			at = i
			break
		}
		if m.Role != memory.RoleTool && !m.Hook {
			return -1, nil
		}
	}
	if at < 0 {
		return -1, nil
	}
	answered := make(map[string]bool, len(msgs)-at)
	for _, m := range msgs[at+1:] {
		if m.Role == memory.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	for _, tc := range msgs[at].ToolCalls {
		if !answered[tc.ID] {
			open = append(open, tc)
		}
	}
	return at, open
}

// moveOn closes the open calls of the session's last turn before a new user
// message, each by the state it was left in (and a tool_rejected chunk for
// each): a call found executing was cut by the stop (CauseStopped, with the
// output it had saved; what a resumable one waited for is cancelled); a
// call whose approval was decided keeps that decision (a rejection its
// cause and reason; an approval never ran: CauseNotRun); only a call still
// undecided is "moved on" (CauseMovedOn), and its approval is cancelled
// when the Approver can do that. It returns msgs with the tool messages
// added, and false when the run is over.
func (r *run) moveOn(msgs []memory.Message) ([]memory.Message, bool) {
	at, open := openTail(msgs)
	if len(open) == 0 {
		return msgs, true
	}
	id := r.t.in.SessionID
	var recs []memory.OpenCall
	if r.log != nil {
		var err error
		if recs, err = r.log.OpenCalls(r.ctx, id); err != nil {
			r.failOrInterrupt(fmt.Errorf("agent: loading the open calls of session %q: %w", id, err))
			return nil, false
		}
	}
	now := time.Now()
	tms := make([]memory.Message, len(open))
	chunks := make([]Chunk, len(open))
	var cancel []string // approvals to cancel: the undecided ones, and the waits of resumable calls
	for i, tc := range open {
		rec := memory.OpenCall{MessageID: msgs[at].ID, CallID: tc.ID}
		for _, rc := range recs {
			if rc.MessageID == rec.MessageID && rc.CallID == tc.ID {
				rec = rc
			}
		}
		if rec.ApprovalID == "" && !rec.Executing {
			rec.ApprovalID = r.approvalByKey(rec)
		}
		cause, reason, partial := r.closedAs(rec)
		if rec.ApprovalID != "" && (cause == CauseMovedOn || rec.Executing && r.resumable(tc.Name)) {
			// Undecided, or what a resumable call waits for (a form):
			// nobody can answer it now.
			cancel = append(cancel, rec.ApprovalID)
		}
		tms[i] = toolMessage(tc.ID, tc.Name, joinPartial(partial, reason), StateRejected, cause)
		tms[i].CreatedAt = now
		chunks[i] = Chunk{Kind: KindToolRejected, Round: rec.Round, Tool: &ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
			State: StateRejected, Reason: reason, Cause: cause, PartialResult: partial}}
	}
	if _, err := r.a.cfg.Store.Append(r.ctx, id, tms...); err != nil {
		r.failOrInterrupt(fmt.Errorf("agent: closing the open calls of session %q: %w", id, err))
		return nil, false
	}
	if canceler, ok := r.a.cfg.Approver.(ApprovalCanceler); ok {
		for _, ap := range cancel {
			if err := canceler.CancelApproval(context.WithoutCancel(r.ctx), id, ap); err != nil {
				r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "cancelling an approval failed", slog.String("session", id),
					slog.String("approval", ap), slog.Any("error", err))
			}
		}
	}
	for _, c := range chunks {
		if !r.emit(c) {
			return nil, false
		}
	}
	return append(msgs, tms...), true
}

// approvalByKey returns the id of the approval the Store keeps under the
// durable key of the call of rec, "" when it keeps none. A call's open
// record names its approval only once the Approver registered it (see
// run.approve): a process stopped in between leaves a record that names
// none beside an approval that waits, which a resumed turn finds by the
// key, and so must a new user message, to close the call by its decision
// or cancel the approval.
func (r *run) approvalByKey(rec memory.OpenCall) string {
	approvals, ok := r.a.cfg.Store.(memory.ApprovalStore)
	if !ok || rec.MessageID == 0 {
		return ""
	}
	ap, err := approvals.ApprovalByKey(r.ctx, r.t.in.SessionID, strconv.FormatInt(rec.MessageID, 10)+"/"+rec.CallID)
	if err != nil {
		return ""
	}
	return ap.ID
}

// closedAs is how a new user message closes the open call rec: its cause,
// reason and the partial output to keep. A decision is read from the
// Store when it keeps approvals; an approval it cannot read counts as
// undecided.
func (r *run) closedAs(rec memory.OpenCall) (Cause, string, string) {
	if rec.Executing {
		return CauseStopped, reasonStopped, rec.Partial
	}
	approvals, ok := r.a.cfg.Store.(memory.ApprovalStore)
	if rec.ApprovalID == "" || !ok {
		return CauseMovedOn, reasonMovedOn, ""
	}
	ap, err := approvals.GetApproval(r.ctx, rec.ApprovalID)
	switch {
	case err != nil || ap.SessionID != r.t.in.SessionID || !ap.Decided:
		return CauseMovedOn, reasonMovedOn, ""
	case ap.Decision.Approved:
		// Approved, but the turn never went on to run it.
		return CauseNotRun, reasonNotRun, ""
	}
	cause := Cause(cmp.Or(ap.Decision.Cause, string(CauseUser)))
	return cause, cmp.Or(ap.Decision.Reason, cause.DefaultReason()), ""
}

// driving holds the sessions an Agent runs now: a second run or resumed
// turn of the same Agent on one of them is refused (ErrBusy), so that a
// decision that comes while the session's tool runs never runs it again
// beside it.
type driving struct {
	mu       sync.Mutex
	sessions map[string]bool // guarded by mu
}

// claim marks the run's session as driven by this Agent until release is
// called, when the run has a session and a Store; ErrBusy when another run
// of the Agent drives it. Across processes, a runner holds the session's
// lease and puts a guard in the run's context (see internal/drive).
func (r *run) claim() (release func(), err error) {
	id := r.t.in.SessionID
	if id == "" || r.a.cfg.Store == nil {
		return func() {}, nil
	}
	d := &r.a.driving
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions[id] {
		return nil, fmt.Errorf("agent: session %q: %w (in this process)", id, ErrBusy)
	}
	if d.sessions == nil {
		d.sessions = make(map[string]bool)
	}
	d.sessions[id] = true
	return func() {
		d.mu.Lock()
		delete(d.sessions, id)
		d.mu.Unlock()
	}, nil
}

// holdsLease reports whether the process still drives the run's session
// (the guard of the runner that drives it, see internal/drive; true
// without one). A tool runs only after it: a process that was too slow to
// renew its lease (another process may have taken the session over) never
// runs a call the other may run too.
func (r *run) holdsLease() bool {
	if drive.Held(r.ctx) {
		return true
	}
	r.obs.logger.LogAttrs(r.ctx, slog.LevelError, "session lost before a tool ran", slog.String("session", r.t.in.SessionID))
	return false
}

// suspendable reports whether the run's context was cancelled to suspend
// the run, and the run can be suspended.
func (r *run) suspendable() bool {
	return r.log != nil && r.ctx.Err() != nil && errors.Is(context.Cause(r.ctx), ErrSuspended)
}

// suspend ends the run at a call that waits (a pending approval, or a
// resumable tool that suspended), which stays open with the calls after
// it, and yields the suspended chunk. It returns suspended.
func (r *run) suspend() step {
	r.suspended = true
	r.emit(Chunk{Kind: KindSuspended, Round: r.round})
	return suspended
}

// openCalls saves the turn so far (the round's assistant message last) and
// an open-call record for each call, in one transaction (CallLog.AppendCalls),
// before anything of the round is asked or run: a process that stops at
// any point leaves either neither or both, so a sweeper finds every stored
// call that nobody answered.
func (r *run) openCalls(calls []*callState) error {
	id := r.t.in.SessionID
	recs := make([]memory.OpenCall, len(calls))
	for i, cs := range calls {
		recs[i] = memory.OpenCall{CallID: cs.call.ID, Round: r.round}
	}
	stored, err := r.log.AppendCalls(context.WithoutCancel(r.ctx), id, recs, r.t.msgs[r.saved:]...)
	if err != nil {
		return fmt.Errorf("agent: saving the calls of session %q: %w", id, err)
	}
	r.saved = len(r.t.msgs)
	asst := stored[len(stored)-1]
	for i, cs := range calls {
		recs[i].MessageID = asst.ID
		cs.open = &recs[i]
	}
	return nil
}

// saveCall saves the open-call record of cs, when the run keeps them.
func (r *run) saveCall(cs *callState) error {
	if r.log == nil || cs.open == nil {
		return nil
	}
	if err := r.log.SaveCall(context.WithoutCancel(r.ctx), r.t.in.SessionID, *cs.open); err != nil {
		return fmt.Errorf("agent: saving call %s of session %q: %w", cs.call.ID, r.t.in.SessionID, err)
	}
	return nil
}

// stateSaver returns the function with which SaveCallState saves the state
// of cs in its open-call record, or nil when the run keeps no record for it.
func (r *run) stateSaver(cs *callState) func(string) error {
	if r.log == nil || cs.open == nil || cs.open.MessageID == 0 {
		return nil
	}
	return func(state string) error {
		cs.openMu.Lock()
		defer cs.openMu.Unlock()
		if cs.closed {
			return ErrNoCallRecord
		}
		old := cs.open.State
		cs.open.State = state
		if err := r.saveCall(cs); err != nil {
			cs.open.State = old
			return err
		}
		return nil
	}
}

// partialEvery is how often the output of a running tool is saved to its
// open-call record.
const partialEvery = time.Second

// savePartial saves what a running tool wrote, at most every partialEvery.
func (r *run) savePartial(cs *callState) {
	if r.log == nil || cs.open == nil || time.Since(cs.partialSaved) < partialEvery {
		return
	}
	cs.partialSaved = time.Now()
	cs.openMu.Lock()
	cs.open.Partial = cs.progress.String()
	err := r.saveCall(cs)
	cs.openMu.Unlock()
	if err != nil {
		r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "saving a tool's output failed", toolAttr(cs), slog.Any("error", err))
	}
}

// streamCall is a stored call as the stream would have given it.
func streamCall(tc memory.ToolCall) stream.Call {
	return stream.Call{Index: stream.NoIndex, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
}
