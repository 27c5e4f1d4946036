package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// The agent-round benchmarks run a whole turn through Agent.Run against the
// scripted model (agenttest, on 127.0.0.1): a reply calling echo with
// {"text":"hello"}, the call, and a one-delta answer. The kinds differ only
// in the echo tool:
//
//   - functool: an agent.FuncTool that decodes its arguments and answers
//     the text, the cost of a tool that does nothing;
//   - mcp-inprocess, mcp-stdio, mcp-http: the echo tool of the test server
//     through a Client (in process as in BenchmarkMCPCall, the stdio test
//     server, streamable HTTP on 127.0.0.1).
//
// Every echo skips approval, so that the turn has no wait.

// echoFuncTool is an agent.FuncTool doing what the test server's echo does.
func echoFuncTool() agent.FuncTool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{
			Name:         "echo",
			Description:  "Answers with its text.",
			SkipApproval: true,
			Parameters: map[string]any{
				"type":       "object",
				"properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required":   []any{"text"},
			},
		},
		Fn: func(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			var a struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return a.Text, nil
		},
	}
}

// roundAgents returns a turn runner for each kind, all on one scripted
// model; everything ends in tb's cleanups.
func roundAgents(tb testing.TB) []pairedCall {
	tb.Helper()
	model := agenttest.NewServer()
	tb.Cleanup(model.Close)
	model.KeepRequests(0)
	call := agenttest.Reply().Call(0, "call_1", "echo", `{"text":"hello"}`).Finish("tool_calls")
	answer := agenttest.Reply().Text("Done.").Finish("stop")
	model.Respond(func(req *agenttest.Request) agenttest.Response {
		if req.LastMessage().Role == "tool" {
			return answer
		}
		return call
	})

	newAgent := func(tool agent.Tool) *agent.Agent {
		reg, err := agent.NewToolRegistry(tool)
		if err != nil {
			tb.Fatal(err)
		}
		a, err := agent.New(agent.Config{
			BaseURL:         model.URL(),
			HTTPClient:      model.Client(),
			Model:           "bench",
			Tools:           reg,
			DisablePlanning: true,
		})
		if err != nil {
			tb.Fatal(err)
		}
		return a
	}
	turn := func(a *agent.Agent) func() error {
		return func() error {
			var result string
			for c, err := range a.Run(context.Background(), agent.Input{Message: "go"}) {
				if err != nil {
					return err
				}
				if c.Tool != nil && c.Tool.State == agent.StateResult {
					result = c.Tool.Result
				}
			}
			if result != "hello" {
				return fmt.Errorf("the tool's result is %q, want hello", result)
			}
			return nil
		}
	}

	inproc := inProcessClient(tb, testserver.New(testserver.Options{}), ServerConfig{Name: "inprocess", SkipApproval: true})
	stdio := newFixture(tb, TransportStdio).cfg
	stdio.SkipApproval = true
	streamable := newFixture(tb, TransportHTTP).cfg
	streamable.SkipApproval = true
	return []pairedCall{
		{"functool", turn(newAgent(echoFuncTool()))},
		{"mcp-inprocess", turn(newAgent(benchTool(tb, inproc, "echo")))},
		{"mcp-stdio", turn(newAgent(benchTool(tb, newClient(tb, Options{}, stdio), "echo")))},
		{"mcp-http", turn(newAgent(benchTool(tb, newClient(tb, Options{}, streamable), "echo")))},
	}
}

// BenchmarkMCPAgentRound: one whole turn with a tool round, for each kind
// of echo tool.
func BenchmarkMCPAgentRound(b *testing.B) {
	leaktest.Check(b, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	for _, k := range roundAgents(b) {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if err := k.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMCPAgentRoundPaired: the turns of BenchmarkMCPAgentRound in
// turn (see benchPaired), against functool's.
func BenchmarkMCPAgentRoundPaired(b *testing.B) {
	leaktest.Check(b, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	benchPaired(b, roundAgents(b))
}
