//go:build !approvaldurable

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// Until the approval Manager's durable mode reaches main (issue 12): the
// Manager keeps its approvals in memory, and the sweeper finds the turns to
// resume itself. manager_durable.go (build tag approvaldurable) is the code
// that replaces this file then.

// durableManager says whether the approval Manager keeps its approvals in
// the Store: not until approval's durable mode lands.
const durableManager = false

// newManager returns the approval Manager of o.
func (s *Server) newManager(o Options) (*approval.Manager, error) {
	return approval.NewManager(approval.ManagerConfig{Timeout: o.ApprovalTimeout})
}

// closeManager closes the approval Manager, once the runs have ended.
func (s *Server) closeManager() {}

// resumable lists the sessions whose turn can go on without anyone: an
// open call whose approval was decided, was never requested, or whose tool
// was running.
func resumable(ctx context.Context, calls memory.CallLog, approvals memory.ApprovalStore) ([]string, error) {
	ids, err := calls.OpenSessions(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		recs, err := calls.OpenCalls(ctx, id)
		if errors.Is(err, memory.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		for _, rec := range recs {
			if rec.Executing || rec.ApprovalID == "" {
				out = append(out, id)
				break
			}
			a, err := approvals.GetApproval(ctx, rec.ApprovalID)
			if err != nil && !errors.Is(err, memory.ErrNotFound) {
				return out, fmt.Errorf("approval %s: %w", rec.ApprovalID, err)
			}
			if err != nil || a.Decided {
				out = append(out, id)
				break
			}
		}
	}
	return out, nil
}
