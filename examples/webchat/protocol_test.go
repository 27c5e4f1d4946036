package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/ui/jsonapi"
)

// The chat's protocol is ui/jsonapi's: its types under the names the tests
// use.
type (
	runDone      = jsonapi.RunDone
	runStarted   = jsonapi.RunStarted
	historyEntry = jsonapi.HistoryEntry
	openCall     = jsonapi.OpenCall
	sessionEntry = jsonapi.SessionEntry
)

const (
	reasonShutdown = jsonapi.ReasonShutdown
	reasonStopped  = jsonapi.ReasonStopped
)

var cleanTitle = jsonapi.CleanTitle

// The history's headers.
const (
	headerSeq     = jsonapi.HeaderSeq
	headerRunning = jsonapi.HeaderRunning
)

// busy reports whether a run is active in the session, here or on another
// replica.
func (s *Server) busy(sessionID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running, err := s.runner.Running(ctx, sessionID)
	return err == nil && running
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

const maxTitleLen = jsonapi.MaxTitleLen

// chatRequest is the body of POST /api/chat as the page sends it.
type chatRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	chatExtra
}

// pending returns the session's pending approvals and open forms, each
// oldest first, as the runner lists them.
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
