package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// newServer starts a scripted server that enforces serverChecks.
func newServer(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	srv.Enforce(serverChecks())
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
		if strict && t.Failed() {
			t.Log("in the strict pass: the server enforced a strict chat template, the agent used agent.ShapeStrict")
		}
	})
	return srv
}

// newAgent returns an agent on srv with tools that approves every call,
// shaped for the strict pass when it runs; mut, if not nil, edits the
// Config first.
func newAgent(t *testing.T, srv *agenttest.Server, mut func(*agent.Config), tools ...agent.Tool) *agent.Agent {
	t.Helper()
	reg, err := agent.NewToolRegistry(tools...)
	require.NoError(t, err)
	cfg := agent.Config{
		BaseURL:    srv.URL(),
		APIKey:     "test-key",
		HTTPClient: srv.Client(),
		MaxRetries: -1,
		Model:      "test-model",
		Tools:      reg,
		Approver:   approveAll,
	}
	if strict {
		cfg.RequestShape = agent.ShapeStrict
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)
	return a
}

// withPrompt checks that req carries the temporary prompt want where the
// agent's request shape puts it (a system message at the end, or in the
// strict pass the end of the last user message) and returns req's messages
// without it.
func withPrompt(t *testing.T, req *agenttest.Request, want string) []agenttest.Message {
	t.Helper()
	msgs := slices.Clone(req.Messages)
	n := len(msgs)
	last := &msgs[n-1]
	if !strict {
		if assert.Equal(t, "system", last.Role) && assert.Equal(t, want, last.Content) {
			return msgs[:n-1]
		}
		return msgs
	}
	if !assert.Equal(t, "user", last.Role) {
		return msgs
	}
	if last.Content == want {
		return msgs[:n-1]
	}
	body, ok := strings.CutSuffix(last.Content, "\n\n"+want)
	assert.True(t, ok, "the last user message ends with the prompt: %q", last.Content)
	last.Content = body
	return msgs
}

// personFunc is an Approver that asks a person: its tickets are pending, so
// the agent shows the approval_required chunk, and the decision is the
// function's, taken when the agent waits.
type personFunc func(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error)

func (f personFunc) Request(_ context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) { return f(ctx, req) }), nil
}

// approveAll is the default Approver of newAgent: a person who approves
// every call as soon as it is shown.
var approveAll = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
	return agent.Decision{Approved: true}, nil
})

// collect runs seq to its end and returns its chunks, stopping at the
// first error.
func collect(seq func(func(agent.Chunk, error) bool)) ([]agent.Chunk, error) {
	var out []agent.Chunk
	for c, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// trace renders chunks compactly: "text", "round_end:0:need_tool",
// "tool:start:get_weather", "rejected:run_command:tool call interrupted".
func trace(chunks []agent.Chunk) []string {
	var out []string
	for _, c := range chunks {
		switch c.Kind {
		case agent.KindText, agent.KindReasoning:
			if n := len(out); n > 0 && out[n-1] == c.Kind.String() {
				continue // merge runs of text
			}
			out = append(out, c.Kind.String())
		case agent.KindRoundEnd:
			s := fmt.Sprintf("round_end:%d", c.Round)
			if c.Intent != "" {
				s += ":" + string(c.Intent)
			}
			out = append(out, s)
		case agent.KindToolCall:
			s := "tool:" + string(c.Tool.State) + ":" + c.Tool.Name
			if c.Tool.State == agent.StateExecuting && c.Tool.PartialResult != "" {
				s = "tool:progress:" + c.Tool.Name
				if n := len(out); n > 0 && out[n-1] == s {
					continue
				}
			}
			out = append(out, s)
		case agent.KindToolRejected:
			out = append(out, "rejected:"+c.Tool.Name+":"+c.Tool.Reason)
		default:
			out = append(out, c.Kind.String())
		}
	}
	return out
}

// text returns the visible text of round.
func text(chunks []agent.Chunk, round int) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindText && c.Round == round {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// planNeedTool and planNoTool are planning replies with the tag split
// across deltas.
func planNeedTool() agenttest.Response {
	return agenttest.Reply().Text("Let me look ", "that up. <need", "_tool>").Usage(10, 4).Finish("stop")
}

func planNoTool() agenttest.Response {
	return agenttest.Reply().Text("Hello! I can ", "answer that.<no_", "tool>").Finish("stop")
}

// weatherTool is get_weather: it needs approval and answers "sunny in"
// the city.
func weatherTool() agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{
			Name:        "get_weather",
			Description: "Weather for a city",
			Parameters: map[string]any{
				"type":       "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required":   []string{"city"},
			},
		},
		Fn: func(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			var a struct{ City string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return "sunny in " + a.City, nil
		},
	}
}

// cardTool is show_card: it skips approval and answers "shown".
func cardTool() agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{Name: "show_card", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			return "shown", nil
		},
	}
}

