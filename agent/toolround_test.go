package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestToolAddedWithoutApprover: a registry shared with a running agent that
// has no Approver gains a tool that needs approval. Its call is rejected
// with ReasonNoApprover (no panic), and the run goes on or ends as OnReject
// says.
func TestToolAddedWithoutApprover(t *testing.T) {
	for _, onReject := range []agent.RejectAction{agent.RejectEndRun, agent.RejectContinue} {
		for _, parallel := range []bool{false, true} {
			t.Run(fmt.Sprintf("onReject=%d/parallel=%v", onReject, parallel), func(t *testing.T) {
				leaktest.Check(t)
				srv := newServer(t)
				srv.Enqueue(
					planNeedTool(),
					agenttest.Reply().Call(0, "call_1", "show_card", `{}`).Call(1, "call_2", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
					agenttest.Reply().Text("I may not look that up.").Finish("stop"),
				)
				reg, err := agent.NewToolRegistry(cardTool())
				require.NoError(t, err)
				cfg := agent.Config{
					BaseURL:       srv.URL(),
					HTTPClient:    srv.Client(),
					Model:         "test-model",
					Tools:         reg,
					OnReject:      onReject,
					ParallelTools: parallel,
				}
				if strict {
					cfg.RequestShape = agent.ShapeStrict
				}
				a, err := agent.New(cfg)
				require.NoError(t, err, "no tool needs approval yet")
				// The host adds a tool while the agent is in use.
				require.NoError(t, reg.Add(weatherTool()))

				turn := a.NewTurn(agent.Input{Message: "weather in Oslo"})
				chunks, err := collect(turn.Run(context.Background()))
				require.NoError(t, err)
				assert.Contains(t, trace(chunks), "rejected:get_weather:"+agent.CauseNoApprover.DefaultReason())
				assert.Contains(t, trace(chunks), "tool:result:show_card", "the other call runs")
				last := chunks[len(chunks)-1]
				if onReject == agent.RejectEndRun {
					assert.Equal(t, agent.KindInterrupted, last.Kind, "%v", trace(chunks))
				} else {
					assert.Equal(t, agent.KindRoundEnd, last.Kind, "%v", trace(chunks))
					assert.Equal(t, agent.CauseNoApprover.DefaultReason(), srv.Requests()[2].LastMessage().Content, "the model reads why")
				}
				msgs := turn.Messages()
				validHistory(t, msgs)
				assert.Equal(t, strip(msgs[1:]), strip(agent.History(chunks)))
				assert.Equal(t, map[string]ended{"call_1": {memory.OutcomeResult, ""}, "call_2": {memory.OutcomeRejected, "no_approver"}}, endings(msgs))
			})
		}
	}
}

// sidePanics is a tool whose SideMessage panics.
type sidePanics struct{ ran bool }

func (s *sidePanics) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: "ask_user_question", SkipApproval: true}
}

func (s *sidePanics) SideMessage(context.Context, agent.ToolCall) (any, error) {
	panic("side message exploded")
}

func (s *sidePanics) Execute(context.Context, json.RawMessage, agent.Progress) (string, error) {
	s.ran = true
	return "asked", nil
}

// TestSideMessagePanicIsRecovered: a panic in SideMessage does not reach the
// host's range loop. It is treated like an error from SideMessage: logged,
// no side chunk, and the call runs.
func TestSideMessagePanicIsRecovered(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "ask_user_question", `{"q":"Color?"}`).Finish("tool_calls"),
				agenttest.Reply().Text("ok").Finish("stop"),
			)
			var logs logBuffer
			tool := &sidePanics{}
			a := newAgent(t, srv, func(c *agent.Config) {
				c.ParallelTools = parallel
				c.Logger = logs.logger()
			}, tool)
			turn := a.NewTurn(agent.Input{Message: "ask me"})
			var chunks []agent.Chunk
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("the panic reached the range loop: %v", p)
					}
				}()
				chunks, err = collect(turn.Run(context.Background()))
			}()
			require.NoError(t, err)
			assert.Equal(t, []string{
				"text", "round_end:0:need_tool",
				"tool:start:ask_user_question", "tool:executing:ask_user_question", "tool:result:ask_user_question",
				"round_end:1", "text", "round_end:2",
			}, trace(chunks))
			assert.True(t, tool.ran)
			validHistory(t, turn.Messages())
			out := logs.String()
			assert.Contains(t, out, "side message panicked")
			assert.Contains(t, out, "side message exploded")
			assert.Contains(t, out, "goroutine", "the log has the stack")
		})
	}
}

