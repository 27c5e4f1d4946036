package runner

import (
	"errors"
	"testing"

	"github.com/planround/planround/agent"
)

// TestTurnEnd checks how a run's end is told: among others, a run whose
// lease was lost while it streamed ends interrupted with the lost
// session as its reason (not a shutdown), one whose lease the store failed
// to renew says so instead, and one whose approval was cancelled ends
// interrupted (nobody rejected it).
func TestTurnEnd(t *testing.T) {
	user := &agent.ToolCall{Cause: agent.CauseUser, Reason: "no"}
	cancelledApproval := &agent.ToolCall{Cause: agent.CauseApprovalInterrupted, Reason: "interrupted"}
	for _, tt := range []struct {
		name        string
		cause       error
		cancelled   bool
		runErr      error
		rejected    *agent.ToolCall
		interrupted bool
		suspended   bool
		want        TurnEnded
	}{
		{"finished", nil, false, nil, nil, false, false, TurnEnded{Status: StatusFinished}},
		{"interrupted by Interrupt", errInterrupted, true, nil, nil, true, false, TurnEnded{Status: StatusInterrupted}},
		{"shut down", errShutdown, true, nil, nil, true, false, TurnEnded{Status: StatusInterrupted, Reason: ReasonShutdown}},
		{"lease lost while streaming", errLeaseLost, true, nil, nil, true, false, TurnEnded{Status: StatusInterrupted, Reason: ReasonSessionLost}},
		{"lease lost at an approval", errLeaseLost, true, nil, nil, true, true, TurnEnded{Status: StatusSuspended, Reason: ReasonSessionLost}},
		{"lease unrenewed while streaming", unrenewed{errors.New("store down")}, true, nil, nil, true, false, TurnEnded{Status: StatusInterrupted, Reason: ReasonLeaseUnrenewed}},
		{"lease unrenewed at an approval", unrenewed{errors.New("store down")}, true, nil, nil, true, true, TurnEnded{Status: StatusSuspended, Reason: ReasonLeaseUnrenewed}},
		{"suspended at shutdown", errSuspendNow, true, nil, nil, true, true, TurnEnded{Status: StatusSuspended, Reason: ReasonShutdown}},
		{"rejected by a person", nil, false, nil, user, true, false, TurnEnded{Status: StatusRejected, Reason: "no", Cause: agent.CauseUser}},
		{"approval cancelled", nil, false, nil, cancelledApproval, true, false, TurnEnded{Status: StatusInterrupted}},
		{"failed", nil, false, errors.New("boom"), nil, false, false, TurnEnded{Status: StatusError, Error: "boom"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := turnEnd(tt.cause, tt.cancelled, tt.runErr, tt.rejected, tt.interrupted, tt.suspended); got != tt.want {
				t.Errorf("turnEnd = %+v, want %+v", got, tt.want)
			}
		})
	}
}
