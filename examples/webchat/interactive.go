package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
)

// addResearcher registers in tools the demo's researcher sub-agent, built
// from the host's Config. Its own call skips approval: delegating changes
// nothing, and the calls it makes ask for theirs through the calling run's
// Approver, with the calling run's session, so the page shows their cards
// nested under the researcher's.
func addResearcher(tools *agent.ToolRegistry, host agent.Config) error {
	t, err := demo.Researcher(host)
	if err != nil {
		return fmt.Errorf("researcher sub-agent: %w", err)
	}
	if err := tools.Add(t); err != nil {
		return fmt.Errorf("researcher sub-agent: %w", err)
	}
	return tools.SetSkipApproval(demo.ResearcherName, true)
}

// skillInfo is one skill as GET /api/skills lists it.
type skillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// handleSkills answers GET /api/skills with the skills the server loaded
// (-skills), sorted by name: [{name, description}]; [] without skills.
func (s *Server) handleSkills(w http.ResponseWriter, r *http.Request) {
	out := []skillInfo{}
	if s.skills != nil {
		for _, sk := range s.skills.Skills() {
			out = append(out, skillInfo{Name: dropFormat(sk.Name), Description: sk.Description})
		}
	}
	writeJSONValue(w, http.StatusOK, out)
}

// checkSkills checks that the server has every skill a chat message names.
func (s *Server) checkSkills(names []string) error {
	for _, n := range names {
		if s.skills == nil {
			return fmt.Errorf("unknown skill %q: this server has no skills", n)
		}
		if _, ok := s.skills.Lookup(n); !ok {
			return fmt.Errorf("unknown skill %q", n)
		}
	}
	return nil
}

// markNestedLocked remembers where an approval or a form of a sub-agent's
// run belongs, for a page that reconnects while it waits. s.mu must be
// held.
func (s *Server) markNestedLocked(id string, c agent.Chunk) {
	var key string
	switch {
	case c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateApprovalRequired:
		key = c.Tool.ApprovalID
	case c.Kind == agent.KindSide:
		if f, ok := c.Side.(interact.FormRequest); ok {
			key = f.FormID
		}
	}
	ss := s.live[id]
	if key == "" || ss == nil {
		return
	}
	if ss.nested == nil {
		ss.nested = make(map[string]nestedMark)
	}
	ss.nested[key] = nestedMark{agent: c.Agent, depth: c.Depth, parent: c.Parent, round: c.Round}
}

// pendingChunks returns the chunks that draw again what waits for the
// session's user: the approval_required chunks of its pending approvals,
// and for each open form its call's executing chunk and its form_request.
// Those of a sub-agent's run are marked as they were. Both lists are read
// from the Store: they hold what waits in a suspended turn, or one another
// replica drives, too. A Store that fails is logged; what was read is
// returned.
func (s *Server) pendingChunks(ctx context.Context, sessionID string) []agent.Chunk {
	approvals, forms, err := s.pending(ctx, sessionID)
	if err != nil {
		s.logger.Warn("webchat: listing the pending approvals and forms", "session", sessionID, "err", err)
	}
	if len(approvals) == 0 && len(forms) == 0 {
		return nil
	}
	s.mu.Lock()
	var nested map[string]nestedMark
	if ss := s.live[sessionID]; ss != nil {
		nested = ss.nested
	}
	mark := func(key string, c agent.Chunk) agent.Chunk {
		if m, ok := nested[key]; ok {
			c.Agent, c.Depth, c.Parent, c.Round = m.agent, m.depth, m.parent, m.round
		}
		return c
	}
	var out []agent.Chunk
	for _, p := range approvals {
		call := p.Call
		call.State = agent.StateApprovalRequired
		call.ApprovalRequired = true
		call.ApprovalID = p.ApprovalID
		out = append(out, mark(p.ApprovalID, agent.Chunk{Kind: agent.KindToolCall, Round: p.Round, Tool: &call}))
	}
	for _, f := range forms {
		call := agent.ToolCall{ID: f.CallID, Name: "ask_user_question"}
		executing := call
		executing.State = agent.StateExecuting
		out = append(out,
			mark(f.FormID, agent.Chunk{Kind: agent.KindToolCall, Tool: &executing}),
			mark(f.FormID, agent.Chunk{Kind: agent.KindSide, Tool: &call, Side: f.FormRequest}))
	}
	s.mu.Unlock()
	return out
}

// pending returns the session's pending approvals and open forms, each
// oldest first, as the runner lists them (runner.Runner.Pending).
func (s *Server) pending(ctx context.Context, sessionID string) ([]approval.PendingApproval, []interact.PendingForm, error) {
	list, err := s.runner.Pending(ctx, sessionID)
	var approvals []approval.PendingApproval
	var forms []interact.PendingForm
	for _, a := range list {
		switch {
		case a.Approval != nil:
			approvals = append(approvals, *a.Approval)
		case a.Form != nil:
			forms = append(forms, *a.Form)
		}
	}
	return approvals, forms, err
}
