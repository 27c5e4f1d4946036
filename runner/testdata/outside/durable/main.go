// Command durable is a durable host built on planround's public packages
// only, as a user would write it: a SQLite store and a runner on it, with
// nothing else set.
//
//	durable DB EFFECTS start SESSION         start a turn, print the approval id, wait
//	durable DB EFFECTS approve SESSION ID    approve the pending approval ID (found
//	                                         among the session's), follow the turn
//	                                         to its end
//
// Its model is a scripted one (agenttest); its tool appends a line to
// EFFECTS each time it runs.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

type weatherArgs struct {
	City string `json:"city"`
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: durable DB EFFECTS start SESSION | approve SESSION ID")
		os.Exit(2)
	}
	db, effects, verb, session := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	ctx := context.Background()

	model := agenttest.NewServer()
	defer model.Close()
	model.Respond(script)
	tools, err := agent.NewToolRegistry(agent.NewTool("get_weather", "Weather for a city.",
		func(ctx context.Context, in weatherArgs, _ agent.Progress) (string, error) {
			f, err := os.OpenFile(effects, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return "", err
			}
			defer f.Close()
			fmt.Fprintf(f, "ran for %s in %d\n", in.City, os.Getpid())
			return "sunny in " + in.City, nil
		}))
	check(err)
	st, err := sqlitestore.Open(ctx, db)
	check(err)
	defer st.Close()
	r, err := runner.New(runner.Config{Store: st,
		Agent: agent.Config{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "scripted", Tools: tools}})
	check(err)
	defer r.Close()

	switch verb {
	case "start":
		for e, err := range r.Send(ctx, agent.Input{SessionID: session, Message: "weather in Lima?"}) {
			check(err)
			if e.Chunk != nil && e.Chunk.Tool != nil && e.Chunk.Tool.State == agent.StateApprovalRequired {
				fmt.Println("approval", e.Chunk.Tool.ApprovalID)
				select {} // waits for its kill
			}
		}
		fmt.Println("the turn ended without asking")
		os.Exit(1)
	case "approve":
		last, err := r.Log(ctx, session)
		check(err)
		// A front end draws the card again from the pending approvals,
		// and its decision names the call the card shows.
		pending, err := r.Pending(ctx, session)
		check(err)
		ok := false
		for _, p := range pending {
			if a := p.Approval; a != nil && a.ApprovalID == os.Args[5] {
				ok, err = r.Decide(ctx, runner.Reply{SessionID: session, ApprovalID: a.ApprovalID,
					CallID: a.Call.ID, Tool: a.Call.Name, ArgumentsDigest: a.Call.ArgumentsDigest,
					Decision: agent.Decision{Approved: true}})
				check(err)
			}
		}
		fmt.Println("decided", ok)
		for e, err := range r.Subscribe(ctx, session, last.Last) {
			check(err)
			if e.Kind == runner.EventTurnEnded {
				fmt.Println("turn", e.Ended.Status, e.Ended.Reason)
				if e.Ended.Status != runner.StatusSuspended {
					return
				}
			}
		}
	}
}

// script is the model: it plans, calls get_weather(Lima), and answers with
// the result.
func script(req *agenttest.Request) agenttest.Response {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool":
		return agenttest.Reply().Text("It is " + last.Content + ".").Finish("stop")
	case len(req.Tools) > 0:
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	}
	return agenttest.Reply().Text("Let me look that up. <need_tool>").Finish("stop")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "durable:", err)
		os.Exit(1)
	}
}
