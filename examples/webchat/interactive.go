package main

import (
	"fmt"
	"net/http"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
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
