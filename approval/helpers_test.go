package approval_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

func newManager(t *testing.T, cfg approval.ManagerConfig) *approval.Manager {
	t.Helper()
	m, err := approval.NewManager(cfg)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

func request(session string, i int) agent.ApprovalRequest {
	args, _ := json.Marshal(map[string]int{"n": i})
	return agent.ApprovalRequest{
		SessionID: session,
		Round:     1,
		Call: agent.ToolCall{
			ID:        fmt.Sprintf("call_%d", i),
			Name:      "run_command",
			State:     agent.StateApprovalRequired,
			Arguments: args,
		},
	}
}

type outcome struct {
	d   agent.Decision
	err error
}
