package interact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// tripArgs are ask_user_question arguments with one question of each kind.
const tripArgs = `{"title":"Trip","questions":[` +
	`{"id":"seat","question":"Seat?","kind":"single","options":["window","aisle"]},` +
	`{"question":"Your name?","kind":"text"},` +
	`{"id":"meals","question":"Meals?","kind":"multiple","options":["veg","fish","meat"]}]}`

// tripAnswers answer the form of tripArgs.
var tripAnswers = interact.Answers{"seat": {"aisle"}, "q2": {"Ada"}, "meals": {"veg", "fish"}}

// tripResult is what the model reads for tripAnswers.
const tripResult = `{"answers":[` +
	`{"id":"seat","question":"Seat?","answer":"aisle"},` +
	`{"id":"q2","question":"Your name?","answer":"Ada"},` +
	`{"id":"meals","question":"Meals?","answer":["veg","fish"]}]}`

func newServer(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	srv.Enforce(agenttest.CheckArguments | agenttest.CheckEmptyAssistant)
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
	})
	return srv
}

func newForms(t *testing.T, cfg person.FormsConfig) *person.Forms {
	t.Helper()
	f, err := person.StartForms(cfg)
	require.NoError(t, err)
	return f
}

// answer gives answers to the form id of session, as a person would
// through a front end.
func answer(t *testing.T, f *person.Forms, session, id string, answers interact.Answers) (bool, error) {
	t.Helper()
	return f.Answer(t.Context(), interact.FormReply{SessionID: session, FormID: id, Answers: answers, By: "alice", Via: "test"})
}

// pending returns the open forms of session.
func pending(t *testing.T, f *person.Forms, session string) []interact.PendingForm {
	t.Helper()
	p, err := f.Pending(t.Context(), session)
	require.NoError(t, err)
	return p
}

// newAgent returns an agent on srv with tools, approving every call that
// asks; mut, when not nil, edits the config.
func newAgent(t *testing.T, srv *agenttest.Server, mut func(*agent.Config), tools ...agent.Tool) *agent.Agent {
	t.Helper()
	reg, err := agent.NewToolRegistry(tools...)
	require.NoError(t, err)
	cfg := agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "test",
		Tools:      reg,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)
	return a
}

// weather is a tool that needs approval and has no side message.
func weather() agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", Description: "Weather for a city."},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			return "sunny", nil
		},
	}
}

func planNeedTool() agenttest.Response {
	return agenttest.Reply().Text("Let me ask you. <need_tool>").Finish("stop")
}

// trace renders chunks compactly: "text", "round_end:1",
// "tool:executing:ask_user_question", "side:form_request:call_1".
func trace(chunks []agent.Chunk) []string {
	var out []string
	for _, c := range chunks {
		switch c.Kind {
		case agent.KindText:
			if n := len(out); n > 0 && out[n-1] == "text" {
				continue
			}
			out = append(out, "text")
		case agent.KindRoundEnd:
			out = append(out, fmt.Sprint("round_end:", c.Round))
		case agent.KindToolCall:
			out = append(out, "tool:"+string(c.Tool.State)+":"+c.Tool.Name)
		case agent.KindToolRejected:
			out = append(out, "rejected:"+c.Tool.Name+":"+string(c.Tool.Cause))
		case agent.KindSide:
			out = append(out, "side:"+sideType(c.Side)+":"+c.Tool.ID)
		default:
			out = append(out, c.Kind.String())
		}
	}
	return out
}

func sideType(side any) string {
	switch side.(type) {
	case interact.FormRequest:
		return interact.TypeFormRequest
	case interact.Card:
		return interact.TypeCard
	}
	return fmt.Sprintf("%T", side)
}

// validHistory fails t unless msgs are valid history.
func validHistory(t *testing.T, msgs []memory.Message) {
	t.Helper()
	require.NoError(t, memory.ValidateMessages(msgs))
	require.Equal(t, msgs, memory.Repair(msgs), "Repair changed the history")
}

// toolMessages returns the tool messages of the last request, by call id.
func toolMessages(t *testing.T, srv *agenttest.Server) map[string]string {
	t.Helper()
	reqs := srv.Requests()
	require.NotEmpty(t, reqs)
	out := map[string]string{}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// askWith is ask_user_question asking through f: the context of its side
// message and of its call carries f (interact.WithAsker), as a runner's
// runs do.
func askWith(f interact.Asker) agent.Tool { return askerTool{interact.AskUserQuestion(), f} }

type askerTool struct {
	agent.Tool
	asker interact.Asker
}

func (t askerTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	return t.Tool.(agent.SideMessenger).SideMessage(interact.WithAsker(ctx, t.asker), call)
}

func (t askerTool) Execute(ctx context.Context, args json.RawMessage, p agent.Progress) (string, error) {
	return t.Tool.Execute(interact.WithAsker(ctx, t.asker), args, p)
}
