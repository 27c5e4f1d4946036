package main

import (
	"net/http"

	"github.com/planround/planround/approval"
)

// auditResponse is the answer of GET /api/audit.
type auditResponse struct {
	// You is the principal of the browser that asks (see principalOf): the
	// page shows a decision whose By is You as "you".
	You string `json:"you"`
	// Decisions are the session's decisions on approvals, oldest first:
	// people's, policies', timeouts and interruptions.
	Decisions []approval.DecisionRecord `json:"decisions"`
}

// handleAudit answers GET /api/audit?session_id=... with the session's
// audit trail, read from the store (runner.Runner.Decisions): every decision on the session's tool
// calls, oldest first, with who took it (By: a browser's principal,
// "policy:<name>", "timeout" or "system"), through what (Via), when, and
// the edited arguments if any.
//
//	200 {"you":"browser:…","decisions":[approval.DecisionRecord, …]}
//	400                                  missing or invalid session_id
//	401, 403                             no owner cookie; the session is
//	                                     another browser's
//	500                                  the store failed
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	you, _ := authorize(r, id) // checked: it succeeds
	out := auditResponse{You: you, Decisions: []approval.DecisionRecord{}}
	for rec, err := range s.runner.Decisions(r.Context(), approval.DecisionQuery{SessionID: id}) {
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "reading the decisions: " + err.Error()})
			return
		}
		out.Decisions = append(out.Decisions, rec)
	}
	writeJSONValue(w, http.StatusOK, out)
}