// TestParallelRejectionEndingTheRunRunsApprovedCalls: with ParallelTools, a
// rejection that ends the run still runs the calls approved before it, so
// the history is the one a sequential run records.
func TestParallelRejectionEndingTheRunRunsApprovedCalls(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(planNeedTool(), agenttest.Reply().
			Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
			Call(1, "call_2", "show_card", `{}`).
			Call(2, "call_3", "get_weather", `{"city":"Rome"}`).
			Call(3, "call_4", "get_weather", `{"city":"Lima"}`).
			Finish("tool_calls"))
	}
	rejectRome := personFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Approved: r.Call.ID != "call_3", Reason: "not Rome"}, nil
	})
	run := func(t *testing.T, parallel bool) ([]agent.Chunk, *agent.Turn) {
		srv := newServer(t)
		script(srv)
		a := newAgent(t, srv, func(c *agent.Config) {
			c.ParallelTools = parallel
			c.Approver = rejectRome
		}, weatherTool(), cardTool())
		turn := a.NewTurn(agent.Input{Message: "go"})
		chunks, err := collect(turn.Run(context.Background()))
		require.NoError(t, err)
		return chunks, turn
	}
	leaktest.Check(t)
	seqChunks, seq := run(t, false)
	parChunks, par := run(t, true)

	assert.Equal(t, strip(seq.Messages()[1:]), strip(par.Messages()[1:]), "the history is the sequential run's")
	msgs := par.Messages()
	validHistory(t, msgs)
	n := len(msgs)
	assert.Equal(t, []string{"sunny in Oslo", "shown", "not Rome", agent.CauseNotRun.DefaultReason()},
		[]string{msgs[n-4].Content, msgs[n-3].Content, msgs[n-2].Content, msgs[n-1].Content})
	assert.Equal(t, strip(msgs[1:]), strip(agent.History(parChunks)))
	closedCards(t, parChunks)

	tr := trace(parChunks)
	assert.Equal(t, []string{
		"text", "round_end:0:need_tool",
		"tool:start:get_weather", "tool:start:show_card", "tool:start:get_weather", "tool:start:get_weather",
		"tool:approval_required:get_weather", "tool:approval_required:get_weather", "rejected:get_weather:not Rome",
		"tool:executing:get_weather", "tool:executing:show_card",
		"tool:result:get_weather", "tool:result:show_card",
		"rejected:get_weather:" + agent.CauseNotRun.DefaultReason(), "interrupted",
	}, tr)
	assert.Equal(t, agent.KindInterrupted, seqChunks[len(seqChunks)-1].Kind)
}

// logBuffer collects log output from any goroutine.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// TestParallelRejectionBreakAfterEveryChunk breaks out of the loop after
// each chunk of a parallel round whose second call is rejected and ends the
// run: no panic, no leaked goroutine, valid history.
func TestParallelRejectionBreakAfterEveryChunk(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(planNeedTool(), agenttest.Reply().
			Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
			Call(1, "call_2", "get_weather", `{"city":"Rome"}`).
			Call(2, "call_3", "show_card", `{}`).
			Finish("tool_calls"))
	}
	mut := func(c *agent.Config) {
		c.ParallelTools = true
		c.Approver = personFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: r.Call.ID != "call_2", Reason: "not Rome"}, nil
		})
	}
	srv := newServer(t)
	script(srv)
	all, err := collect(newAgent(t, srv, mut, weatherTool(), cardTool()).Run(context.Background(), agent.Input{Message: "go"}))
	require.NoError(t, err)
	require.Greater(t, len(all), 8)
	for n := 1; n <= len(all); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			script(srv)
			turn := newAgent(t, srv, mut, weatherTool(), cardTool()).NewTurn(agent.Input{Message: "go"})
			var got []agent.Chunk
			for c, err := range turn.Run(context.Background()) {
				require.NoError(t, err)
				got = append(got, c)
				if len(got) == n {
					break
				}
			}
			require.Len(t, got, n)
			validHistory(t, turn.Messages())
			validHistory(t, agent.History(got))
		})
	}
}

