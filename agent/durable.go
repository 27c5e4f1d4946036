package agent

import (
	"context"
	"errors"
	"iter"
)

// ErrSuspended suspends a run at a pending approval: returned (wrapped or
// not) by a pending Ticket's Wait, it says "not now" (the decision will come
// later, maybe hours later, maybe to another process), and given as the
// cause of the run's context (context.WithCancelCause) it suspends a run
// that waits for an approval instead of interrupting it, as a host does
// when it shuts down.
//
// A suspended run needs a Config.Store that implements memory.CallLog and
// an Input.SessionID: its calls that wait stay open in the Store, the run
// yields a suspended chunk as its last and the iterator returns nil;
// [Agent.Resume] continues the turn. Without a CallLog a suspension is a
// rejection (CauseApprovalFailed), as any other error of Wait.
var ErrSuspended = errors.New("agent: run suspended at a pending approval")

// ErrNothingToResume is returned by [Agent.Resume] for a session whose last
// turn has no open tool calls.
var ErrNothingToResume = errors.New("agent: nothing to resume")

// ErrBusy is returned by a run on a session whose lease another holder has
// (see Config.Holder): another process drives the session's run.
var ErrBusy = errors.New("agent: another holder drives this session")

// Resume continues the last turn of a session that stopped with open tool
// calls: after a crash, a restart, or a suspension (ErrSuspended). It
// yields chunks as Run does from that point. Not implemented yet.
func (a *Agent) Resume(ctx context.Context, sessionID string) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		yield(Chunk{}, errors.New("agent: Resume not implemented yet"))
	}
}
