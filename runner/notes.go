package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/planround/planround/internal/waiting"
	"github.com/planround/planround/memory"
)

// interruptChannel is the Notifier channel on which a Runner asks the
// others to interrupt a session's run; the payload is the session id.
const interruptChannel = "planround_interrupt"

// listen starts the Notifier listeners: decisions (a turn no run waits for
// is resumed here), events of other processes (subscribers read them), and
// interruptions.
func (r *Runner) listen() error {
	if r.notifier == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, l := range []struct {
		channel string
		fn      func(string)
	}{
		{waiting.Channel, r.decisionNoted},
		{eventsChannel, r.eventsNoted},
		{interruptChannel, r.interruptNoted},
	} {
		stop, err := r.notifier.Listen(ctx, l.channel, l.fn)
		if err != nil {
			return fmt.Errorf("runner: listening on %q: %w", l.channel, err)
		}
		r.stops = append(r.stops, stop)
	}
	return nil
}

// closeListeners stops the Notifier listeners.
func (r *Runner) closeListeners() {
	for _, stop := range r.stops {
		stop()
	}
	r.stops = nil
}

// decisionNoted hears the note of a decision or an answer (of this
// Runner's approvals and forms, or another process's): the turn is
// resumed here unless a run of this process waits for it (then the run
// takes it; if that run suspends before it does, it is resumed when it
// ends). A run of another process makes the resume end at once (the
// lease). A lost note is the sweeper's.
func (r *Runner) decisionNoted(payload string) {
	note, ok := waiting.ParseNote(payload)
	session := note.SessionID
	if r.calls == nil || r.pending == nil || !ok {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if ss := r.sessions[session]; ss != nil && ss.run != nil {
		ss.run.again = true
		r.mu.Unlock()
		return
	}
	r.workers.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.workers.Done()
		r.resumeQuietly(session)
	}()
}

// eventsNoted hears that another process wrote events ("<seq> <session>"),
// or deleted a session ("deleted <session>"), or that notes may have been
// lost (""): the subscribers concerned look at the Store's log.
func (r *Runner) eventsNoted(payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if payload == "" {
		for _, ss := range r.sessions {
			wakeAll(ss)
		}
		return
	}
	head, id, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	ss := r.sessions[id]
	if ss == nil {
		return
	}
	if head == "deleted" {
		r.goneLocked(ss)
		return
	}
	if _, err := strconv.ParseInt(head, 10, 64); err == nil {
		wakeAll(ss)
	}
}

// wakeAll wakes the session's subscribers and the messages waiting for
// its run (reserve). Runner.mu must be held.
func wakeAll(ss *session) {
	for f := range ss.subs {
		f.wake()
	}
	if ss.changed != nil {
		close(ss.changed)
		ss.changed = nil
	}
}

// interruptNoted hears another process ask for a session's run to be
// interrupted: it is, if this process drives it.
func (r *Runner) interruptNoted(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ss := r.sessions[id]; ss != nil && ss.run != nil {
		ss.run.stopping = true
		ss.run.cancel(errInterrupted)
	}
}