func TestToolPanicIsRecovered(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "boom", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("It broke.").Finish("stop"),
	)
	boom := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "boom", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			panic("kaboom")
		},
	}
	a := newAgent(t, srv, nil, boom)
	turn := a.NewTurn(agent.Input{Message: "go"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	var res string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			res = c.Tool.Result
		}
	}
	assert.Equal(t, "error: tool panicked: kaboom", res)
	validHistory(t, turn.Messages())
}

func TestMaxToolRounds(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool())
	for i := range 2 {
		srv.Enqueue(agenttest.Reply().Call(0, fmt.Sprintf("call_%d", i), "show_card", `{}`).Finish("tool_calls"))
	}
	a := newAgent(t, srv, func(c *agent.Config) { c.MaxToolRounds = 2 }, cardTool())
	turn := a.NewTurn(agent.Input{Message: "loop"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)
	last := chunks[len(chunks)-1]
	assert.Equal(t, agent.KindWarning, last.Kind)
	assert.Equal(t, agent.WarnMaxToolRounds, last.Code)
	assert.Equal(t, "maximum tool rounds reached", last.Text)
	assert.Equal(t, 2, last.Round)
	assert.Len(t, srv.Requests(), 3)
	validHistory(t, turn.Messages())
}

func TestSideMessageComesRightAfterExecuting(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "ask_user_question", `{"q":"Color?"}`).Finish("tool_calls"), agenttest.Reply().Text("ok").Finish("stop"))
	var ranAfterSide atomic.Bool
	ask := &askTool{ran: &ranAfterSide}
	chunks, err := collect(newAgent(t, srv, nil, ask).Run(context.Background(), agent.Input{Message: "ask me"}))
	require.NoError(t, err)
	tr := trace(chunks)
	i := indexOf(tr, "tool:executing:ask_user_question")
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "side", tr[i+1])
	assert.True(t, ranAfterSide.Load())
}

type askTool struct {
	sideDone atomic.Bool
	ran      *atomic.Bool
}

func (a *askTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: "ask_user_question", SkipApproval: true}
}

func (a *askTool) Execute(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
	a.ran.Store(a.sideDone.Load())
	return "blue", nil
}

func (a *askTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	a.sideDone.Store(true)
	return map[string]any{"type": "form_request", "form_id": "f1"}, nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestEveryCardIsClosed: however a tool round ends, each call shown with a
// start chunk ends with a result or a rejected chunk, and the history from
// the chunks is the turn's.
func TestEveryCardIsClosed(t *testing.T) {
	secondRejected := func(cancel context.CancelFunc) agent.Approver {
		return personFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: r.Call.ID != "call_2", Reason: "not that one"}, nil
		})
	}
	interruptedAtSecond := func(cancel context.CancelFunc) agent.Approver {
		return personFunc(func(ctx context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
			if r.Call.ID != "call_2" {
				return agent.Decision{Approved: true}, nil
			}
			cancel()
			<-ctx.Done()
			return agent.Decision{}, ctx.Err()
		})
	}
	for _, parallel := range []bool{false, true} {
		for name, approver := range map[string]func(context.CancelFunc) agent.Approver{
			"rejected":    secondRejected,
			"interrupted": interruptedAtSecond,
		} {
			t.Run(fmt.Sprintf("%s/parallel=%v", name, parallel), func(t *testing.T) {
				leaktest.Check(t)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				srv := newServer(t)
				srv.Enqueue(planNeedTool(), agenttest.Reply().
					Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).
					Call(1, "call_2", "get_weather", `{"city":"Rome"}`).
					Call(2, "call_3", "get_weather", `{"city":"Lima"}`).
					Finish("tool_calls"))
				a := newAgent(t, srv, func(c *agent.Config) {
					c.ParallelTools = parallel
					c.Approver = approver(cancel)
				}, weatherTool())
				turn := a.NewTurn(agent.Input{Message: "go"})
				chunks, err := collect(turn.Run(ctx))
				require.NoError(t, err)
				assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind)
				closedCards(t, chunks)
				validHistory(t, turn.Messages())
				assert.Equal(t, strip(turn.Messages()[1:]), strip(agent.History(chunks)))
			})
		}
	}
}
