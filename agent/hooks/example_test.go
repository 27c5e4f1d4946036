package hooks_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/hooks"
)

func ExampleLoad() {
	// A folder of hooks; hooks.LoadDir("hooks") reads a real one.
	folder := fstest.MapFS{
		"hooks.json": {Data: []byte(`{"hooks": [
			{"name": "rules", "at": "before_planning", "file": "rules.md"},
			{"at": "before_final_answer", "role": "user", "text": "Answer in one sentence."}
		]}`)},
		"rules.md": {Data: []byte("# House rules\n\nNever book anything without asking.\n")},
	}
	hs, err := hooks.Load(folder)
	if err != nil {
		panic(err)
	}

	// A scripted model stands in for a real one.
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(
		agenttest.Reply().Text("Hello! <no_tool>").Finish("stop"),
		agenttest.Reply().Text("Hello, how can I help?").Finish("stop"),
	)
	a, err := agent.New(agent.Config{
		BaseURL:            srv.URL(),
		HTTPClient:         srv.Client(),
		Model:              "gpt-4o-mini",
		PlanningPrompt:     "(planning prompt)",
		ContinuationPrompt: "(continuation prompt)",
		Hooks:              hs,
	})
	if err != nil {
		panic(err)
	}
	for _, err := range a.Run(context.Background(), agent.Input{Message: "Hi"}) {
		if err != nil {
			panic(err)
		}
	}
	// The rules went into the planning request only (they are not
	// persistent); the instruction into the final answer's.
	for _, req := range srv.Requests() {
		fmt.Printf("request %d:\n", req.Seq)
		for _, m := range req.Messages {
			fmt.Printf("  %-9s %q\n", m.Role, m.Content)
		}
	}
	// Output:
	// request 1:
	//   user      "Hi"
	//   system    "# House rules\n\nNever book anything without asking."
	//   system    "(planning prompt)"
	// request 2:
	//   user      "Hi"
	//   assistant "Hello!"
	//   user      "[continue]"
	//   user      "Answer in one sentence."
	//   system    "(continuation prompt)"
}
