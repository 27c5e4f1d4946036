package main

import (
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
)

// Durable turns. With a Store that keeps open calls and approvals (see
// Options.Store), a turn that waits for a decision is not tied to the
// process that started it: the approval Manager keeps its approvals in the
// Store, and the runner (package runner) resumes a turn when a decision
// comes that no run of this process waits for, when its sweeper finds a
// turn that can go on (a decision taken while no process ran it, a call
// cut by a crash), and suspends the runs that wait for a decision at Close
// instead of interrupting them, so that their cards stay answerable. Every
// run holds its session's lease (memory.Leaser): one process at a time
// drives a session.
//
// With a *pgstore.Store the Server is one replica of many behind a load
// balancer, with no stickiness: a browser's requests may reach any of
// them. They share, through PostgreSQL, the conversations, the open calls,
// the approvals, the leases and the turns' events (the Store's event log,
// whose notes wake the event streams of the other replicas); an interrupt
// posted to one replica reaches the run on another. Nothing else needs
// sharing: an owner cookie is checked against the session id it made (a
// hash, access.go), which every replica computes the same way; an access
// token (-token) must be given to every replica. ask_user_question forms
// are kept in the Store like the approvals (interact.Forms on the same
// Store and Notifier): a form is answered on any replica, outlives a
// restart, and its answer resumes a suspended turn.

// newManager returns the approval Manager of o: durable, on the Store, when
// the Server is.
func (s *Server) newManager(o Options) (*approval.Manager, error) {
	cfg := approval.ManagerConfig{Timeout: o.ApprovalTimeout}
	if s.durable {
		cfg.Store = o.Store.(memory.ApprovalStore)
		cfg.Notifier, _ = o.Store.(memory.Notifier)
		cfg.SuspendAfter = o.SuspendAfter
	}
	return approval.NewManager(cfg)
}

// newForms returns the Forms of ask_user_question for o: o.Forms when the
// caller made them (see formsFor), else the Server's own.
func (s *Server) newForms(o Options) (*interact.Forms, error) {
	if o.Forms != nil {
		return o.Forms, nil
	}
	s.ownForms = true
	if !s.durable {
		o.Store = nil // the Server's own MemStore: forms of this process, as its approvals
	}
	return formsFor(o)
}

// formsFor returns the Forms a Server of o makes, for o.Store as the caller
// gives it (nil: none): like the approvals, kept in the Store when it is
// durable (a form outlives its process, the run
// suspends after SuspendAfter, an answer on any replica resumes it), in
// memory otherwise. main makes them before the MCP client, whose servers'
// requests for input are forms too.
func formsFor(o Options) (*interact.Forms, error) {
	cfg := interact.FormsConfig{Timeout: o.FormTimeout}
	_, calls := o.Store.(memory.CallLog)
	approvals, ok := o.Store.(memory.ApprovalStore)
	if o.Store != nil && calls && ok {
		cfg.Store = approvals
		cfg.Notifier, _ = o.Store.(memory.Notifier)
		cfg.SuspendAfter = o.SuspendAfter
	}
	return interact.NewForms(cfg)
}

// closeManager closes the approval Manager and the Forms, once the runs
// have ended.
func (s *Server) closeManager() {
	if s.approvals != nil {
		if err := s.approvals.Close(); err != nil {
			s.logger.Warn("webchat: closing the approval manager", "err", err)
		}
	}
	if s.forms != nil && s.ownForms {
		if err := s.forms.Close(); err != nil {
			s.logger.Warn("webchat: closing the forms", "err", err)
		}
	}
}
