package runner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/drive"
	"github.com/planround/planround/memory"
)

// Turn is a turn the Runner drives: started by [Runner.Start] or resumed.
type Turn struct {
	// SessionID is the turn's session.
	SessionID string
	// Seq is the Seq of the turn's EventTurnStarted: [Runner.Subscribe]
	// from Seq-1 yields the whole turn.
	Seq int64

	done  chan struct{}
	ended TurnEnded // set before done is closed
}

// Done returns a channel closed when the turn has ended, its last event
// published and its session released.
func (t *Turn) Done() <-chan struct{} { return t.done }

// Ended returns how the turn ended, once Done is closed (a zero TurnEnded
// before).
func (t *Turn) Ended() TurnEnded {
	select {
	case <-t.done:
		return t.ended
	default:
		return TurnEnded{}
	}
}

// driven is a run this process drives. Runner.mu guards calls; cancel may
// be called from any goroutine, also before the run's context exists.
type driven struct {
	turn *Turn
	// calls holds the calls that wait for a person: an approval_required
	// chunk came and nothing since. Close suspends a run that has one.
	calls map[string]bool
	// again is set when a decision came for the session while this run
	// drove it: if the run suspends without taking it, the turn is resumed
	// again.
	again bool
	// ending is set with the turn's EventTurnEnded: the run is being
	// cleared, and a new message waits for it instead of being refused.
	ending bool
	// stopping is set by Interrupt: the run winds down, and a new message
	// waits for it as for an ending one (a client that sends as soon as
	// its stop was acknowledged is not refused).
	stopping bool
	// looks is set for a run that no message started (a resume, a sweep,
	// the end of a stale turn): until it starts a turn, no turn is in
	// progress to interrupt. stopOnStart is set by an Interrupt that came
	// meanwhile: the turn it starts, if any, is interrupted at once (a
	// resume that finds nothing publishes nothing).
	looks       bool
	stopOnStart bool

	mu        sync.Mutex
	stop      context.CancelCauseFunc // the run context's; nil before it exists
	cause     error                   // a cancellation that came before it existed
	cancelled bool
	// held is when the session's lease was last known held: taken or
	// renewed by a call that started then. It lasts until held+ttl.
	held time.Time
}

// cancel cancels the run's context with cause; the first cause wins.
func (d *driven) cancel(cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancelled {
		return
	}
	if d.stop == nil {
		if d.cause == nil {
			d.cause = cause
		}
		return
	}
	d.cancelled = true
	d.stop(cause)
}

// waiting reports whether the run waits for a person. Runner.mu must be
// held.
func (d *driven) waiting() bool { return len(d.calls) > 0 }

// Start starts a turn on in.SessionID with in.Message, driven by this
// process in the background: its events go to the session's subscribers
// ([Runner.Subscribe], from Turn.Seq-1 for the whole turn). The run does not
// end with ctx: ctx bounds the start (the lease, the stored message) and
// lends the run its values (such as skills.WithEnabled); the run ends on
// its own, by [Runner.Interrupt], or at [Runner.Close].
//
// Start returns once the user's message is stored (so a host that
// acknowledges the message to its sender keeps it, whatever happens next),
// or the run ended before (its TurnEnded says why). It fails with an error
// wrapping agent.ErrBusy when a run of this process or another one drives
// the session (a turn is in progress; what holds the session with none,
// such as a sweep, is waited for), ErrTooManyRuns beyond Config.MaxRuns,
// ErrClosed once Close was called. A session that does not exist is
// created.
func (r *Runner) Start(ctx context.Context, in agent.Input) (*Turn, error) {
	if in.SessionID == "" {
		return nil, errors.New("runner: Start needs an Input.SessionID")
	}
	ss, d, err := r.reserve(ctx, in.SessionID, true)
	if err != nil {
		return nil, err
	}
	release, err := r.take(ctx, ss, d, true)
	if err != nil {
		return nil, err
	}
	history := r.lastMessage(ctx, ss.id)
	d.turn.Seq = r.publish(ss, Event{Kind: EventTurnStarted, Started: &TurnStarted{Message: in.Message, History: history}}).Seq
	runCtx := r.runContext(ctx, ss.id, d)
	t := r.agent.NewTurn(in)
	first := make(chan error, 1)
	go r.drive(runCtx, ss, d, release, t.Run(runCtx), first)
	select {
	case <-t.Accepted():
	case <-d.turn.done:
	}
	return d.turn, nil
}

