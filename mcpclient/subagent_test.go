package mcpclient

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// A sub-agent that borrows a per_conversation server's tools works on an
// instance of its own, never the user's: it starts counting afresh, runs in
// another process, and that process ends with the sub-agent's run, also
// when the run is interrupted during the sub-agent's call. The user's
// instance keeps its state.
func TestSubAgentGetsItsOwnInstance(t *testing.T) {
	for _, interrupt := range []bool{false, true} {
		t.Run("interrupt="+strconv.FormatBool(interrupt), func(t *testing.T) {
			leaktest.Check(t)
			cfg := stdioConfig(t, "sandboxed")
			cfg.Isolation = IsolationPerConversation
			c := newClient(t, Options{}, cfg)

			// The host's model calls counter or the helper, as the user
			// asks; the helper's model calls counter, pid and (to be
			// interrupted) slow, one a round.
			model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
				tools := 0
				for _, m := range req.Messages {
					if m.Role == "tool" {
						tools++
					}
				}
				if req.Model == "helper" {
					steps := []string{"counter", "pid", "slow"}
					if !interrupt {
						steps = steps[:2]
					}
					if tools < len(steps) {
						return agenttest.Reply().Call(0, "call_"+strconv.Itoa(tools+1), steps[tools], `{}`).Finish("tool_calls")
					}
					return agenttest.Reply().Text("helped").Finish("stop")
				}
				if tools > 0 {
					return agenttest.Reply().Text("ok").Finish("stop")
				}
				user, _ := req.LastMessageWithRole("user")
				args := `{}`
				if user.Content == "helper" {
					args = `{"task":"count"}`
				}
				return agenttest.Reply().Call(0, "call_1", user.Content, args).Finish("tool_calls")
			})
			base := agent.Config{
				BaseURL:         "http://model.invalid/v1",
				HTTPClient:      &http.Client{Transport: model},
				DisablePlanning: true,
				Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
					return agent.Decision{Approved: true}, nil
				}),
			}
			host, err := agent.NewToolRegistry()
			require.NoError(t, err)
			require.NoError(t, c.Register(host))
			sub := base
			sub.Model = "helper"
			sub.Tools, err = host.Subset("counter", "pid", "slow")
			require.NoError(t, err)
			helper, err := agent.NewSubAgent("helper", "Counts.", sub)
			require.NoError(t, err)
			require.NoError(t, host.Add(helper))
			base.Model = "host"
			base.Tools = host
			a, err := agent.New(base)
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ask := func(tool string) []agent.Chunk {
				var chunks []agent.Chunk
				for ch, err := range a.Run(ctx, agent.Input{SessionID: "a", Message: tool}) {
					require.NoError(t, err)
					chunks = append(chunks, ch)
				}
				return chunks
			}
			result := func(chunks []agent.Chunk, depth int, tool string) string {
				for _, ch := range chunks {
					if ch.Depth == depth && ch.Tool != nil && ch.Tool.Name == tool && ch.Tool.State == agent.StateResult {
						return ch.Tool.Result
					}
				}
				return ""
			}

			assert.Equal(t, "1", result(ask("counter"), 0, "counter"))
			assert.Equal(t, "2", result(ask("counter"), 0, "counter"))
			assert.Equal(t, 1, c.Servers()[0].Instances)

			runCtx, stop := context.WithCancel(ctx)
			cancelRun := func(ch agent.Chunk) bool {
				return interrupt && ch.Depth == 1 && ch.Tool != nil && ch.Tool.Name == "slow" && ch.Tool.State == agent.StateExecuting
			}
			var chunks []agent.Chunk
			for ch, err := range a.Run(runCtx, agent.Input{SessionID: "a", Message: "helper"}) {
				require.NoError(t, err)
				chunks = append(chunks, ch)
				if ch.Depth == 1 && ch.Tool != nil && ch.Tool.Name == "pid" && ch.Tool.State == agent.StateExecuting {
					// While the helper runs, its instance is the second one.
					assert.Equal(t, 2, c.Servers()[0].Instances)
				}
				if cancelRun(ch) {
					stop()
				}
			}
			stop()
			assert.Equal(t, "1", result(chunks, 1, "counter"), "the helper counts on an instance of its own")
			subPID, err := strconv.Atoi(result(chunks, 1, "pid"))
			require.NoError(t, err, "%v", chunks)
			if interrupt {
				assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
			} else {
				assert.Equal(t, "helped", result(chunks, 0, "helper"))
			}
			assert.True(t, processGone(subPID), "the helper's instance ended with its run")
			assert.Equal(t, 1, c.Servers()[0].Instances, "only the user's instance runs")

			assert.Equal(t, "3", result(ask("counter"), 0, "counter"), "the user's instance kept its count")
			userPID, err := strconv.Atoi(result(ask("pid"), 0, "pid"))
			require.NoError(t, err)
			assert.NotEqual(t, subPID, userPID)
		})
	}
}
