package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// outcome is what happened to one call of a round: it becomes the call's
// tool message.
type outcome struct {
	content string
	state   ToolState // StateResult or StateRejected
	cause   Cause     // a rejection's
	done    bool      // a tool message has been decided
}

// resultOutcome is the outcome of a call whose tool returned content.
func resultOutcome(content string) outcome {
	return outcome{content: content, state: StateResult, done: true}
}

// rejectedOutcome is the outcome of a call rejected for cause, its tool
// message content.
func rejectedOutcome(cause Cause, content string) outcome {
	return outcome{content: content, state: StateRejected, cause: cause, done: true}
}

// toolMessage is the tool message that answers the call id of the tool
// name: content, and how the call ended (state result or rejected, and a
// rejection's cause), in memory's words.
func toolMessage(id, name, content string, state ToolState, cause Cause) memory.Message {
	m := memory.Message{Role: memory.RoleTool, ToolCallID: id, Name: name, Content: content, Outcome: memory.Outcome(state)}
	if state == StateRejected {
		m.Cause = string(cause)
	}
	return m
}

// step is what became of a call at one stage of its way through a round
// (checked, asked about, started, finished), and so what the round does
// next: [run.follow] turns it into that, in one place for sequential and
// parallel rounds. The zero step means nothing.
type step uint8

const (
	_ step = iota
	// next: the call goes on to its next stage; a finished call, the round
	// to its next call.
	next
	// skip: the call has its outcome (a rejection the model reads) and the
	// round goes on with the next call.
	skip
	// endRun: the call's rejection ends the run (RejectEndRun): the calls
	// after it never run.
	endRun
	// abort: the run is over (interrupted, failed, or the consumer left):
	// no call begins any more.
	abort
	// held: the call's tool suspended the run (see hold): the call stays
	// open, executing, and the run suspends once the calls started beside
	// it have finished.
	held
	// suspended: the run suspended, its suspended chunk yielded (see
	// run.suspend): the call and those after it that have no outcome stay
	// open for the resumed turn.
	suspended
)

// callState is one call of a tool round on its way through the states.
type callState struct {
	call stream.Call
	// reg is the tool the call names, once check found it (unknownTool
	// before, and for a tool the run does not have): shared, never written.
	reg    *registered
	record *memory.ToolCall // the call in the assistant message
	args   json.RawMessage  // the arguments when they are a JSON object
	argErr error            // why they are not
	chunk  ToolCall         // what the chunks show
	// approvalWait is the pending ticket's wait, for releaseApproval.
	approvalWait func(ctx context.Context) (Decision, error)
	out          outcome
	// decision is the Approver's answer, when it gave one (answered): the
	// span event of the call's approval records it.
	decision Decision

	// open is the call's open-call record, when the run keeps them
	// (Config.Store implements memory.CallLog).
	open         *memory.OpenCall
	partialSaved time.Time // when open.Partial was last saved
	// openMu guards open and its saves while the tool runs (SaveCallState
	// from the tool's goroutine, savePartial from the run's); closed is
	// set when Execute returned, after which SaveCallState saves nothing.
	openMu sync.Mutex

	// execution: written by the call's goroutine before it closes done
	progress *progressBuffer
	done     chan struct{}
	result   string
	err      error

	// telemetry: the execute_tool span while the tool runs, when it
	// started; the cause of the call's rejection.
	span    trace.Span
	started time.Time
	cause   Cause

	// The flags, together so that they share a word: a run paused at an
	// approval holds a callState per call.
	edited   bool // args are the approver's edit
	waitOwed bool // approval's Wait is still owed to the Approver
	answered bool // decision holds the Approver's answer
	closed   bool // guarded by openMu (see there)
	// rerun marks a resumable call that a resumed turn found executing: it
	// runs again without being asked about (it was approved before it
	// started).
	rerun   bool
	cut     bool // Execute returned after the run's context ended
	pending bool // its approval was pending: a person was waited for
}