// Interrupt interrupts the session's run, wherever it is driven: in this
// process at once, in another one through the Store's Notifier (when the
// Store's event log says a turn is in progress). It reports whether a run
// was found to interrupt (a resume or a sweep of this process that looks
// at the session and has started no turn is none, but the turn it starts
// is interrupted at once, and a turn that another process runs meanwhile
// is interrupted there), and returns once that run has ended (its EventTurnEnded
// published), or ctx ends, or after ten seconds: a message sent once
// Interrupt returned is not refused because the stopped run is still
// winding down (one sent meanwhile to this process waits for it). A turn
// of another process that no process drives any more (its process
// stopped) is ended here, and reports false. A turn suspended at calls
// that wait for a person has no run: [Runner.Stop] also cancels the
// session's approvals and forms, whose cancellations then end the turn.
func (r *Runner) Interrupt(ctx context.Context, sessionID string) (bool, error) {
	r.mu.Lock()
	ss := r.sessions[sessionID]
	if ss != nil && ss.run != nil {
		d := ss.run
		active := !d.ending
		looking := d.looks && ss.log.open == 0 && !d.ending
		d.stopping = true
		if looking {
			d.stopOnStart = true
		} else {
			d.cancel(errInterrupted)
		}
		r.mu.Unlock()
		deadline := time.NewTimer(stopWait)
		defer deadline.Stop()
		select {
		case <-d.turn.done:
			if looking {
				active = d.turn.Seq != 0 // it started a turn, interrupted
			}
		case <-ctx.Done():
		case <-deadline.C:
			r.logger.Warn("runner: an interrupted run did not end in time", "session", sessionID)
		}
		if active || ctx.Err() != nil {
			return active, nil
		}
		// This process had no turn of the session: it only looked at it
		// (a resume after a decision's note, a sweep), or its own turn was
		// already ending. The session's turn may run in another process,
		// which kept the look from starting one: ask that process.
	} else {
		r.mu.Unlock()
	}
	if r.notifier == nil || r.elog == nil {
		return false, nil
	}
	running, err := r.inProgress(ctx, sessionID)
	if err != nil || !running {
		return false, err
	}
	if r.endIfStale(ctx, sessionID) {
		return false, nil // left by a process that stopped: ended now
	}
	if err := r.notifier.Notify(ctx, interruptChannel, sessionID); err != nil {
		return false, fmt.Errorf("runner: asking another process to interrupt session %q: %w", sessionID, err)
	}
	// The other process shows the end in the Store's log: look for it.
	deadline := time.NewTimer(stopWait)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return true, nil
		case <-deadline.C:
			r.logger.Warn("runner: a run interrupted in another process did not end in time", "session", sessionID)
			return true, nil
		}
		if running, err := r.inProgress(ctx, sessionID); err != nil || !running {
			return true, nil
		}
	}
}

// stopWait bounds how long Interrupt waits for the run it stopped to end.
const stopWait = 10 * time.Second

// inProgress reports whether the Store's log has a turn of the session in
// progress: its last event is not an EventTurnEnded.
func (r *Runner) inProgress(ctx context.Context, id string) (bool, error) {
	_, open, err := r.tail(ctx, id)
	return open != 0, err
}

// Running reports whether a turn of the session is in progress: driven by
// this process, or by another one according to the Store's event log.
func (r *Runner) Running(ctx context.Context, sessionID string) (bool, error) {
	r.mu.Lock()
	ss := r.sessions[sessionID]
	local := ss != nil && ss.run != nil && !ss.run.ending
	r.mu.Unlock()
	if local || r.elog == nil {
		return local, nil
	}
	running, err := r.inProgress(ctx, sessionID)
	if err != nil || !running {
		return false, err
	}
	if r.endIfStale(ctx, sessionID) {
		return false, nil // left by a process that stopped: ended now
	}
	return true, nil
}

