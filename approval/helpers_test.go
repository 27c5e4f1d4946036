package approval_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// leakCheck fails t at cleanup when more goroutines run than when it was
// called, after a short grace period, and prints their stacks.
func leakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after; stacks:\n%s", before, n, buf)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

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
