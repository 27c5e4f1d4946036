//go:build approvaldurable

package main

import (
	"context"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory"
)

// durableManager says whether the approval Manager keeps its approvals in
// the Store.
const durableManager = true

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

// resumable lists the sessions whose turn the sweeper resumes.
func resumable(ctx context.Context, calls memory.CallLog, approvals memory.ApprovalStore) ([]string, error) {
	return approval.Resumable(ctx, calls, approvals)
}