// toolRound handles the calls of one round: it records the assistant message
// and one tool message per call, whatever happens (unless the run
// suspends: then the calls still waiting stay open), and reports whether the
// run goes on.
func (r *run) toolRound(res roundResult) (goOn bool) {
	calls := make([]*callState, len(res.calls))
	tcs := make([]memory.ToolCall, len(res.calls))
	for i, c := range res.calls {
		cs := &callState{call: c, reg: &unknownTool, chunk: ToolCall{ID: c.ID, Name: c.Name}, record: &tcs[i]}
		tcs[i] = memory.ToolCall{ID: c.ID, Name: c.Name}
		// Every chunk after start shows the arguments; valid ones are kept
		// compact, in the chunks and in the history alike (the history in
		// bytes of its own).
		if args, err := parseArgs(c.Arguments); err == nil {
			cs.args = args
			cs.chunk.Arguments = args
			tcs[i].Arguments = bytes.Clone(args)
		} else {
			// The chunk shows what the model wrote; the history keeps it
			// wrapped in an object, which every provider accepts back.
			cs.argErr = err
			cs.chunk.ArgumentsRaw = c.Arguments
			tcs[i].Arguments = memory.ValidArguments([]byte(c.Arguments))
		}
		calls[i] = cs
	}
	// The history: the assistant message with its calls, then one tool
	// message per call in call order, each recorded as soon as it and
	// those before it are known (see advance), the rest when the round
	// closes.
	r.record(memory.Message{Role: memory.RoleAssistant, Content: res.raw, ToolCalls: tcs, CreatedAt: time.Now()})
	r.calls, r.recorded = calls, 0
	defer r.closeRound()
	if r.log != nil {
		// Durable: the round and its calls are saved before anything is
		// asked or run.
		if err := r.openCalls(calls); err != nil {
			r.fail(err)
			return false
		}
	}
	return r.runCalls(calls)
}

// closeRound records a tool message for every call of the round that has
// none yet (not run), unless the run suspended: its waiting calls stay
// open, and the calls that ended after the first of them (with parallel
// tools, a call that returned while a resumable one suspended) get their
// tool messages now, out of call order, so that no outcome is lost. A
// pending approval whose Wait is still owed (the consumer left at
// approval_required) is released, as the Approver contract says.
func (r *run) closeRound() {
	if !r.suspended {
		for _, cs := range r.calls {
			if !cs.out.done {
				cs.out = rejectedOutcome(CauseNotRun, reasonNotRun)
			}
		}
	}
	r.advance()
	if r.suspended {
		r.recordEnded()
	}
	for _, cs := range r.calls {
		r.releaseApproval(cs)
	}
	r.calls, r.recorded = nil, 0
}

// settle sets the outcome of cs and records the tool messages it completes.
func (r *run) settle(cs *callState, out outcome) {
	cs.out = out
	r.advance()
}

// advance records the tool messages of the round's calls whose outcome is
// known, in call order, up to the first call without one. A run that keeps
// open calls saves them at once, so that the Store never holds a call as
// open that has ended; a failure to save fails the run.
func (r *run) advance() {
	n := r.recorded
	for r.recorded < len(r.calls) && r.calls[r.recorded].out.done {
		r.recorded++
	}
	if r.recorded == n {
		return
	}
	now := time.Now()
	for _, cs := range r.calls[n:r.recorded] {
		m := toolMessage(cs.call.ID, cs.call.Name, cs.out.content, cs.out.state, cs.out.cause)
		m.CreatedAt = now
		r.record(m)
	}
	if r.log != nil {
		if _, err := r.save(); err != nil {
			r.fail(err)
		}
	}
}

