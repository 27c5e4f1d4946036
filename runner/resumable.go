package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/planround/planround/memory"
)

// resumableSessions returns the sessions whose open tool calls (see
// [memory.CallLog]) can go on without anybody deciding anything, sorted:
// what the sweeper ([Runner.Sweep]) resumes, at start and from time to
// time, after a crash, a restart, or a decision whose note was lost. calls
// and approvals are the Runner's Store.
//
// A session is resumable when one of its open calls
//
//   - is executing (its process stopped while the tool ran: the resumed
//     turn reports it as stopped and never runs it again, or runs a
//     resumable tool again, see agent.ToolDefinition.Resumable), unless
//     its record names a form (or approval) still pending, which a
//     resumable tool waits for; or
//   - has an approval that was decided;
//
// or when it has a call that was not asked about yet (no approval id, or
// one the approval store does not know, which the resumed turn asks about
// again) and none of its calls has an approval that waits for a decision:
// a run asks about its calls one at a time, so a session with an undecided
// approval waits for a person, and resuming it would only ask again.
//
// A session listed may be driven right now by a live process: agent.Resume
// then fails with agent.ErrBusy (the session's lease) and the sweeper moves
// on. A session deleted while resumableSessions reads it is left out.
func resumableSessions(ctx context.Context, calls memory.CallLog, approvals memory.ApprovalStore) ([]string, error) {
	sessions, err := calls.OpenSessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("runner: list the sessions with open calls: %w", err)
	}
	var out []string
	for _, s := range sessions {
		ok, err := resumable(ctx, calls, approvals, s)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// resumable applies resumableSessions' rules to one session.
func resumable(ctx context.Context, calls memory.CallLog, approvals memory.ApprovalStore, sessionID string) (bool, error) {
	open, err := calls.OpenCalls(ctx, sessionID)
	if errors.Is(err, memory.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("runner: open calls of session %q: %w", sessionID, err)
	}
	unasked, undecided := false, false
	for _, c := range open {
		var a memory.Approval
		known := false
		if c.ApprovalID != "" {
			a, err = approvals.GetApproval(ctx, c.ApprovalID)
			switch {
			case errors.Is(err, memory.ErrNotFound):
			case err != nil:
				return false, fmt.Errorf("runner: approval %s of session %q: %w", c.ApprovalID, sessionID, err)
			default:
				known = a.SessionID == sessionID // another session's is not this call's: asked again
			}
		}
		switch {
		case c.Executing && known && !a.Decided:
			undecided = true // a resumable tool waits for a form
		case c.Executing:
			return true, nil
		case !known:
			unasked = true
		case a.Decided:
			return true, nil
		default:
			undecided = true
		}
	}
	return unasked && !undecided, nil
}
