package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// exampleServer stands in for a real model: a local OpenAI-compatible server
// that plays a scripted weather conversation.
func exampleServer() *agenttest.Server {
	srv := agenttest.NewServer()
	srv.Enqueue(
		agenttest.Reply().Text("I'll check the weather in Paris.", " <need_tool>").Finish("stop"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":`, `"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("It is sunny in Paris, 22 °C.").Finish("stop"),
	)
	return srv
}

// getWeather is a custom Tool: a definition for the model and a function.
var getWeather = agent.FuncTool{
	Def: agent.ToolDefinition{
		Name:        "get_weather",
		Description: "Current weather for a city.",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	},
	Fn: func(ctx context.Context, args json.RawMessage, progress agent.Progress) (string, error) {
		var in struct {
			City string `json:"city"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err // the model reads "error: ..."
		}
		return "sunny, 22 C in " + in.City, nil
	},
}

func ExampleAgent_Run() {
	srv := exampleServer()
	defer srv.Close()

	tools, _ := agent.NewToolRegistry(getWeather)
	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(), // any OpenAI-compatible API
		HTTPClient: srv.Client(),
		Model:      "gpt-4o-mini",
		Tools:      tools,
		Approver: agent.ApproverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch c.Kind {
		case agent.KindText:
			fmt.Printf("text %q\n", c.Text)
		case agent.KindToolCall:
			fmt.Println(strings.TrimSpace(fmt.Sprintln("tool", c.Tool.Name, c.Tool.State, c.Tool.Result)))
		case agent.KindRoundEnd:
			fmt.Println(strings.TrimSpace(fmt.Sprintln("round_end", c.Round, c.Intent)))
		}
	}
	// Output:
	// text "I'll check the weather in Paris."
	// text " "
	// round_end 0 need_tool
	// tool get_weather start
	// tool get_weather executing
	// tool get_weather result sunny, 22 C in Paris
	// round_end 1
	// text "It is sunny in Paris, 22 °C."
	// round_end 2
}

// A custom Approver: a policy that lets read-only tools run and refuses the
// rest with a reason the model reads. A policy decides at once, so the agent
// shows no approval card for its calls.
func ExampleApproverFunc() {
	readOnly := map[string]bool{"get_weather": true, "get_time": true}
	policy := agent.ApproverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		if readOnly[req.Call.Name] {
			return agent.Decision{Approved: true}, nil
		}
		return agent.Decision{Reason: req.Call.Name + " is not allowed here"}, nil
	})

	for _, name := range []string{"get_weather", "run_command"} {
		ticket, _ := policy.Request(context.Background(), agent.ApprovalRequest{Call: agent.ToolCall{Name: name}})
		d, decided := ticket.Decision()
		fmt.Printf("%s decided=%v approved=%v %q\n", name, decided, d.Approved, d.Reason)
	}
	// Output:
	// get_weather decided=true approved=true ""
	// run_command decided=true approved=false "run_command is not allowed here"
}

// A custom Tool that reports partial output while it works; the agent shows
// it as it arrives and keeps it if the run is interrupted.
func ExampleTool() {
	count := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "count", Description: "Counts to three.", SkipApproval: true},
		Fn: func(ctx context.Context, args json.RawMessage, progress agent.Progress) (string, error) {
			var out strings.Builder
			for i := 1; i <= 3; i++ {
				if err := ctx.Err(); err != nil {
					return "", err
				}
				line := fmt.Sprintf("%d\n", i)
				progress.WriteString(line)
				out.WriteString(line)
			}
			return out.String(), nil
		},
	}
	reg, err := agent.NewToolRegistry(count)
	fmt.Println(reg.Names(), err)
	// Output:
	// [count] <nil>
}