// Resume continues the last turn of a session that stopped with open tool
// calls (agent.Resume), driven by this process in the background like a
// started turn; its EventTurnStarted says Resumed. The Runner resumes turns
// by itself: when a decision comes for a turn that no run waits for, and
// when its sweeper finds one that can go on; a host calls Resume when it
// knows better (a decision it took without a Notifier).
//
// It returns once the turn published its first event. A session with
// nothing to resume is an error wrapping agent.ErrNothingToResume, and
// publishes nothing; the other errors are those of Start.
func (r *Runner) Resume(ctx context.Context, sessionID string) (*Turn, error) {
	if sessionID == "" {
		return nil, errors.New("runner: Resume needs a session id")
	}
	ss, d, err := r.reserve(ctx, sessionID, false)
	if err != nil {
		return nil, err
	}
	release, err := r.take(ctx, ss, d, false)
	if err != nil {
		return nil, err
	}
	runCtx := r.runContext(ctx, ss.id, d)
	first := make(chan error, 1)
	go r.drive(runCtx, ss, d, release, r.agent.Resume(runCtx, sessionID), first)
	if err := <-first; err != nil {
		return nil, err
	}
	return d.turn, nil
}

// Send starts a turn (see [Runner.Start]) and yields its events until its
// EventTurnEnded. Breaking out of the loop, or cancelling ctx, stops the
// following, not the turn: [Runner.Interrupt] stops it. The error of a
// failed start comes as the only pair.
func (r *Runner) Send(ctx context.Context, in agent.Input) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		t, err := r.Start(ctx, in)
		if err != nil {
			yield(Event{}, err)
			return
		}
		for e, err := range r.Subscribe(ctx, t.SessionID, t.Seq-1) {
			if !yield(e, err) || err != nil {
				return
			}
			if e.Kind == EventTurnEnded && e.Turn == t.Seq || e.Kind == EventSessionDeleted {
				return
			}
		}
	}
}

// reserve makes a new run the session's run in this process, unless it has
// one, the Runner is closed or drives MaxRuns runs. The run must then end
// with finish or unreserve.
//
// A run that has ended and is being cleared (its lease released) is waited
// for, so that a client that sends its next message as soon as it sees the
// end is not refused. With wait (a new message), so is a run that was
// interrupted and winds down (a client that sends as soon as its stop was
// acknowledged), and a run of this process that shows no turn in
// progress: a resume or a sweep that looks at the session (the sweeper, a
// decision's note; it ends without a turn, or starts one, which refuses
// the message), or another message before its turn starts. The client
// sees no run then either.
func (r *Runner) reserve(ctx context.Context, id string, wait bool) (*session, *driven, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var timeout <-chan time.Time
look:
	for ss := r.sessions[id]; ss != nil && ss.run != nil && !r.closed; ss = r.sessions[id] {
		var changed <-chan struct{}
		switch {
		case ss.run.ending, wait && ss.run.stopping:
			changed = ss.run.turn.done
		case wait && ss.log.open == 0:
			changed = ss.changedLocked()
		default:
			break look
		}
		if timeout == nil {
			t := time.NewTimer(opTimeout)
			defer t.Stop()
			timeout = t.C
		}
		r.mu.Unlock()
		select {
		case <-changed:
			r.mu.Lock()
		case <-timeout:
			r.mu.Lock()
			break look
		case <-ctx.Done():
			r.mu.Lock()
			break look
		}
	}
	switch {
	case r.closed:
		return nil, nil, ErrClosed
	case r.sessions[id] != nil && r.sessions[id].run != nil:
		return nil, nil, fmt.Errorf("runner: session %q: %w (in this process)", id, agent.ErrBusy)
	case r.maxRuns > 0 && r.running >= r.maxRuns:
		return nil, nil, fmt.Errorf("runner: %w (%d)", ErrTooManyRuns, r.maxRuns)
	}
	ss := r.sessionLocked(id)
	d := &driven{turn: &Turn{SessionID: id, done: make(chan struct{})}, looks: !wait}
	ss.run = d
	r.running++
	r.runs.Add(1) // under r.mu, not closed: Close waits for it
	return ss, d, nil
}