// validHistory checks that msgs is valid chat history: every tool call is
// answered by a tool message right after its assistant message, and no tool
// message is an orphan.
func validHistory(t *testing.T, msgs []memory.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == memory.RoleTool {
			t.Fatalf("message %d: tool message %q without a preceding call", i, m.ToolCallID)
		}
		if m.Role != memory.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		for j := i + 1; j < len(msgs) && msgs[j].Role == memory.RoleTool; j++ {
			if !want[msgs[j].ToolCallID] {
				t.Fatalf("message %d: tool message for unknown call %q", j, msgs[j].ToolCallID)
			}
			delete(want, msgs[j].ToolCallID)
			i = j
		}
		if len(want) > 0 {
			t.Fatalf("message %d: calls without tool message: %v", i, want)
		}
	}
}

// closedCards checks that every call that got a start chunk also got a last
// chunk: result or rejected.
func closedCards(t *testing.T, chunks []agent.Chunk) {
	t.Helper()
	open := map[string]bool{}
	var order []string
	for _, c := range chunks {
		if c.Tool == nil || c.Kind == agent.KindSide {
			continue
		}
		switch {
		case c.Kind == agent.KindToolRejected, c.Tool.State == agent.StateResult:
			delete(open, c.Tool.ID)
		case c.Tool.State == agent.StateStart:
			open[c.Tool.ID] = true
			order = append(order, c.Tool.ID)
		}
	}
	for _, id := range order {
		assert.False(t, open[id], "call %s has no result or rejected chunk: %v", id, trace(chunks))
	}
}

// strip returns msgs without their creation times, for comparison.
func strip(msgs []memory.Message) []memory.Message {
	out := make([]memory.Message, len(msgs))
	for i, m := range msgs {
		m.CreatedAt = time.Time{}
		out[i] = m
	}
	return out
}

// contents renders msgs as "role:content".
func contents(msgs []memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ":" + m.Content
	}
	return out
}

// results returns the result of every call that ran, by call id.
func results(chunks []agent.Chunk) map[string]string {
	out := map[string]string{}
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			out[c.Tool.ID] = c.Tool.Result
		}
	}
	return out
}

// stores returns a constructor for each Store the tests run against.
func stores(t *testing.T) map[string]func(t *testing.T) memory.Store {
	return map[string]func(t *testing.T) memory.Store{
		"mem": func(t *testing.T) memory.Store { return &memory.MemStore{} },
		"sqlite": func(t *testing.T) memory.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "chat.db"))
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// recorder is an Approver that asks a person and records the protocol: its
// tickets have the approval ids "key-1", "key-2", ...; it counts the
// requests, the waits, and the waits that came with an already cancelled
// context (the releases the agent owes).
type recorder struct {
	requested, waited, released atomic.Int32
	decide                      func(ctx context.Context) (agent.Decision, error)
}

func (p *recorder) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	id := fmt.Sprintf("key-%d", p.requested.Add(1))
	var once atomic.Bool
	return agent.Pending(id, func(ctx context.Context) (agent.Decision, error) {
		if once.Swap(true) {
			return agent.Decision{}, errors.New("Wait called twice")
		}
		p.waited.Add(1)
		if ctx.Err() != nil {
			p.released.Add(1)
			return agent.Decision{}, ctx.Err()
		}
		return p.decide(ctx)
	}), nil
}
