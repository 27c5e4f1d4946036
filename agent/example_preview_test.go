package agent_test

import (
	"context"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

func ExampleAgent_Preview() {
	a, err := agent.New(agent.Config{
		Model:          "gpt-4o-mini",
		SystemPrompt:   "You are a travel assistant.",
		Layers:         []memory.Layer{memory.TextLayer{"The user lives in Lyon."}},
		PlanningPrompt: "Answer in words first, then end with <no_tool> or <need_tool>.",
	})
	if err != nil {
		panic(err)
	}
	// What the model would receive first for this turn: nothing is sent.
	msgs, err := a.Preview(context.Background(), agent.Input{
		History: []memory.Message{
			{Role: memory.RoleUser, Content: "Hi!"},
			{Role: memory.RoleAssistant, Content: "Hello! How can I help? <no_tool>"},
		},
		Message: "Is it raining in Paris?",
	})
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("%-9s %s\n", m.Role, m.Content)
	}
	// Output:
	// system    You are a travel assistant.
	// system    The user lives in Lyon.
	// user      Hi!
	// assistant Hello! How can I help? <no_tool>
	// user      Is it raining in Paris?
	// system    Answer in words first, then end with <no_tool> or <need_tool>.
}