// unreserve ends the reservation of a run that published nothing, or
// only the end of a stale turn, and closes its Turn's done (nobody holds
// that Turn: what waits for the run's end sees it).
func (r *Runner) unreserve(ss *session, d *driven) {
	defer r.runs.Done()
	defer close(d.turn.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ss.run == d {
		ss.run = nil
		r.running--
	}
	r.forgetLocked(ss)
	wakeAll(ss) // a follower that skipped the store meanwhile looks again
}

// take takes the session for a reserved run: its lease (an error wrapping
// agent.ErrBusy when another process holds it), the session in the Store
// (created for a new message, wait; anything else on a session the Store
// does not have is an error wrapping agent.ErrNothingToResume and
// memory.ErrNotFound, and creates nothing), and the log's numbering,
// ending a turn a stopped process left open. It returns the function that
// releases the lease; on error the run is unreserved.
func (r *Runner) take(ctx context.Context, ss *session, d *driven, wait bool) (release func(), err error) {
	release, err = r.lease(ctx, ss.id, d, wait)
	if err != nil {
		r.unreserve(ss, d)
		return nil, err
	}
	fail := func(err error) (func(), error) {
		release()
		r.unreserve(ss, d)
		return nil, err
	}
	if _, err := r.store.Session(ctx, ss.id); errors.Is(err, memory.ErrNotFound) {
		if !wait {
			return fail(fmt.Errorf("runner: session %q: %w (%w)", ss.id, agent.ErrNothingToResume, err))
		}
		if _, err := r.store.CreateSession(ctx, memory.Session{ID: ss.id}); err != nil && !errors.Is(err, memory.ErrExists) {
			return fail(fmt.Errorf("runner: creating session %q: %w", ss.id, err))
		}
	} else if err != nil {
		return fail(fmt.Errorf("runner: loading session %q: %w", ss.id, err))
	}
	if err := r.syncLog(ctx, ss); err != nil {
		return fail(err)
	}
	return release, nil
}

// leaseWait is how long a new message waits for a session's lease that
// another process holds when the Store keeps no event log to tell whether a
// turn is in progress: the end of a turn is seen on other processes a
// moment before its driver releases the lease.
const leaseWait = time.Second

// lease takes the session's lease for d and keeps it renewed until release
// is called; a lease that cannot be renewed cancels d's run with a cause
// that suspends it. Without a Leaser it only returns a no-op.
//
// With wait (a new message), a lease another process holds is tried again
// as long as the Store's event log shows no turn of the session in
// progress: that process ends a turn whose end is already shown (its
// driver writes the end before it releases the lease), or looks at the
// session (a sweep, a resume that finds nothing), which takes more than a
// moment on a loaded machine. A turn in progress refuses the message at
// once. The wait ends at the latest when the holder's lease would have
// expired unrenewed (the TTL, and leaseWait); without an event log, after
// leaseWait.
func (r *Runner) lease(ctx context.Context, id string, d *driven, wait bool) (release func(), err error) {
	if r.leaser == nil {
		return func() {}, nil
	}
	patience := leaseWait
	if r.elog != nil {
		patience += r.ttl
	}
	deadline := time.Now().Add(patience)
	for {
		asked := time.Now()
		ok, err := r.leaser.AcquireLease(ctx, id, r.holder, r.ttl)
		if err != nil {
			return nil, fmt.Errorf("runner: taking the lease of session %q: %w", id, err)
		}
		if ok {
			d.mu.Lock()
			d.held = asked
			d.mu.Unlock()
			break
		}
		if !wait || time.Now().After(deadline) || r.turnShown(ctx, id) {
			return nil, fmt.Errorf("runner: session %q: %w", id, agent.ErrBusy)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("runner: session %q: %w", id, agent.ErrBusy)
		}
	}
	stopCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(r.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stopCtx.Done():
				return
			case <-tick.C:
			}
			err := r.keepLease(stopCtx, id, d)
			switch {
			case stopCtx.Err() != nil:
				return
			case errors.Is(err, errLeaseLost):
				r.logger.Error("runner: a session's lease was lost to another process", "session", id, "holder", r.holder)
				d.cancel(errLeaseLost)
				return
			case err != nil:
				r.logger.Error("runner: a session's lease could not be renewed", "session", id, "holder", r.holder, "err", err)
				d.cancel(err)
				return
			}
		}
	}()
	return func() {
		stop()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), max(r.ttl/3, time.Second))
		defer cancel()
		if err := r.leaser.ReleaseLease(ctx, id, r.holder); err != nil {
			r.logger.Warn("runner: releasing a session's lease", "session", id, "err", err)
		}
	}, nil
}