// recordEnded records the tool messages of the calls after the first open
// one whose outcome is known, in call order, and saves them (a suspended
// round: the open calls stay open).
func (r *run) recordEnded() {
	n := len(r.t.msgs)
	now := time.Now()
	for _, cs := range r.calls[r.recorded:] {
		if cs.out.done {
			m := toolMessage(cs.call.ID, cs.call.Name, cs.out.content, cs.out.state, cs.out.cause)
			m.CreatedAt = now
			r.record(m)
		}
	}
	if r.log != nil && len(r.t.msgs) > n {
		if _, err := r.save(); err != nil {
			r.fail(err)
		}
	}
}

// runCalls asks about and runs the calls of a round that have no outcome
// yet, and reports whether the run goes on.
func (r *run) runCalls(calls []*callState) bool {
	if r.a.cfg.ParallelTools {
		return r.runParallel(calls)
	}
	for i, cs := range calls {
		if cs.out.done {
			continue
		}
		// Interrupted between calls: the rest never begin.
		if !r.follow(r.between(), calls[i:]) {
			return false
		}
		s := r.ask(cs)
		if s == next {
			s = r.startCall(cs)
		}
		if s == next {
			s = r.finish(cs)
		}
		if !r.follow(s, calls[i+1:]) {
			return false
		}
	}
	return true
}

// runParallel asks for every approval in call order, then runs the approved
// calls concurrently and yields their results in call order.
func (r *run) runParallel(calls []*callState) bool {
	var approved []*callState
	for i, cs := range calls {
		if cs.out.done {
			continue
		}
		s := r.between()
		if s == next {
			s = r.ask(cs)
		}
		switch s {
		case next:
			approved = append(approved, cs)
		case skip:
		case endRun:
			// A sequential run would already have run the calls approved
			// before this one, so they run now (unless they end the run
			// first); the calls after it are not asked and never run (they
			// stay open when one of those suspends the run).
			if ran := r.runApproved(approved); ran != next {
				s = ran
			}
			return r.follow(s, calls[i+1:])
		default:
			// Interrupted, or the consumer left: the calls approved before
			// this one have not started, and none will. Suspended: they
			// wait for the resumed turn, as this one does.
			return r.follow(s, calls)
		}
	}
	return r.follow(r.runApproved(approved), nil)
}

// follow does what step s says to a round whose calls not yet begun are
// rest, and reports whether the run goes on: next and skip go on. endRun
// and abort close the cards of rest as never run and end the run with
// interrupted (recorded but not yielded when the consumer left). held
// suspends the run, now that every call started beside the held one has
// finished; suspended has yielded its chunk already. A suspended run's calls
// without an outcome stay open.
func (r *run) follow(s step, rest []*callState) bool {
	switch s {
	case next, skip:
		return true
	case endRun, abort:
		r.endCalls(rest)
	case held:
		r.suspend()
	}
	return false
}

// between is the step between two calls: next, unless the run's context
// ended: then the run suspends when it can, else it is over (abort).
func (r *run) between() step {
	if r.ctx.Err() == nil {
		return next
	}
	if r.suspendable() {
		return r.suspend()
	}
	return abort
}

// ask checks cs, then asks about it: next when it may run.
func (r *run) ask(cs *callState) step {
	if s := r.check(cs); s != next {
		return s
	}
	return r.approve(cs)
}

// startCall records cs as executing, yields its executing chunk and starts
// it: next. Otherwise the tool has not started: the run suspended (the
// lease was lost) or is over.
func (r *run) startCall(cs *callState) step {
	if !r.holdsLease() {
		// Another process may drive the session now: the call stays open
		// for it, and this run suspends without running anything.
		r.cancelCause(errLeaseLost)
		return r.suspend()
	}
	if cs.open != nil && !cs.rerun {
		// At most once: a call found executing after a crash is never run
		// again (unless its tool is resumable), so the mark is saved
		// before the tool starts. An approver's edit goes with it into
		// the stored assistant message (stored before the approval was
		// asked), so that the history says what runs. A call run again
		// is marked already.
		cs.open.Executing = true
		if cs.edited {
			cs.open.Arguments = cs.args
		}
		err := r.saveCall(cs)
		cs.open.Arguments = nil // written once; later saves leave the message alone
		if err != nil {
			r.fail(err)
			return abort
		}
	}
	if !r.executing(cs) {
		return abort
	}
	r.start(cs)
	return next
}

