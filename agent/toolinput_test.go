package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// TestStreamToolArguments: with Config.StreamToolArguments each fragment
// of a call's arguments comes as a tool_input chunk after the call's start
// chunk and before its executing chunk, in order, and the fragments make
// up the arguments the call runs with, for each of two calls streamed side
// by side; without it no tool_input chunk comes and the run is otherwise
// the same.
func TestStreamToolArguments(t *testing.T) {
	leaktest.Check(t)
	echo := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "echo", SkipApproval: true},
		Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			return string(args), nil
		},
	}
	fragments := []string{`{"te`, `xt":"a long`, ` argument`, `"}`}
	for _, on := range []bool{true, false} {
		srv := newServer(t)
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "echo", fragments...).Call(1, "call_2", "echo", `{"text":`, `"second"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Done.").Finish("stop"),
		)
		a := newAgent(t, srv, func(c *agent.Config) { c.StreamToolArguments = on }, echo)
		chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "Echo it."}))
		require.NoError(t, err)

		args := map[string]*strings.Builder{}
		started := map[string]bool{}
		executed := map[string]string{}
		inputs := 0
		for _, c := range chunks {
			switch {
			case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateStart:
				started[c.Tool.ID] = true
			case c.Kind == agent.KindToolInput:
				inputs++
				require.NotNil(t, c.Tool)
				assert.True(t, started[c.Tool.ID], "tool_input of %s before its start chunk", c.Tool.ID)
				assert.Empty(t, executed[c.Tool.ID], "tool_input of %s after it ran", c.Tool.ID)
				assert.Equal(t, "echo", c.Tool.Name)
				assert.Equal(t, 1, c.Round)
				if args[c.Tool.ID] == nil {
					args[c.Tool.ID] = new(strings.Builder)
				}
				args[c.Tool.ID].WriteString(c.Text)
			case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateExecuting:
				executed[c.Tool.ID] = string(c.Tool.Arguments)
			}
		}
		if !on {
			assert.Zero(t, inputs, "tool_input chunks without StreamToolArguments")
			assert.Len(t, executed, 2)
			continue
		}
		assert.Equal(t, len(fragments)+2, inputs, "one tool_input chunk per fragment")
		require.Len(t, args, 2)
		assert.Equal(t, strings.Join(fragments, ""), args["call_1"].String())
		assert.Equal(t, `{"text":"second"}`, args["call_2"].String())
		assert.JSONEq(t, args["call_1"].String(), executed["call_1"])
		assert.JSONEq(t, args["call_2"].String(), executed["call_2"])

		// The chunk's wire form names its kind.
		for _, c := range chunks {
			if c.Kind == agent.KindToolInput {
				b, err := json.Marshal(c)
				require.NoError(t, err)
				assert.Contains(t, string(b), `"kind":"tool_input"`)
				var back agent.Chunk
				require.NoError(t, json.Unmarshal(b, &back))
				assert.Equal(t, c.Kind, back.Kind)
				assert.Equal(t, c.Text, back.Text)
				break
			}
		}
	}
}

// BenchmarkToolArguments: a tool round whose one call streams its
// arguments in benchFragments fragments, consumed through Agent.Run, with
// StreamToolArguments off (the default) and on. Off, a fragment costs what
// it did before the option existed (the accumulator appends it); on, each
// fragment is a chunk.
func BenchmarkToolArguments(b *testing.B) {
	const benchFragments = 10_000
	pieces := make([]string, benchFragments)
	pieces[0] = `{"text":"`
	for i := 1; i < benchFragments-1; i++ {
		pieces[i] = "word "
	}
	pieces[benchFragments-1] = `"}`
	echo := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "echo", SkipApproval: true},
		Fn:  func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "ok", nil },
	}
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			srv := agenttest.NewServer()
			defer srv.Close()
			reg, err := agent.NewToolRegistry(echo)
			if err != nil {
				b.Fatal(err)
			}
			a, err := agent.New(agent.Config{
				BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "bench", Tools: reg,
				DisablePlanning: true, StreamToolArguments: on,
			})
			if err != nil {
				b.Fatal(err)
			}
			call := agenttest.Reply().Call(0, "call_1", "echo", pieces...).Finish("tool_calls")
			answer := agenttest.Reply().Text("ok").Finish("stop")
			b.ReportAllocs()
			inputs := 0
			for b.Loop() {
				srv.Enqueue(call, answer)
				for c, err := range a.Run(context.Background(), agent.Input{Message: "Echo."}) {
					if err != nil {
						b.Fatal(err)
					}
					if c.Kind == agent.KindToolInput {
						inputs++
					}
				}
			}
			if on != (inputs > 0) {
				b.Fatalf("%d tool_input chunks with StreamToolArguments %v", inputs, on)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchFragments), "ns/fragment")
		})
	}
}
