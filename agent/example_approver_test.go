package agent_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/planround/planround/agent"
)

// chatOps is an Approver that asks people in a chat channel. Request posts
// the card and returns at once with a pending ticket; the answer arrives
// later through Answer, by the card's id, and the ticket's Wait takes it.
type chatOps struct {
	post func(id, text string) // shows a card in the channel

	mu      sync.Mutex
	answers map[string]chan agent.Decision // guarded by mu: the cards still open
}

func (c *chatOps) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	id := req.SessionID + "/" + req.Call.ID
	answer := make(chan agent.Decision, 1)
	c.mu.Lock()
	c.answers[id] = answer
	c.mu.Unlock()
	// Registered before the card is posted: an answer can never come too
	// early.
	c.post(id, fmt.Sprintf("%s wants to run with %s", req.Call.Name, req.Call.Arguments))
	return agent.Pending(id, func(ctx context.Context) (agent.Decision, error) {
		defer func() { // the agent calls Wait once, also to release the card
			c.mu.Lock()
			delete(c.answers, id)
			c.mu.Unlock()
		}()
		select {
		case d := <-answer:
			return d, nil
		case <-ctx.Done():
			return agent.Decision{}, ctx.Err()
		}
	}), nil
}

// Answer is what the chat integration calls when somebody clicks a card. It
// reports whether the card was still open.
func (c *chatOps) Answer(id string, d agent.Decision) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	answer, ok := c.answers[id]
	if ok {
		delete(c.answers, id)
		answer <- d
	}
	return ok
}

// An Approver whose decisions come from people elsewhere returns a pending
// ticket; the agent shows the call as approval_required with the ticket's
// id and then waits. Here somebody answers the moment the card is posted,
// before the agent waits, and the answer is kept.
func ExamplePending() {
	bot := &chatOps{answers: map[string]chan agent.Decision{}}
	bot.post = func(id, text string) {
		fmt.Println("card", id+":", text)
		bot.Answer(id, agent.Decision{Reason: "not on a Friday"})
	}

	// What the agent does with a call that needs approval.
	ticket, _ := bot.Request(context.Background(), agent.ApprovalRequest{
		SessionID: "s1",
		Call:      agent.ToolCall{ID: "call_1", Name: "deploy", Arguments: []byte(`{"env":"prod"}`)},
	})
	_, decided := ticket.Decision()
	fmt.Println("decided at once:", decided, "approval id:", ticket.ApprovalID())
	d, err := ticket.Wait(context.Background())
	fmt.Printf("approved: %v, reason: %q, err: %v\n", d.Approved, d.Reason, err)
	fmt.Println("open cards:", len(bot.answers))
	// Output:
	// card s1/call_1: deploy wants to run with {"env":"prod"}
	// decided at once: false approval id: s1/call_1
	// approved: false, reason: "not on a Friday", err: <nil>
	// open cards: 0
}