// runApproved runs approved calls concurrently and yields their results in
// call order. Its step is next when they all finished and the run goes on;
// abort after an interrupt, or a consumer that left; held when a resumable
// call suspended the run: then every call has been finished and its result
// yielded first, so that the suspended chunk comes last.
func (r *run) runApproved(approved []*callState) step {
	for i, cs := range approved {
		if s := r.startCall(cs); s != next {
			// The consumer left, or the lease was lost. Those already
			// started must still be waited for and recorded (finish yields
			// nothing now).
			for _, s := range approved[:i] {
				r.finish(s)
			}
			return s
		}
	}
	// Every call is finished in call order, also after an interrupt (or a
	// consumer that left), which cancelled the calls still running: a call
	// that had returned before keeps its result, the others get their
	// rejection with the output they wrote, as in a sequential run.
	s := next
	for _, cs := range approved {
		switch r.finish(cs) {
		case held:
			s = held
		case abort:
			if s == next {
				s = abort
			}
		}
	}
	return s
}

// check validates a call before approval: a known tool and arguments that
// are a JSON object matching its schema (and, for a tool made by NewTool,
// that decode into its Args). A call that fails is rejected with a message
// the model reads: skip, or abort when the consumer left meanwhile.
func (r *run) check(cs *callState) step {
	reg, ok := r.tools.byName[cs.call.Name]
	if !ok {
		return r.refuse(cs, CauseUnknownTool, fmt.Sprintf("error: unknown tool %q", cs.call.Name))
	}
	cs.reg = reg
	if cs.argErr != nil {
		return r.refuse(cs, CauseInvalidArguments, fmt.Sprintf("error: the arguments of %s are not valid JSON (%v); call it again with a JSON object", cs.call.Name, cs.argErr))
	}
	if err := reg.checkArgs(cs.args); err != nil {
		return r.refuse(cs, CauseInvalidArguments, fmt.Sprintf("error: the arguments of %s do not fit its parameters (%v); call it again with arguments that match its schema", cs.call.Name, err))
	}
	return next
}

// refuse rejects a call the agent cannot run, with a message for the model;
// the run goes on whatever Config.OnReject says, so that the model can call
// again: skip, unless the consumer left or the run failed (abort).
func (r *run) refuse(cs *callState, cause Cause, msg string) step {
	r.settle(cs, rejectedOutcome(cause, msg))
	c := cs.chunk
	c.State = StateRejected
	c.Reason = msg
	c.Cause = cause
	r.emit(Chunk{Kind: KindToolRejected, Round: r.round, Tool: &c})
	if r.stopped {
		return abort
	}
	return skip
}

