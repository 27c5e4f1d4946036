package skills_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/memory"
)

// A custom skill folder wired into an agent. The model sees the enabled
// skills' descriptions in one system block right after the system prompt,
// and reads a skill's instructions with get_skill when a task needs them.
func Example() {
	// A host would use skills.LoadDir("skills"); a MapFS keeps the
	// example self-contained.
	fsys := fstest.MapFS{
		"haiku/SKILL.md": {Data: []byte(`---
name: haiku
description: Write poems as haiku.
license: MIT
---
Write three lines of 5, 7 and 5 syllables, about one moment in nature. No title.`)},
		"haiku/examples.md": {Data: []byte("An old silent pond / a frog jumps into the pond / splash! Silence again.")},
		"limerick/SKILL.md": {Data: []byte("---\nname: limerick\ndescription: Write poems as limericks.\n---\nFive lines, AABBA.")},
		"broken/SKILL.md":   {Data: []byte("Forgot the front matter.")},
	}
	set, err := skills.Load(fsys)
	if err != nil {
		panic(err)
	}
	fmt.Println("skills:", set.Names())
	for _, s := range set.Skipped() {
		fmt.Println("skipped:", s.Dir, "-", s.Err)
	}

	srv := agenttest.NewServer() // a scripted model on 127.0.0.1
	defer srv.Close()
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "get_skill", `{"name":"haiku"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Morning dew on grass / a sparrow shakes its feathers / the sun climbs the hill").Finish("stop"),
	)
	tools, err := agent.NewToolRegistry(set.Tool()) // get_skill needs no Approver
	if err != nil {
		panic(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:         srv.URL(),
		HTTPClient:      srv.Client(),
		Model:           "any",
		SystemPrompt:    "You are a poet.",
		Tools:           tools,
		Layers:          []memory.Layer{set.Layer()},
		DisablePlanning: true,
	})
	if err != nil {
		panic(err)
	}

	// This run enables one skill: the host's choice for this conversation.
	ctx := skills.WithEnabled(context.Background(), "haiku")
	for c, err := range a.Run(ctx, agent.Input{Message: "A poem about the morning, please."}) {
		if err != nil {
			panic(err)
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("%s -> %s\n", c.Tool.Name, c.Tool.Result)
		case c.Kind == agent.KindText:
			fmt.Println("answer:", c.Text)
		}
	}

	first := srv.Requests()[0].Messages
	fmt.Printf("request 1, message 1 (%s): %s\n", first[0].Role, first[0].Content)
	fmt.Printf("request 1, message 2 (%s): %s\n", first[1].Role, first[1].Content)
	// Output:
	// skills: [haiku limerick]
	// skipped: broken - SKILL.md does not start with a front matter line "---"
	// get_skill -> Write three lines of 5, 7 and 5 syllables, about one moment in nature. No title.
	//
	// Files of this skill (get_skill with "file" returns one): examples.md
	// answer: Morning dew on grass / a sparrow shakes its feathers / the sun climbs the hill
	// request 1, message 1 (system): You are a poet.
	// request 1, message 2 (system): You have skills: instructions for particular kinds of tasks, listed below with what each is for. Before you work on a task that a skill's description fits, call get_skill with the skill's name to read its full instructions, then follow them.
	//
	// - haiku: Write poems as haiku.
}
