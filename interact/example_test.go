package interact_test

import (
	"context"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
)

// A host that answers the model's questions from its range loop, as a
// terminal does, and shows cards. A browser host would send the form to the
// page and give the answers to runner.Runner.Answer instead.
func Example() {
	// A scripted model: it asks a question and shows a card in one round,
	// then answers.
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(
		agenttest.Reply().
			Call(0, "call_1", "ask_user_question", `{"questions":[{"id":"seat","question":"Window or aisle?","kind":"single","options":["window","aisle"]}]}`).
			Call(1, "call_2", "show_card", `{"title":"Flight AB123","body":"Paris to Rome, 9:40","fields":[{"name":"Gate","value":"B12"}]}`).
			Finish("tool_calls"),
		agenttest.Reply().Text("Booked: an aisle seat.").Finish("stop"),
	)

	forms, err := interact.NewForms(interact.FormsConfig{})
	if err != nil {
		panic(err)
	}
	tools, err := agent.NewToolRegistry(interact.AskUserQuestion(), interact.ShowCard())
	if err != nil {
		panic(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:         srv.URL(),
		HTTPClient:      srv.Client(),
		Model:           "any",
		Tools:           tools, // both skip approval: no Approver needed
		DisablePlanning: true,
	})
	if err != nil {
		panic(err)
	}

	// No runner drives this run: the forms ask the person, through the
	// run's context.
	ctx := interact.WithAsker(context.Background(), forms)
	in := agent.Input{SessionID: "s1", Message: "Book my flight."}
	for c, err := range a.Run(ctx, in) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch side := c.Side.(type) {
		case interact.FormRequest:
			for _, q := range side.Questions {
				fmt.Printf("form: %s %v\n", q.Question, q.Options)
			}
			// The user picks "aisle". The call has not started to wait
			// yet: the answer is kept for it.
			if _, err := forms.Answer(context.Background(), interact.FormReply{
				SessionID: in.SessionID, FormID: side.FormID, Answers: interact.Answers{"seat": {"aisle"}},
				By: "terminal user", Via: "terminal",
			}); err != nil {
				fmt.Println("answer:", err)
			}
		case interact.Card:
			fmt.Printf("card: %s: %s (%s %s)\n", side.Title, side.Body, side.Fields[0].Name, side.Fields[0].Value)
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("%s returned %s\n", c.Tool.Name, c.Tool.Result)
		case c.Kind == agent.KindText:
			fmt.Println(c.Text)
		}
	}
	fmt.Println("forms left:", forms.Len())
	// Output:
	// form: Window or aisle? [window aisle]
	// ask_user_question returned {"answers":[{"id":"seat","question":"Window or aisle?","answer":"aisle"}]}
	// card: Flight AB123: Paris to Rome, 9:40 (Gate B12)
	// show_card returned card "Flight AB123" shown to the user
	// Booked: an aisle seat.
	// forms left: 0
}