// approve asks the Approver unless the tool skips approval (and has no
// reason to ask a person, see ApprovalNoter). Its step is next when the
// call may run; when it may not, what its rejection says (see reject), or
// abort (interrupted, failed, or the consumer left), or suspended.
func (r *run) approve(cs *callState) (s step) {
	if cs.rerun {
		return next
	}
	if mustAsk := r.noteApproval(cs); cs.reg.def.SkipApproval && !mustAsk {
		return next
	}
	defer func() {
		// What was for the person who decides stays off the chunks that
		// follow.
		cs.chunk.MustAsk, cs.chunk.Details = false, nil
	}()
	at := r.startApproval(cs)
	defer func() { r.endApproval(at, cs, s == next) }()
	if r.a.cfg.Approver == nil {
		// New checked that no tool needs approval, but the registry is
		// shared and gained one since: reject its calls, never call a nil
		// Approver.
		r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "tool needs approval but the agent has no Approver", toolAttr(cs))
		return r.reject(cs, CauseNoApprover, reasonNoApprover)
	}
	req := ApprovalRequest{SessionID: r.t.in.SessionID, Round: r.round, Call: cs.chunk, Key: cs.key()}
	req.Call.ArgumentsDigest = ArgumentsDigest(cs.chunk.Arguments)
	t, err := r.a.cfg.Approver.Request(r.ctx, req)
	if err != nil {
		if r.suspendable() {
			return r.suspend()
		}
		if r.ctx.Err() != nil {
			r.interrupted(cs, CauseApprovalInterrupted, reasonApprovalInterrupted, "")
			return abort
		}
		return r.reject(cs, CauseApprovalFailed, fmt.Sprintf("approval could not be requested: %v", err))
	}
	d, decided := t.Decision()
	if !decided {
		// The request is registered: a decision that arrives as soon as the
		// card below is shown lands in it.
		cs.pending = true
		if r.ctx.Err() == nil {
			cs.approvalWait, cs.waitOwed = t.wait, true
			cs.chunk.ApprovalID = t.ApprovalID()
			if cs.open != nil && cs.open.ApprovalID != cs.chunk.ApprovalID {
				// Saved before the card is shown: a resumed turn asks
				// about the same approval.
				cs.open.ApprovalID = cs.chunk.ApprovalID
				if err := r.saveCall(cs); err != nil {
					r.fail(err)
					return abort // the deferred release calls the owed Wait
				}
			}
			c := cs.chunk
			c.State = StateApprovalRequired
			c.ApprovalRequired = true
			c.ArgumentsDigest = req.Call.ArgumentsDigest
			if !r.emit(Chunk{Kind: KindToolCall, Round: r.round, Tool: &c}) {
				return abort // the deferred release calls the owed Wait
			}
			cs.waitOwed = false
		}
		// Interrupted before the card was shown, Wait gets the cancelled
		// context at once: it is the release.
		d, err = t.Wait(r.ctx)
	}
	if r.suspendable() || (err != nil && errors.Is(err, ErrSuspended) && r.log != nil) {
		// Not now: the call stays open, its decision will come later.
		return r.suspend()
	}
	if err == nil {
		cs.decision, cs.answered = d, true
	}
	if r.ctx.Err() != nil {
		cause, reason := interruptedApproval(d, err, decided)
		r.interrupted(cs, cause, reason, "")
		return abort
	}
	if err != nil {
		return r.reject(cs, CauseApprovalFailed, cmp.Or(err.Error(), CauseApprovalFailed.DefaultReason()))
	}
	if !d.Approved {
		cause := rejectionCause(d, decided)
		return r.reject(cs, cause, cmp.Or(d.Reason, cause.DefaultReason()))
	}
	if d.Arguments != nil {
		args, err := parseArgs(string(d.Arguments))
		if err != nil {
			return r.reject(cs, CauseApprovalFailed, fmt.Sprintf("the approver's edited arguments are not a JSON object: %v", err))
		}
		if err := r.tools.byName[cs.call.Name].checkArgs(args); err != nil {
			return r.reject(cs, CauseApprovalFailed, fmt.Sprintf("the approver's edited arguments do not fit the parameters of %s (%v)", cs.call.Name, err))
		}
		cs.args, cs.edited = args, true
		cs.chunk.Arguments = args
		cs.record.Arguments = bytes.Clone(args) // the history shows what ran (a durable run's: see startCall)
	}
	return next
}

// rejectionCause is the cause of the rejection d: its own, else the
// policy's for a decision taken at once, the user's for one waited for.
func rejectionCause(d Decision, decided bool) Cause {
	switch {
	case d.Cause != "":
		return d.Cause
	case decided:
		return CausePolicy
	}
	return CauseUser
}

