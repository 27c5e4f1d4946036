package interact_test

import (
	"context"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
)

// terminal is the interact.Asker of a host that runs agent.Run itself, as
// a terminal does (a runner.Runner brings its own): it asks a form's
// questions at once; here the person's answers come from a map.
type terminal struct{ answers interact.Answers }

func (terminal) OpenForm(_ context.Context, req interact.FormRequest) (interact.FormRequest, error) {
	qs, err := interact.CheckQuestions(req.Questions)
	if err != nil {
		return interact.FormRequest{}, err
	}
	req.Questions, req.FormID = qs, "form-1"
	return req, nil
}

func (t terminal) AwaitForm(_ context.Context, req interact.FormRequest) (interact.FormRequest, interact.Answers, error) {
	qs, err := interact.CheckQuestions(req.Questions)
	if err != nil {
		return interact.FormRequest{}, nil, err
	}
	req.Questions = qs
	answers, err := interact.CheckAnswers(qs, t.answers)
	return req, answers, err
}

func (terminal) Elicit(context.Context, interact.ElicitationRequest) (interact.ElicitationAnswer, error) {
	return interact.ElicitationAnswer{Action: interact.ActionDecline}, nil
}

// A host that answers the model's questions itself, as a terminal does,
// and shows cards. A browser host drives its runs with a runner.Runner,
// sends the form to the page and gives the answers to runner.Runner.Answer
// instead.
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

	// No runner drives this run: the host's Asker asks the person, through
	// the run's context. The user will pick "aisle".
	ctx := interact.WithAsker(context.Background(), terminal{answers: interact.Answers{"seat": {"aisle"}}})
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
	// Output:
	// form: Window or aisle? [window aisle]
	// ask_user_question returned {"answers":[{"id":"seat","question":"Window or aisle?","answer":"aisle"}]}
	// card: Flight AB123: Paris to Rome, 9:40 (Gate B12)
	// show_card returned card "Flight AB123" shown to the user
	// Booked: an aisle seat.
}