// turnShown reports whether the Store's event log shows a turn of the
// session in progress, driven by another process; also when it cannot
// tell (the Store fails), but false without an event log.
func (r *Runner) turnShown(ctx context.Context, id string) bool {
	if r.elog == nil {
		return false
	}
	running, err := r.inProgress(ctx, id)
	return err != nil || running
}

// keepLease renews this process's lease of the session that d drives. It
// returns nil once the Store says this process holds it; errLeaseLost
// when the Store says another process does; an error wrapping
// errLeaseUnrenewed when the Store failed every try until the lease would
// have expired (a Store error is no lost lease: it is tried again, as
// long as the lease lasts); ctx's error when ctx ends first. Without a
// Leaser it returns nil.
func (r *Runner) keepLease(ctx context.Context, id string, d *driven) error {
	if r.leaser == nil {
		return nil
	}
	d.mu.Lock()
	expires := d.held.Add(r.ttl)
	d.mu.Unlock()
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		asked := time.Now()
		// A try may take what is left of the lease, and never less than a
		// renewal's period: a lease that expired (the process stalled)
		// and nobody took is taken again.
		tctx, cancel := context.WithTimeout(ctx, max(time.Until(expires), r.ttl/3))
		ok, err := r.leaser.AcquireLease(tctx, id, r.holder, r.ttl)
		cancel()
		switch {
		case err == nil && ok:
			d.mu.Lock()
			if asked.After(d.held) {
				d.held = asked
			}
			d.mu.Unlock()
			return nil
		case err == nil:
			return errLeaseLost
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if time.Until(expires) < wait {
			return unrenewed{err}
		}
		r.logger.Warn("runner: renewing a session's lease failed; trying again", "session", id, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runContext returns the context of d's run: ctx's values, without its
// cancellation; cancelled by d.cancel and by Close; carrying the lease
// guard the agent asks before a tool starts, and the Runner's forms as the
// asker of the tools that ask the person (interact.WithAsker).
func (r *Runner) runContext(ctx context.Context, id string, d *driven) context.Context {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.base, func() { d.cancel(context.Cause(r.base)) })
	d.mu.Lock()
	d.stop = func(cause error) {
		stop()
		cancel(cause)
	}
	if d.cause != nil {
		d.cancelled = true
		d.stop(d.cause)
	}
	d.mu.Unlock()
	runCtx = interact.WithAsker(runCtx, r.asker())
	return drive.WithGuard(runCtx, func(ctx context.Context) bool { return r.keepLease(ctx, id, d) == nil })
}

// lastMessage returns the id of the session's last stored message; 0 when
// it has none (or the Store fails: a client then loads all of it).
func (r *Runner) lastMessage(ctx context.Context, id string) int64 {
	msgs, err := r.store.Messages(ctx, id, true)
	if err != nil || len(msgs) == 0 {
		return 0
	}
	return msgs[len(msgs)-1].ID
}

// drive ranges over d's run, publishing its chunks, then ends it: its
// EventTurnEnded, its events written, its lease released. A resumed turn
// publishes its EventTurnStarted with its first chunk; first gets nil then,
// or the run's error when it ended with nothing published.
func (r *Runner) drive(ctx context.Context, ss *session, d *driven, release func(), chunks iter.Seq2[agent.Chunk, error], first chan<- error) {
	var (
		rejected    *agent.ToolCall // the rejected call that ended the run
		interrupted bool
		suspended   bool
		runErr      error
		history     int64
	)
	started := d.turn.Seq != 0
	if started {
		first <- nil
	} else {
		history = r.lastMessage(ctx, ss.id)
	}
	for c, err := range chunks {
		if err != nil {
			runErr = err
			break
		}
		if !started {
			d.turn.Seq = r.publish(ss, Event{Kind: EventTurnStarted, Started: &TurnStarted{Resumed: true, History: history}}).Seq
			started = true
			first <- nil
			r.mu.Lock()
			stop := d.stopOnStart
			r.mu.Unlock()
			if stop {
				d.cancel(errInterrupted) // Interrupt came while it looked
			}
		}
		switch c.Kind {
		case agent.KindToolRejected:
			if rejected == nil && c.Depth == 0 && c.Tool != nil && endsRun(c.Tool.Cause) {
				rejected = c.Tool
			}
		case agent.KindInterrupted:
			interrupted = interrupted || c.Depth == 0
		case agent.KindSuspended:
			suspended = suspended || c.Depth == 0
		}
		r.track(d, c)
		r.publish(ss, Event{Kind: EventChunk, Turn: d.turn.Seq, Chunk: &c})
	}
	if !started {
		// Nothing was published but, maybe, the end of a stale turn:
		// nothing to resume, or a resume that failed at once.
		d.cancel(nil)
		if r.writer != nil {
			r.writer.flush(ss.id, math.MaxInt64)
		}
		release()
		r.unreserve(ss, d)
		if runErr == nil {
			runErr = fmt.Errorf("runner: session %q: %w", ss.id, agent.ErrNothingToResume)
		}
		first <- runErr
		return
	}
	end := turnEnd(context.Cause(ctx), ctx.Err() != nil, runErr, rejected, interrupted, suspended)
	d.cancel(nil)
	r.finish(ss, d, release, end)
}

// finish ends d's turn with end: its EventTurnEnded published and written,
// its lease released, the run cleared.
func (r *Runner) finish(ss *session, d *driven, release func(), end TurnEnded) {
	defer r.runs.Done()
	// The end is numbered now and shown once the lease is released: a
	// subscriber that sees it may send the next message at once. It is
	// written before the lease goes, since the next driver, maybe another
	// process, numbers its events after it.
	r.mu.Lock()
	d.ending = true
	last := ss.log.add(Event{Kind: EventTurnEnded, Turn: d.turn.Seq, Ended: &end}, false)
	r.mu.Unlock()
	if r.writer != nil {
		r.writer.add(ss.id, last)
		r.writer.flush(ss.id, last.Seq)
		r.writer.forget(ss.id)
	}
	release()
	d.turn.ended = end
	r.mu.Lock()
	ss.log.show()
	if r.onEvent != nil {
		r.onEvent(ss.id, last)
	}
	wakeAll(ss)
	if ss.run == d {
		ss.run = nil
		r.running--
	}
	r.trimLaterLocked(ss, last.Seq)
	again := d.again && end.Status == StatusSuspended && !r.closed
	if again {
		r.workers.Add(1)
	}
	r.mu.Unlock()
	close(d.turn.done)
	if again {
		// A decision came while the run waited and it suspended before it
		// took it (SuspendAfter, a lost lease): the decision resumes the
		// turn.
		go func() {
			defer r.workers.Done()
			r.resumeQuietly(ss.id)
		}()
	}
}

// turnEnd says how a run ended.
func turnEnd(cause error, cancelled bool, runErr error, rejected *agent.ToolCall, interrupted, suspended bool) TurnEnded {
	switch {
	case suspended && cancelled && errors.Is(cause, errSuspendNow):
		return TurnEnded{Status: StatusSuspended, Reason: errShutdown.Error()}
	case suspended && cancelled && errors.Is(cause, errLeaseLost):
		return TurnEnded{Status: StatusSuspended, Reason: ReasonSessionLost}
	case suspended && cancelled && errors.Is(cause, errLeaseUnrenewed):
		return TurnEnded{Status: StatusSuspended, Reason: ReasonLeaseUnrenewed}
	case suspended:
		return TurnEnded{Status: StatusSuspended}
	case cancelled && errors.Is(cause, errLeaseLost):
		// Lost before any call waited for a person (it would have
		// suspended): the process did not shut down.
		return TurnEnded{Status: StatusInterrupted, Reason: ReasonSessionLost}
	case cancelled && errors.Is(cause, errLeaseUnrenewed):
		return TurnEnded{Status: StatusInterrupted, Reason: ReasonLeaseUnrenewed}
	case cancelled && (errors.Is(cause, errShutdown) || errors.Is(cause, agent.ErrSuspended)):
		return TurnEnded{Status: StatusInterrupted, Reason: errShutdown.Error()}
	case cancelled && errors.Is(cause, errInterrupted):
		return TurnEnded{Status: StatusInterrupted}
	case runErr != nil:
		return TurnEnded{Status: StatusError, Error: runErr.Error()}
	case interrupted && rejected != nil && rejected.Cause != agent.CauseApprovalInterrupted:
		return TurnEnded{Status: StatusRejected, Reason: rejected.Reason, Cause: rejected.Cause}
	case interrupted:
		return TurnEnded{Status: StatusInterrupted}
	}
	return TurnEnded{Status: StatusFinished}
}

// endsRun reports whether a rejection of cause c can be the one that ends a
// run: not a call the run never got to, nor one the model is told about and
// may call again.
func endsRun(c agent.Cause) bool {
	switch c {
	case agent.CauseNotRun, agent.CauseIncomplete, agent.CauseInvalidArguments, agent.CauseUnknownTool:
		return false
	}
	return true
}

// awaiter is implemented by a side message that asks a person for
// something its call waits for, such as interact.FormRequest.
type awaiter interface{ AwaitsPerson() bool }

// track keeps the set of d's calls that wait for a person: those whose
// approval is required, and those whose side message asks a person (a
// form), until their call's next chunk.
func (r *Runner) track(d *driven, c agent.Chunk) {
	if c.Tool == nil || c.Tool.ID == "" || (c.Kind != agent.KindToolCall && c.Kind != agent.KindToolRejected && c.Kind != agent.KindSide) {
		return
	}
	key := c.Parent + "/" + c.Tool.ID
	asks := false
	if c.Kind == agent.KindSide {
		aw, ok := c.Side.(awaiter)
		if !ok {
			return
		}
		asks = aw.AwaitsPerson()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if asks || (c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired) {
		if d.calls == nil {
			d.calls = make(map[string]bool)
		}
		d.calls[key] = true
		return
	}
	delete(d.calls, key)
}

// resumeQuietly resumes the session in the background, logging what is
// worth a line: a turn that cannot go on here now is nothing to report.
func (r *Runner) resumeQuietly(id string) {
	ctx, cancel := context.WithTimeout(r.base, r.ttl)
	defer cancel()
	_, err := r.Resume(ctx, id)
	switch {
	case err == nil, errors.Is(err, agent.ErrBusy), errors.Is(err, agent.ErrNothingToResume),
		errors.Is(err, ErrTooManyRuns), errors.Is(err, ErrClosed), r.base.Err() != nil:
	default:
		r.logger.LogAttrs(ctx, slog.LevelWarn, "runner: resuming a turn", slog.String("session", id), slog.Any("err", err))
	}
}