// interruptedApproval is what is recorded for a call whose run was
// interrupted while its approval was asked, given the answer: the approval
// may have been decided just before the interrupt came. An approved call
// never ran; a rejection that gives its reason, or a policy's, keeps it;
// anything else (the approver gave up with the context, or a person's
// rejection without a reason, which cannot be told apart from an answer to
// the interrupt) was still pending.
func interruptedApproval(d Decision, err error, decided bool) (Cause, string) {
	switch {
	case err != nil || d.Cause == CauseApprovalInterrupted:
		// The approver gave up with the context: still pending.
	case d.Approved:
		return CauseNotRun, reasonNotRun
	case d.Reason != "" || decided:
		cause := rejectionCause(d, decided)
		return cause, cmp.Or(d.Reason, cause.DefaultReason())
	}
	return CauseApprovalInterrupted, reasonApprovalInterrupted
}

// releaseApproval calls an owed Wait with a cancelled context.
func (r *run) releaseApproval(cs *callState) {
	if !cs.waitOwed {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.ctx))
	cancel()
	cs.waitOwed = false
	if cs.approvalWait != nil {
		_, _ = cs.approvalWait(ctx)
	}
}

// reject records a rejection. Its step is skip when the run goes on
// (RejectContinue), else endRun, or abort when the consumer left or the run
// was interrupted meanwhile: then the calls approved before this one in a
// parallel round do not run either.
func (r *run) reject(cs *callState, cause Cause, reason string) step {
	cs.cause = cause
	r.settle(cs, rejectedOutcome(cause, reason))
	c := cs.chunk
	c.State = StateRejected
	c.Reason = reason
	c.Cause = cause
	if !r.emit(Chunk{Kind: KindToolRejected, Round: r.round, Tool: &c}) {
		return abort
	}
	r.tel.rejected = r.a.cfg.OnReject == RejectEndRun
	switch {
	case r.a.cfg.OnReject == RejectContinue:
		return skip
	case r.ctx.Err() != nil:
		return abort
	}
	return endRun
}

// interrupted records and yields the rejection of a call stopped by the
// run's cancellation (or by the process that stopped while it ran, see
// Resume), with the output it wrote.
func (r *run) interrupted(cs *callState, cause Cause, reason, partial string) {
	cs.cause = cause
	r.settle(cs, rejectedOutcome(cause, joinPartial(partial, reason)))
	c := cs.chunk
	c.State = StateRejected
	c.Reason = reason
	c.Cause = cause
	c.PartialResult = partial
	r.emit(Chunk{Kind: KindToolRejected, Round: r.round, Tool: &c})
}

// endCalls closes the cards of calls that never ran because the run ended
// (interrupted, or a rejection that ends the run), then yields interrupted.
func (r *run) endCalls(rest []*callState) {
	for _, cs := range rest {
		if cs.out.done {
			continue
		}
		r.settle(cs, rejectedOutcome(CauseNotRun, reasonNotRun))
		c := cs.chunk
		c.State = StateRejected
		c.Reason = reasonNotRun
		c.Cause = CauseNotRun
		r.emit(Chunk{Kind: KindToolRejected, Round: r.round, Tool: &c})
	}
	r.emit(Chunk{Kind: KindInterrupted, Round: r.round})
}

// executing yields the executing chunk and the tool's side message.
func (r *run) executing(cs *callState) bool {
	c := cs.chunk
	c.State = StateExecuting
	if !r.emit(Chunk{Kind: KindToolCall, Round: r.round, Tool: &c}) {
		return false
	}
	if sm, ok := cs.reg.tool.(SideMessenger); ok {
		side, err := r.sideMessage(sm, cs)
		if err != nil {
			r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "side message failed", toolAttr(cs), slog.Any("error", err))
		} else if side != nil {
			if !r.emit(Chunk{Kind: KindSide, Round: r.round, Tool: &ToolCall{ID: c.ID, Name: c.Name}, Side: side}) {
				return false
			}
		}
	}
	return true
}

