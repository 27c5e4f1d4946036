package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// A sub-agent is a tool that runs a nested agent on a task, with some of the
// host's tools. Its chunks come through the host's run, marked with its name
// and depth, so a host can show them indented under the call; its calls are
// approved through the host's approver, in the host's session.
func ExampleNewSubAgent() {
	// A local model: the host's agent asks the researcher, which looks up
	// the weather and answers; then the host's agent answers.
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "researcher", `{"task":"What is the weather in Paris?"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny, 22 C.").Finish("stop"),
		agenttest.Reply().Text("The researcher says it is sunny, 22 C.").Finish("stop"),
	)
	cfg := agent.Config{
		BaseURL:         srv.URL(),
		HTTPClient:      srv.Client(),
		Model:           "gpt-4o-mini",
		DisablePlanning: true,
	}
	tools, err := agent.NewToolRegistry(getWeather)
	if err != nil {
		panic(err)
	}

	// The researcher: the same model, another prompt, one of the host's
	// tools.
	sub := cfg
	sub.SystemPrompt = "You research one question and answer it in one sentence."
	if sub.Tools, err = tools.Subset("get_weather"); err != nil {
		panic(err)
	}
	researcher, err := agent.NewSubAgent("researcher", "Researches a question; give it the whole question.", sub)
	if err != nil {
		panic(err)
	}
	if err := tools.Add(researcher); err != nil {
		panic(err)
	}

	// The host's approver, asked about the researcher's calls too, in the
	// host's session. Here it approves every call; a host that drives its
	// runs with a runner.Runner has a person decide (runner.Runner.Decide).
	cfg.Tools = tools
	cfg.Approver = agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		fmt.Printf("(approving %s in session %s)\n", req.Call.Name, req.SessionID)
		return agent.Decision{Approved: true}, nil
	})
	a, err := agent.New(cfg)
	if err != nil {
		panic(err)
	}

	for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		who := "host"
		if c.Agent != "" {
			who = c.Agent + " (for " + c.Parent + ")"
		}
		indent := strings.Repeat("    ", c.Depth)
		switch {
		case c.Kind == agent.KindText:
			fmt.Printf("%s%s says: %s\n", indent, who, c.Text)
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateExecuting:
			fmt.Printf("%s%s runs %s %s\n", indent, who, c.Tool.Name, c.Tool.Arguments)
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("%s%s got: %s\n", indent, who, c.Tool.Result)
		}
	}
	// Output:
	// (approving researcher in session s1)
	// host runs researcher {"task":"What is the weather in Paris?"}
	// (approving get_weather in session s1)
	//     researcher (for call_1) runs get_weather {"city":"Paris"}
	//     researcher (for call_1) got: sunny, 22 C in Paris
	//     researcher (for call_1) says: Sunny, 22 C.
	// host got: Sunny, 22 C.
	// host says: The researcher says it is sunny, 22 C.
}
