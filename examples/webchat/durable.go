package main

import (
	"context"
	"errors"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// Durable turns. With a Store that keeps open calls and approvals (see
// Options.Store), a turn that waits for a decision is not tied to the
// process that started it:
//
//   - the approval Manager keeps its approvals in the Store, and a decision
//     that no run of this process waits for (the run was suspended, or its
//     process stopped) resumes the turn here: agent.Resume, whose chunks go
//     to the session's event streams as a run's do;
//   - a sweeper, at start-up and every SweepInterval, resumes the turns that
//     can go on (approval.Resumable: a decision taken while no process ran
//     them, a call cut by a crash);
//   - Close suspends the runs that wait for a decision instead of
//     interrupting them, so their cards stay answerable;
//   - every run holds its session's lease (memory.Leaser), so that one
//     process at a time drives a session; a process that finds another one
//     driving it leaves it alone (agent.ErrBusy, or a 409 for a new
//     message).

// newManager returns the approval Manager of o: durable, on the Store, when
// the Server is.
func (s *Server) newManager(o Options) (*approval.Manager, error) {
	cfg := approval.ManagerConfig{Timeout: o.ApprovalTimeout}
	if s.durable {
		cfg.Store = o.Store.(memory.ApprovalStore)
		cfg.Notifier, _ = o.Store.(memory.Notifier)
		cfg.OnDecided = func(a memory.Approval) { s.resumeAsync(a.SessionID) }
		cfg.SuspendAfter = o.SuspendAfter
	}
	return approval.NewManager(cfg)
}

// closeManager closes the approval Manager, once the runs have ended.
func (s *Server) closeManager() {
	if err := s.approvals.Close(); err != nil {
		s.logger.Warn("webchat: closing the approval manager", "err", err)
	}
}

// lease takes the session's lease for this process, when the Store has
// leases, and reports whether it holds it: false when another process
// drives the session. The agent renews it while the run lasts.
func (s *Server) lease(ctx context.Context, id string) (bool, error) {
	if s.leaser == nil {
		return true, nil
	}
	ok, err := s.leaser.AcquireLease(ctx, id, s.holder, s.ttl)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// releaseLease releases this process's lease of the session, if it holds
// it.
func (s *Server) releaseLease(id string) {
	if s.leaser == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), 5*time.Second)
	defer cancel()
	if err := s.leaser.ReleaseLease(ctx, id, s.holder); err != nil {
		s.logger.Warn("webchat: releasing a session's lease", "session", id, "err", err)
	}
}

// resumeAsync resumes the session's turn in a goroutine of its own (see
// resume), unless the Server is not started yet or is closing. It does not block: the approval
// Manager calls it as it takes a decision.
func (s *Server) resumeAsync(id string) {
	if checkSessionID(id) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.started {
		return // not yet: the sweeper's first sweep finds it
	}
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		s.resume(id)
	}()
}

// resume continues the session's turn in this process (agent.Resume) and
// returns when it ends, unless a run is active in the session here, the
// Server has MaxRuns runs active (the sweeper tries again), or another
// process drives it. Its chunks go to the session's event streams between
// run_started {resumed: true} and run_done, as a run's do; a turn with
// nothing to resume publishes nothing.
func (s *Server) resume(id string) {
	s.mu.Lock()
	ss := s.sessionLocked(id)
	if s.closed || ss.run != nil || ss.deleting || s.runCount >= s.maxRuns {
		s.forgetLocked(ss)
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancelCause(s.base)
	run := s.reserveLocked(ss, cancel)
	s.mu.Unlock()

	held, err := s.lease(ctx, id)
	if !held {
		if err != nil {
			s.logger.Warn("webchat: taking a session's lease", "session", id, "err", err)
		}
		s.unreserve(ss, run)
		return
	}
	s.drive(ctx, ss, run, event{}, s.agent.Resume(ctx, id))
}

// startSweeper starts the sweeper of a durable Server: a sweep now, then
// one every s.sweep, until Close.
func (s *Server) startSweeper() {
	if s.sweep <= 0 {
		return
	}
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		tick := time.NewTicker(s.sweep)
		defer tick.Stop()
		for {
			s.sweepOnce()
			select {
			case <-s.stopped:
				return
			case <-tick.C:
			}
		}
	}()
}

// sweepOnce resumes every turn of the Store that can go on, and trims the
// shared turn log.
func (s *Server) sweepOnce() {
	ctx, cancel := context.WithTimeout(s.base, s.sweep+10*time.Second)
	defer cancel()
	ids, err := approval.Resumable(ctx, s.store.(memory.CallLog), s.store.(memory.ApprovalStore))
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("webchat: looking for turns to resume", "err", err)
	}
	for _, id := range ids {
		s.resumeAsync(id)
	}
	if s.shared != nil {
		s.shared.sweep(ctx, s)
	}
}

// isQuiet reports whether err, ending a resumed turn, is nothing to report.
func isQuiet(err error) bool {
	return errors.Is(err, agent.ErrNothingToResume) || errors.Is(err, agent.ErrBusy)
}
