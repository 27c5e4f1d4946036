package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planround/planround/memory"
)

func ExampleTruncate() {
	msgs := []memory.Message{
		{Role: memory.RoleUser, Content: "Read the log."},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"app.log"}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c1", Content: strings.Repeat("line\n", 100)},
		// The current turn starts here: it is never shortened.
		{Role: memory.RoleUser, Content: "Any errors?"},
	}
	for _, m := range memory.Truncate(msgs, memory.TruncateOptions{Limit: 10}) {
		fmt.Printf("%s: %q\n", m.Role, m.Content)
	}
	// Output:
	// user: "Read the log."
	// assistant: ""
	// tool: "line\nline\n…[truncated 490 chars]"
	// user: "Any errors?"
}

func ExampleRepair() {
	msgs := []memory.Message{
		{Role: memory.RoleUser, Content: "list files"},
		// The run was interrupted before the tool answered.
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "ls", Arguments: json.RawMessage("{}")}}},
		{Role: memory.RoleUser, Content: "never mind"},
		// A tool message whose call is gone.
		{Role: memory.RoleTool, ToolCallID: "c0", Content: "stale"},
	}
	for _, m := range memory.Repair(msgs) {
		fmt.Printf("%s %s: %q\n", m.Role, m.ToolCallID, m.Content)
	}
	// Output:
	// user : "list files"
	// assistant : ""
	// tool c1: "tool call was not completed"
	// user : "never mind"
}

func ExampleSummarizer() {
	ctx := context.Background()
	st := new(memory.MemStore)
	st.CreateSession(ctx, memory.Session{ID: "demo"})
	for i := range 3 {
		st.Append(ctx, "demo",
			memory.Message{Role: memory.RoleUser, Content: fmt.Sprint("question ", i)},
			memory.Message{Role: memory.RoleAssistant, Content: fmt.Sprint("answer ", i)})
	}
	s := memory.Summarizer{
		Store:     st,
		Threshold: 6,
		// A real model would be asked to summarise; this one counts.
		Model: memory.SummaryModelFunc(func(_ context.Context, msgs []memory.Message) (string, error) {
			return fmt.Sprintf("%d messages about questions", len(msgs)), nil
		}),
	}
	sum, did, err := s.MaybeSummarize(ctx, "demo")
	fmt.Println(did, sum.Content, err)

	active, _ := st.Messages(ctx, "demo", false)
	all, _ := st.Messages(ctx, "demo", true)
	fmt.Println(len(active), "active,", len(all), "in all")
	// Output:
	// true 3 messages about questions <nil>
	// 3 active, 6 in all
}

func ExampleExport() {
	ctx := context.Background()
	src, dst := new(memory.MemStore), new(memory.MemStore)
	src.CreateSession(ctx, memory.Session{ID: "trip", Title: "Trip"})
	src.Append(ctx, "trip", memory.Message{Role: memory.RoleUser, Content: "Book a train."})

	data, err := memory.Export(ctx, src, "trip")
	if err != nil {
		fmt.Println(err)
		return
	}
	sess, err := memory.Import(ctx, dst, data)
	fmt.Println(sess.ID, sess.Title, err)

	_, err = memory.Import(ctx, dst, []byte(`{"format":"planround.session/v9"}`))
	fmt.Println(err)
	// Output:
	// trip Trip <nil>
	// memory: invalid session export: format "planround.session/v9", want "planround.session/v3" (or "planround.session/v2", "planround.session/v1")
}
