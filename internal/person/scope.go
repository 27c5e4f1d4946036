package person

import (
	"fmt"

	"github.com/planround/planround/agent"
)

// parseScope returns the scope a decision's stored scope names.
func parseScope(s string) (agent.Scope, error) {
	switch s {
	case "", "once":
		return agent.ScopeOnce, nil
	case "session":
		return agent.ScopeSession, nil
	case "always":
		return agent.ScopeAlways, nil
	}
	return 0, fmt.Errorf("unknown scope %q (want once, session or always)", s)
}
