package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

func ExampleHookFunc() {
	srv := exampleServer() // plans, calls get_weather, answers
	defer srv.Close()

	// A custom hook: a fact the model should plan with, and, once tools
	// have answered, an instruction for the answer that names them.
	house := agent.HookFunc(func(ctx context.Context, at agent.Checkpoint, st agent.HookState) ([]agent.Injection, error) {
		switch at {
		case agent.BeforePlanning:
			// Persistent: kept in the conversation (flagged as a hook
			// message, which a host does not show).
			return []agent.Injection{{Content: "The user is planning a trip to France.", Persistent: true}}, nil
		case agent.AfterToolResults:
			var names []string
			for _, c := range st.Calls {
				names = append(names, c.Name)
			}
			// Temporary: in the next request only.
			return []agent.Injection{{Role: memory.RoleUser, Content: "Say which tools you used: " + strings.Join(names, ", ") + "."}}, nil
		}
		return nil, nil
	})

	tools, _ := agent.NewToolRegistry(getWeather)
	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "gpt-4o-mini",
		Tools:      tools,
		Approver: agent.ApproverFunc(func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
		Hooks: []agent.Hook{house},
	})
	if err != nil {
		panic(err)
	}
	turn := a.NewTurn(agent.Input{Message: "Weather in Paris?"})
	for _, err := range turn.Run(context.Background()) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
	}

	fmt.Println("the last request:")
	reqs := srv.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, c := range m.ToolCalls {
			m.Content += "[call " + c.Name + "]"
		}
		fmt.Printf("  %-9s %s\n", m.Role, m.Content)
	}
	fmt.Println("the turn's messages:")
	for _, m := range turn.Messages() {
		if m.Hook {
			fmt.Printf("  (hook)    %s\n", m.Content)
			continue
		}
		for _, c := range m.ToolCalls {
			m.Content += "[call " + c.Name + "]"
		}
		fmt.Printf("  %-9s %s\n", m.Role, m.Content)
	}
	// Output:
	// the last request:
	//   user      Weather in Paris?
	//   system    The user is planning a trip to France.
	//   assistant I'll check the weather in Paris.
	//   user      [continue]
	//   assistant [call get_weather]
	//   tool      sunny, 22 C in Paris
	//   user      Say which tools you used: get_weather.
	// the turn's messages:
	//   user      Weather in Paris?
	//   (hook)    The user is planning a trip to France.
	//   assistant I'll check the weather in Paris. <need_tool>
	//   assistant [call get_weather]
	//   tool      sunny, 22 C in Paris
	//   assistant It is sunny in Paris, 22 °C.
}