// sideMessage asks a tool for its side message. A panic is recovered and
// returned as an error, as a panic in Execute is, so that it never unwinds
// into the host's range loop: the call then runs without a side message.
func (r *run) sideMessage(sm SideMessenger, cs *callState) (side any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("side message panicked: %v", p)
			r.obs.logger.LogAttrs(context.WithoutCancel(r.ctx), slog.LevelError, "side message panicked", toolAttr(cs),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	return sm.SideMessage(r.callContext(cs), cs.chunk)
}

// start runs the tool in its own goroutine, which finish waits for: the
// run's goroutine stays free to yield the tool's partial output as it comes.
func (r *run) start(cs *callState) {
	cs.progress = newProgressBuffer()
	cs.done = make(chan struct{})
	ctx := r.startTool(r.callContext(cs), cs)
	if _, ok := cs.reg.tool.(*subAgent); ok {
		ctx = r.nestContext(ctx)
	}
	go func() {
		defer close(cs.done)
		defer func() {
			cs.openMu.Lock()
			cs.closed = true
			cs.openMu.Unlock()
		}()
		defer func() {
			// Whether the run was still on when the tool returned (or
			// panicked) decides between its result and an interruption.
			cs.cut = r.ctx.Err() != nil
			if p := recover(); p != nil {
				cs.err = fmt.Errorf("tool panicked: %v", p)
				r.obs.logger.LogAttrs(context.WithoutCancel(r.ctx), slog.LevelError, "tool panicked", toolAttr(cs),
					slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			}
		}()
		cs.result, cs.err = cs.reg.tool.Execute(ctx, cs.args, cs.progress)
	}()
}

// finish waits for a started call, yielding its partial output as executing
// chunks, then yields its result (next), or its rejection when it returned
// after the run was interrupted (abort); held when its tool suspended the
// run.
//
// When the consumer has left, nothing is yielded, but the call is still
// waited for (the run's context, cancelled by stop, tells it to end) and
// recorded: the tool never outlives the run.
func (r *run) finish(cs *callState) step {
	sent := 0
	progress := func() {
		if r.ctx.Err() != nil {
			return // interrupted: the call's last chunk carries its output
		}
		r.emitSides()
		if p := cs.progress.Since(sent); p != "" {
			sent += len(p)
			c := cs.chunk
			c.State = StateExecuting
			c.PartialResult = p
			r.emit(Chunk{Kind: KindToolCall, Round: r.round, Tool: &c})
			r.savePartial(cs)
		}
	}
wait:
	for {
		select {
		case <-cs.done:
			break wait
		case <-cs.progress.signal:
			progress()
		case n := <-r.nested: // nil without sub-agents: never ready
			r.takeNested(n)
		case <-r.sides.signal():
			r.emitSides()
		}
	}
	if r.suspends(cs) {
		progress()
		return r.hold(cs)
	}
	if cs.cut {
		r.endTool(cs, outcomeInterrupted, cs.partial())
		r.interrupted(cs, CauseInterrupted, reasonInterrupted, cs.partial())
		return abort
	}
	// Output written just before the tool returned is yielded too, so the
	// chunks do not depend on which of done and signal the select saw first.
	progress()
	content := cs.result
	if cs.err != nil {
		content = "error: " + cs.err.Error()
		r.endTool(cs, outcomeError, content)
	} else {
		r.endTool(cs, outcomeResult, content)
	}
	// A tool that returned an error ran: its result is the error, as the
	// chunk shows it.
	r.settle(cs, resultOutcome(content))
	c := cs.chunk
	c.State = StateResult
	c.Result = content
	if !r.emit(Chunk{Kind: KindToolCall, Round: r.round, Tool: &c}) {
		return abort
	}
	return next
}

// emitSides yields what running calls showed with ShowSide, unless the
// run was interrupted.
func (r *run) emitSides() {
	if r.sides == nil {
		return
	}
	for _, it := range r.sides.take() {
		if r.ctx.Err() != nil || r.stopped || r.over {
			return
		}
		call := it.call
		r.emit(Chunk{Kind: KindSide, Round: r.round, Tool: &call, Side: it.payload})
	}
}

// suspends reports whether the finished call cs suspends the run instead of
// ending: its tool is resumable or it saved a state (SaveCallState), the
// run keeps open-call records, and
// Execute returned an error wrapping ErrSuspended, or the run's context was
// cancelled with the cause ErrSuspended while it ran (a host that shuts
// down). Any other ErrSuspended is an ordinary tool error.
func (r *run) suspends(cs *callState) bool {
	if r.log == nil || cs.open == nil || !cs.reg.def.Resumable && cs.open.State == "" {
		return false
	}
	if cs.cut {
		return r.suspendable()
	}
	return errors.Is(cs.err, ErrSuspended)
}

// hold keeps cs open, executing, for the resumed turn: its record names
// what the call waits for (the wait id of a [Suspension]; unchanged
// without one) and the output it wrote, and is saved: held, and the run
// suspends once every call of the round is finished. A failure to save
// fails the run, and the call is then interrupted: abort.
func (r *run) hold(cs *callState) step {
	partial := cs.progress.String()
	r.endTool(cs, outcomeSuspended, partial)
	if id, _ := suspendedWait(cs.err); id != "" {
		cs.open.ApprovalID = id
	}
	cs.open.Partial = partial
	if err := r.saveCall(cs); err != nil {
		r.fail(err)
		r.settle(cs, rejectedOutcome(CauseInterrupted, joinPartial(partial, reasonInterrupted)))
		return abort
	}
	return held
}

// partial is what a finished call wrote before it was interrupted: its
// progress output, or its result when it wrote none.
func (cs *callState) partial() string {
	if p := cs.progress.String(); p != "" {
		return p
	}
	return cs.result
}

// parseArgs checks that s is a JSON object ("" counts as {}) and returns it
// compacted.
func parseArgs(s string) (json.RawMessage, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("invalid JSON %q", excerpt(s))
	}
	if b[0] != '{' {
		return nil, fmt.Errorf("want a JSON object, got %q", excerpt(s))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func excerpt(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func joinPartial(partial, reason string) string {
	if partial == "" {
		return reason
	}
	return partial + "\n[" + reason + "]"
}

// progressBuffer is the Progress a running tool writes to. Writers may be
// any goroutine; the run's goroutine reads snapshots under the same mutex,
// so a snapshot is never torn.
type progressBuffer struct {
	mu     sync.Mutex // guards buf
	buf    []byte
	signal chan struct{} // has a value when something was written since the last read
}

func newProgressBuffer() *progressBuffer {
	return &progressBuffer{signal: make(chan struct{}, 1)}
}

func (p *progressBuffer) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.buf = append(p.buf, b...)
	p.mu.Unlock()
	p.notify()
	return len(b), nil
}

func (p *progressBuffer) WriteString(s string) (int, error) {
	p.mu.Lock()
	p.buf = append(p.buf, s...)
	p.mu.Unlock()
	p.notify()
	return len(s), nil
}

func (p *progressBuffer) notify() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// String returns everything written so far.
func (p *progressBuffer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.buf)
}

// Since returns what was written after the first n bytes.
func (p *progressBuffer) Since(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n >= len(p.buf) {
		return ""
	}
	return string(p.buf[n:])
}

func toolAttr(cs *callState) slog.Attr {
	return slog.Group("tool", slog.String("id", cs.call.ID), slog.String("name", cs.call.Name))
}

// key returns the call's durable key (ApprovalRequest.Key, CallInfo.Key):
// its stored message's id and its id, or "" when the run keeps no open-call
// records.
func (cs *callState) key() string {
	if cs.open == nil || cs.open.MessageID == 0 {
		return ""
	}
	return strconv.FormatInt(cs.open.MessageID, 10) + "/" + cs.open.CallID
}
