package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// showTool shows a side message while it runs and waits until the host has
// seen it before it returns: the side chunk must come while the call runs.
type showTool struct {
	name  string
	seen  chan struct{} // closed by the host when it saw the side chunk
	block chan struct{} // when not nil, Execute also waits for it before showing
}

func (s *showTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: s.name, SkipApproval: true}
}

func (s *showTool) Execute(ctx context.Context, _ json.RawMessage, p agent.Progress) (string, error) {
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if !agent.ShowSide(ctx, map[string]any{"type": "asked", "by": s.name}) {
		return "", nil
	}
	select {
	case <-s.seen:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	p.WriteString("after")
	return "done " + s.name, nil
}

func TestShowSideWhileTheCallRuns(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(map[bool]string{false: "sequential", true: "parallel"}[parallel], func(t *testing.T) {
			srv := newServer(t)
			srv.Enqueue(planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "slow", `{}`).Call(1, "call_2", "asker", `{}`).Finish("tool_calls"),
				agenttest.Reply().Text("ok").Finish("stop"))
			// In parallel, slow shows its side only once asker's was seen,
			// which proves asker's was yielded while slow still ran.
			release := make(chan struct{})
			slow := &showTool{name: "slow", seen: make(chan struct{})}
			if parallel {
				slow.block = release
			}
			asker := &showTool{name: "asker", seen: make(chan struct{})}
			a := newAgent(t, srv, func(c *agent.Config) { c.ParallelTools = parallel }, slow, asker)
			var sides []string
			var tr []string
			for c, err := range a.Run(context.Background(), agent.Input{Message: "go"}) {
				require.NoError(t, err)
				tr = append(tr, trace([]agent.Chunk{c})...)
				if c.Kind != agent.KindSide {
					continue
				}
				m := c.Side.(map[string]any)
				require.Equal(t, m["by"], c.Tool.Name, "the side chunk names the call that showed it")
				sides = append(sides, c.Tool.ID)
				switch c.Tool.Name {
				case "asker":
					close(asker.seen)
					if parallel {
						close(release)
					}
				case "slow":
					close(slow.seen)
				}
			}
			if parallel {
				assert.Equal(t, []string{"call_2", "call_1"}, sides)
			} else {
				assert.Equal(t, []string{"call_1", "call_2"}, sides)
			}
			// Each side chunk comes before its call's result and its later output.
			for _, name := range []string{"slow", "asker"} {
				i, j := indexOf(tr, "side"), indexOf(tr, "tool:result:"+name)
				require.GreaterOrEqual(t, i, 0)
				require.Greater(t, j, i, "%s: result before the side chunk: %v", name, tr)
			}
		})
	}
}

func TestShowSideOutsideACall(t *testing.T) {
	assert.False(t, agent.ShowSide(context.Background(), map[string]any{"type": "x"}))
}