// Delete deletes a session: it interrupts the session's run and waits for
// it to end (in this process; another process's run is asked to stop and
// fails when it next writes), deletes the session from the Store, cancels
// what it still waits for (its approvals and forms, as [Runner.Stop]
// does), and ends
// the session's subscriptions, here and in the other processes, with an
// EventSessionDeleted. Deleting an unknown session is no error.
func (r *Runner) Delete(ctx context.Context, sessionID string) error {
	r.mu.Lock()
	var d *driven
	if ss := r.sessions[sessionID]; ss != nil {
		d = ss.run
	}
	r.mu.Unlock()
	if d != nil {
		d.cancel(errInterrupted)
		select {
		case <-d.turn.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else if _, err := r.Interrupt(ctx, sessionID); err != nil {
		r.logger.Warn("runner: interrupting a session being deleted", "session", sessionID, "err", err)
	}
	r.mu.Lock()
	marked := r.sessions[sessionID]
	if marked != nil {
		marked.deleting = true
	}
	r.mu.Unlock()
	if err := r.store.DeleteSession(ctx, sessionID); err != nil && !errors.Is(err, memory.ErrNotFound) {
		if marked != nil {
			r.mu.Lock()
			marked.deleting = false
			r.mu.Unlock()
		}
		return fmt.Errorf("runner: deleting session %q: %w", sessionID, err)
	}
	r.mu.Lock()
	if ss := r.sessions[sessionID]; ss != nil {
		r.goneLocked(ss)
	}
	r.mu.Unlock()
	// What the session's turn still waits for ends (a wait of another
	// process, a form the store kept): nobody can answer it any more.
	if _, err := r.approvals.CancelSession(ctx, sessionID); err != nil {
		r.logger.Warn("runner: cancelling the approvals of a session being deleted", "session", sessionID, "err", err)
	}
	if _, err := r.forms.CancelSession(ctx, sessionID); err != nil {
		r.logger.Warn("runner: cancelling the forms of a session being deleted", "session", sessionID, "err", err)
	}
	if r.notifier != nil {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		if payload := "deleted " + sessionID; len(payload) <= memory.MaxNotifyPayload {
			if err := r.notifier.Notify(nctx, eventsChannel, payload); err != nil {
				r.logger.Warn("runner: telling the other processes about a deletion", "session", sessionID, "err", err)
			}
		}
	}
	return nil
}

// goneLocked marks ss deleted: its subscriptions end, and the session's
// next use starts afresh. r.mu must be held.
func (r *Runner) goneLocked(ss *session) {
	ss.gone = true
	ss.log.stopTrim()
	wakeAll(ss)
	if r.sessions[ss.id] == ss && ss.run == nil {
		delete(r.sessions, ss.id)
	}
}

// startSweeper starts the sweeper: a sweep now, then one every r.sweep,
// until Close.
func (r *Runner) startSweeper() {
	if r.sweep <= 0 {
		return
	}
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		tick := time.NewTicker(r.sweep)
		defer tick.Stop()
		for {
			r.sweepOnce()
			select {
			case <-r.stopped:
				return
			case <-tick.C:
			}
		}
	}()
}

// sweepOnce is a sweep of the sweeper.
func (r *Runner) sweepOnce() {
	ctx, cancel := context.WithTimeout(r.base, r.sweep+opTimeout)
	defer cancel()
	if err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
		r.logger.Warn("runner: looking for turns to resume", "err", err)
	}
}

// Sweep does now what the sweeper does every Config.SweepInterval: it
// resumes every turn of the Store that can go on without a person
// (resumableSessions: a decision no run took, a call cut by a stop, a call
// stored and never asked about), in the background, and ends the turns
// that the subscribers of this process follow and whose process stopped.
// A host with its own schedule sets SweepInterval negative and calls it.
// It needs a Store that keeps calls and approvals (else it does nothing),
// and returns the Store's error.
func (r *Runner) Sweep(ctx context.Context) error {
	if r.calls == nil || r.pending == nil {
		return nil
	}
	ids, err := resumableSessions(ctx, r.calls, r.pending)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.resumeQuietly(id)
	}
	if r.elog == nil {
		return nil
	}
	r.mu.Lock()
	var followed []string
	for id, ss := range r.sessions {
		if ss.run == nil && len(ss.subs) > 0 {
			followed = append(followed, id)
		}
	}
	r.mu.Unlock()
	for _, id := range followed {
		if running, err := r.inProgress(ctx, id); err != nil || !running {
			continue
		}
		r.endIfStale(ctx, id)
	}
	return nil
}

// endIfStale ends the session's turn in progress when no process drives
// it (its lease is free): a process that stopped left it. It reports
// whether it found the session free.
func (r *Runner) endIfStale(ctx context.Context, id string) bool {
	ss, d, err := r.reserve(ctx, id, false)
	if err != nil {
		return false
	}
	release, err := r.take(ctx, ss, d, false) // take ends a stale turn
	if err != nil {
		return false
	}
	if r.writer != nil {
		r.writer.flush(id, math.MaxInt64) // the end written before the lease goes
	}
	release()
	r.unreserve(ss, d)
	return true
}
