package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

// service is the whole program of a durable host: a store and a runner on
// it. Everything that makes the conversations durable is the store, named
// once: the runner keeps the sessions, approvals and forms there, takes the
// sessions' leases, resumes turns when a decision comes, and sweeps.
type service struct {
	store  *sqlitestore.Store
	runner *runner.Runner
}

func startService(ctx context.Context, dbFile string, model *agenttest.Server, tools *agent.ToolRegistry) (*service, error) {
	st, err := sqlitestore.Open(ctx, dbFile) // for replicas: pgstore.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	r, err := runner.New(runner.Config{
		Store: st,
		Agent: agent.Config{
			BaseURL: model.URL(), HTTPClient: model.Client(), Model: "gpt-4o-mini", // your provider
			Tools: tools,
		},
		Policies: []approval.Policy{approval.ReadOnlyHints()}, // decided without a person
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &service{store: st, runner: r}, nil
}

// stop is a graceful shutdown: runs that wait for a person are suspended,
// their approvals stay answerable in the store.
func (s *service) stop() {
	s.runner.Close()
	s.store.Close()
}

type weatherArgs struct {
	City string `json:"city"`
}

// Example_durableService starts a turn that waits for an approval, stops the
// service, starts it again on the same file and approves there: the turn
// resumes and the tool runs once.
func Example_durableService() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "planround-example-")
	defer os.RemoveAll(dir)
	model := agenttest.NewServer() // stands in for a real provider
	defer model.Close()
	model.Respond(script)
	runs := 0
	tools, _ := agent.NewToolRegistry(agent.NewTool("get_weather", "Weather for a city.",
		func(ctx context.Context, in weatherArgs, _ agent.Progress) (string, error) {
			runs++
			return "sunny in " + in.City, nil
		}))

	first, err := startService(ctx, filepath.Join(dir, "chat.db"), model, tools)
	if err != nil {
		panic(err)
	}
	var call *agent.ToolCall
	for e, err := range first.runner.Send(ctx, agent.Input{SessionID: "s1", Message: "weather in Lima?"}) {
		if err != nil {
			panic(err)
		}
		if e.Chunk != nil && e.Chunk.Tool != nil && e.Chunk.Tool.State == agent.StateApprovalRequired {
			call = e.Chunk.Tool
			fmt.Println("waiting for approval of", e.Chunk.Tool.Name)
			break // the turn goes on without us following it
		}
	}
	first.stop() // a deploy: the waiting turn is suspended

	second, err := startService(ctx, filepath.Join(dir, "chat.db"), model, tools)
	if err != nil {
		panic(err)
	}
	defer second.stop()
	last, _ := second.runner.Log(ctx, "s1") // the events so far are in the store
	// The decision names the call the person saw: its id, tool and the
	// digest of its arguments, as on the approval_required chunk.
	_, _ = second.runner.Decide(ctx, runner.Reply{SessionID: "s1", ApprovalID: call.ApprovalID,
		CallID: call.ID, Tool: call.Name, ArgumentsDigest: call.ArgumentsDigest, Decision: agent.Decision{Approved: true}})
	for e, err := range second.runner.Subscribe(ctx, "s1", last.Last) {
		if err != nil {
			panic(err)
		}
		if e.Kind == runner.EventTurnStarted {
			fmt.Println("resumed:", e.Started.Resumed)
		}
		if e.Kind == runner.EventTurnEnded {
			fmt.Println("turn", e.Ended.Status)
			break
		}
	}
	fmt.Println("tool runs:", runs)
	// Output:
	// waiting for approval of get_weather
	// resumed: true
	// turn finished
	// tool runs: 1
}
