// Command kit runs agent turns against the fake models of agent/agenttest
// using nothing but the public API. TestOutsideModule builds a copy of it in
// a module of its own, outside the planround repository.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kit:", err)
		os.Exit(1)
	}
}

// add is a tool that adds two numbers.
var add = agent.FuncTool{
	Def: agent.ToolDefinition{Name: "add", Description: "Adds a and b.", SkipApproval: true},
	Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
		var in struct{ A, B int }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		return fmt.Sprint(in.A + in.B), nil
	},
}

func run() error {
	tools, err := agent.NewToolRegistry(add)
	if err != nil {
		return err
	}

	// A scripted server on 127.0.0.1: plan, then call, then answer.
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.Plan("Let me add."), agenttest.CallTool("add", `{"a":2,"b":3}`))
	srv.Enqueue(agenttest.Reply().Text("2 + 3 = 5.").Finish("stop"))
	a, err := agent.New(agent.Config{BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "any", Tools: tools})
	if err != nil {
		return err
	}
	if err := turn(a, "server"); err != nil {
		return err
	}
	fmt.Println("server requests:", len(srv.Requests()), "left:", srv.Pending())

	// The same model in process, without a port.
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		switch last := req.LastMessage(); {
		case !req.HasTools():
			return agenttest.Plan("Let me add.")
		case last.Role == "tool":
			return agenttest.Reply().Text("2 + 3 = " + last.Content + ".").Finish("stop")
		default:
			if user, _ := req.UserMessage(); user.Content != "What is 2 + 3?" {
				return agenttest.HTTPError(400, "kit: the user's message is "+user.Content)
			}
			return agenttest.CallTool("add", `{"a":2,"b":3}`)
		}
	})
	a, err = agent.New(agent.Config{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any", Tools: tools})
	if err != nil {
		return err
	}
	return turn(a, "in process")
}

// turn runs one turn and prints the tool's result and the answer.
func turn(a *agent.Agent, name string) error {
	var answer strings.Builder
	for c, err := range a.Run(context.Background(), agent.Input{Message: "What is 2 + 3?"}) {
		if err != nil {
			return err
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("%s: %s = %s\n", name, c.Tool.Name, c.Tool.Result)
		case c.Kind == agent.KindText && c.Round == 2:
			answer.WriteString(c.Text)
		}
	}
	fmt.Printf("%s: %s\n", name, answer.String())
	return nil
}
