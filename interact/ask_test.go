package interact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
)

func TestAskUserQuestionDefinition(t *testing.T) {
	f := newForms(t, person.FormsConfig{})
	tool := askWith(f)
	d := tool.Definition()
	assert.Equal(t, "ask_user_question", d.Name)
	assert.True(t, d.SkipApproval)
	_, ok := tool.(agent.SideMessenger)
	assert.True(t, ok)
	_, err := agent.NewToolRegistry(tool)
	require.NoError(t, err, "the schema is valid")
}

// TestAskUserQuestionInARun: the form_request comes right after executing,
// the host answers it from its range loop (before the call waits), and
// the model reads the answers.
func TestAskUserQuestionInARun(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("An aisle seat for Ada.").Finish("stop"),
	)
	f := newForms(t, person.FormsConfig{})
	a := newAgent(t, srv, nil, askWith(f))
	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "book me a trip"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(t.Context()) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if c.Kind == agent.KindSide {
			req := c.Side.(interact.FormRequest)
			assert.Equal(t, "Trip", req.Title)
			assert.Equal(t, []string{"seat", "q2", "meals"}, []string{req.Questions[0].ID, req.Questions[1].ID, req.Questions[2].ID})
			assert.Equal(t, []interact.PendingForm{{FormRequest: req, SessionID: "s1", CallID: "call_1", Created: pending(t, f, "s1")[0].Created}}, pending(t, f, "s1"))
			ok, err := answer(t, f, "s1", req.FormID, tripAnswers)
			require.NoError(t, err)
			require.True(t, ok)

			b, err := json.Marshal(c)
			require.NoError(t, err)
			assert.JSONEq(t, `{"kind":"side","round":1,"tool":{"id":"call_1","name":"ask_user_question"},"side":{"type":"form_request","form_id":"`+req.FormID+`","title":"Trip","questions":[`+
				`{"id":"seat","question":"Seat?","kind":"single","options":["window","aisle"]},`+
				`{"id":"q2","question":"Your name?","kind":"text"},`+
				`{"id":"meals","question":"Meals?","kind":"multiple","options":["veg","fish","meat"]}]}}`, string(b))
		}
	}
	assert.Equal(t, []string{
		"text", "round_end:0",
		"tool:start:ask_user_question", "tool:executing:ask_user_question", "side:form_request:call_1", "tool:result:ask_user_question",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	assert.Equal(t, tripResult, toolMessages(t, srv)["call_1"])
	assert.Zero(t, f.Len())
	validHistory(t, turn.Messages())
}

// TestSideChunkRightAfterExecuting: with ParallelTools, several forms,
// cards and a call that needs approval in one round, each side chunk comes
// right after its call's executing chunk; forms are answered in the range
// loop and from another goroutine. Run with -race.
func TestSideChunkRightAfterExecuting(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	f := newForms(t, person.FormsConfig{})
	a := newAgent(t, srv, func(c *agent.Config) {
		c.ParallelTools = true
		c.DisablePlanning = true
	}, askWith(f), interact.ShowCard(), weather())

	const rounds = 15
	for iter := range rounds {
		b := agenttest.Reply()
		var asks []string
		for i := range 7 {
			id := fmt.Sprintf("call_%d", i)
			switch i % 3 {
			case 0:
				b.Call(i, id, "ask_user_question", tripArgs)
				asks = append(asks, id)
			case 1:
				b.Call(i, id, "show_card", fmt.Sprintf(`{"title":"Card %d","body":"b","fields":[{"name":"n","value":"v"}]}`, i))
			case 2:
				b.Call(i, id, "get_weather", `{}`)
			}
		}
		srv.Enqueue(b.Finish("tool_calls"), agenttest.Reply().Text("done").Finish("stop"))

		elsewhere := make(chan string, len(asks))
		elsewhereDone := make(chan struct{})
		go func() {
			defer close(elsewhereDone)
			for id := range elsewhere {
				open, err := f.Answer(context.Background(), interact.FormReply{SessionID: "s1", FormID: id, Answers: tripAnswers, By: "alice"})
				assert.NoError(t, err)
				assert.True(t, open)
			}
		}()
		turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "go"})
		var chunks []agent.Chunk
		forms := 0
		for c, err := range turn.Run(t.Context()) {
			require.NoError(t, err)
			chunks = append(chunks, c)
			if req, ok := c.Side.(interact.FormRequest); ok {
				if forms++; forms%2 == 0 {
					ok, err := answer(t, f, "s1", req.FormID, tripAnswers)
					require.NoError(t, err)
					require.True(t, ok)
				} else {
					elsewhere <- req.FormID
				}
			}
		}
		close(elsewhere)
		<-elsewhereDone

		sides := 0
		for i, c := range chunks {
			if c.Kind == agent.KindSide {
				sides++
			}
			if c.Kind != agent.KindToolCall || c.Tool.State != agent.StateExecuting || c.Tool.PartialResult != "" || c.Tool.Name == "get_weather" {
				continue
			}
			require.Less(t, i+1, len(chunks))
			next := chunks[i+1]
			require.Equal(t, agent.KindSide, next.Kind, "round %d: chunk after %s's executing: %v", iter, c.Tool.ID, trace(chunks[i+1:i+2]))
			require.Equal(t, c.Tool.ID, next.Tool.ID)
		}
		require.Equal(t, 5, sides, "%v", trace(chunks))
		msgs := toolMessages(t, srv)
		for _, id := range asks {
			assert.Equal(t, tripResult, msgs[id])
		}
		assert.Equal(t, `card "Card 1" shown to the user`, msgs["call_1"])
		assert.Equal(t, "sunny", msgs["call_2"])
		assert.Zero(t, f.Len())
		validHistory(t, turn.Messages())
	}
}

// TestRefusedAnswerLeavesTheFormOpen: an answer through another session,
// or answers that do not fit the questions, are refused and leave the form
// open; the first valid answer is taken, a second one finds it answered.
func TestRefusedAnswerLeavesTheFormOpen(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	f := newForms(t, person.FormsConfig{})
	a := newAgent(t, srv, nil, askWith(f))
	turn := a.NewTurn(agent.Input{SessionID: "alice-1", Message: "ask me"})
	for c, err := range turn.Run(t.Context()) {
		require.NoError(t, err)
		req, ok := c.Side.(interact.FormRequest)
		if !ok {
			continue
		}
		for _, tc := range []struct {
			name, session string
			answers       interact.Answers
			err           error
			text          string
		}{
			{"through another session", "mallory-1", tripAnswers, interact.ErrWrongSession, interact.ErrWrongSession.Error()},
			{"invalid answers", "alice-1", interact.Answers{"seat": {"roof"}, "q2": {"Ada"}, "meals": {}}, interact.ErrInvalidAnswers, `"roof" is not one of its options`},
		} {
			open, err := answer(t, f, tc.session, req.FormID, tc.answers)
			assert.False(t, open, tc.name)
			assert.ErrorIs(t, err, tc.err, tc.name)
			assert.ErrorContains(t, err, tc.text, tc.name)
			assert.Len(t, pending(t, f, "alice-1"), 1, "%s: the form stays open", tc.name)
		}
		open, err := answer(t, f, "alice-1", req.FormID, tripAnswers)
		require.NoError(t, err)
		assert.True(t, open)
		open, err = answer(t, f, "alice-1", req.FormID, tripAnswers)
		assert.NoError(t, err, "a second answer is stale, not a failure")
		assert.False(t, open)
	}
	assert.Equal(t, tripResult, toolMessages(t, srv)["call_1"])
	assert.Zero(t, f.Len())
}

// runAsk runs one ask_user_question call in session s1 (no planning round)
// and returns the chunks and the tool message the model read; onSide, when
// not nil, is called with the form_request.
func runAsk(t *testing.T, f *person.Forms, ctx context.Context, args string, onSide func(interact.FormRequest)) ([]agent.Chunk, string, *agent.Turn) {
	t.Helper()
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", args).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true; c.OnReject = agent.RejectContinue }, askWith(f))
	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "ask me"})
	var chunks []agent.Chunk
	for c, err := range turn.Run(ctx) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if req, ok := c.Side.(interact.FormRequest); ok && onSide != nil {
			onSide(req)
		}
	}
	validHistory(t, turn.Messages())
	var msg string
	for _, m := range turn.Messages() {
		if m.ToolCallID == "call_1" {
			msg = m.Content
		}
	}
	return chunks, msg, turn
}

// TestAskTimeout: nobody answers; the model reads that, and the run goes
// on.
func TestAskTimeout(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, person.FormsConfig{Timeout: 20 * time.Millisecond})
	var formID string
	chunks, msg, _ := runAsk(t, f, t.Context(), tripArgs, func(r interact.FormRequest) { formID = r.FormID })
	assert.Equal(t, "error: the user did not answer the form within 20ms", msg)
	assert.Equal(t, []string{"tool:start:ask_user_question", "tool:executing:ask_user_question", "side:form_request:call_1", "tool:result:ask_user_question", "round_end:1", "text", "round_end:2"}, trace(chunks))
	ok, err := answer(t, f, "s1", formID, tripAnswers)
	assert.NoError(t, err)
	assert.False(t, ok, "too late")
	assert.Zero(t, f.Len())
}

// TestAskCancelSession: the host cancels the session's forms; the model
// reads that the form was cancelled.
func TestAskCancelSession(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, person.FormsConfig{})
	_, msg, _ := runAsk(t, f, t.Context(), tripArgs, func(interact.FormRequest) {
		n, err := f.CancelSession(t.Context(), "s1")
		assert.NoError(t, err)
		assert.Equal(t, 1, n)
	})
	assert.Equal(t, "error: the form was cancelled before the user answered", msg)
	assert.Zero(t, f.Len())
}

// TestAskInterrupted: an interrupt while the form waits ends the call as
// interrupted and the run with an interrupted chunk; nothing stays.
func TestAskInterrupted(t *testing.T) {
	for _, when := range []string{"at the side chunk", "during the wait"} {
		t.Run(when, func(t *testing.T) {
			leaktest.Check(t)
			f := newForms(t, person.FormsConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			chunks, msg, _ := runAsk(t, f, ctx, tripArgs, func(interact.FormRequest) {
				if when == "at the side chunk" {
					cancel()
					return
				}
				// There is no signal that the call waits; whichever comes
				// first, the interrupt must end the call the same way.
				go func() {
					time.Sleep(10 * time.Millisecond)
					cancel()
				}()
			})
			tr := trace(chunks)
			assert.Equal(t, []string{"tool:start:ask_user_question", "tool:executing:ask_user_question", "side:form_request:call_1", "rejected:ask_user_question:interrupted", "interrupted"}, tr)
			assert.Equal(t, agent.CauseInterrupted.DefaultReason(), msg)
			assert.Zero(t, f.Len())
		})
	}
}

// TestConsumerLeavesAtTheForm: a host that stops ranging at the form leaves
// no form behind once the run has ended.
func TestConsumerLeavesAtTheForm(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"))
	f := newForms(t, person.FormsConfig{})
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, askWith(f))
	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "ask me"})
	var formID string
	for c, err := range turn.Run(t.Context()) {
		require.NoError(t, err)
		if req, ok := c.Side.(interact.FormRequest); ok {
			formID = req.FormID
			break
		}
	}
	require.NotEmpty(t, formID)
	// The run's context ended when the loop did; the form leaves in the
	// clean-up that ending starts.
	require.Eventually(t, func() bool { return f.Len() == 0 }, 10*time.Second, time.Millisecond)
	ok, err := answer(t, f, "s1", formID, tripAnswers)
	assert.NoError(t, err)
	assert.False(t, ok)
	validHistory(t, turn.Messages())
}

// TestAskWithoutSession: a run without a session shows no form; the model
// reads why.
func TestAskWithoutSession(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	f := newForms(t, person.FormsConfig{})
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, askWith(f))
	chunks, err := collect(a.Run(t.Context(), agent.Input{Message: "ask me"}))
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(trace(chunks), " "), "side:")
	assert.Contains(t, toolMessages(t, srv)["call_1"], "error: interact: the run has no session id")
	assert.Contains(t, toolMessages(t, srv)["call_1"], "agent.Input.SessionID")
	assert.Zero(t, f.Len())
}

// TestAskWithoutAsker: a run whose context has no asker (no runner drives
// it, and the host set none) shows no form, and the model reads why
// instead of the run failing.
func TestAskWithoutAsker(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, interact.AskUserQuestion())
	chunks, err := collect(a.Run(t.Context(), agent.Input{SessionID: "s1", Message: "ask me"}))
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(trace(chunks), " "), "side:")
	assert.Contains(t, toolMessages(t, srv)["call_1"], "error: ask_user_question: "+interact.ErrNoAsker.Error())
	assert.Contains(t, strings.Join(trace(chunks), " "), "tool:result:ask_user_question round_end:1 text", "the run went on")
}

// TestAskInvalidQuestions: questions the schema lets through but that make
// no form show none; the model reads what is wrong.
func TestAskInvalidQuestions(t *testing.T) {
	leaktest.Check(t)
	for _, tc := range []struct{ args, want string }{
		{`{"questions":[{"question":"Seat?","kind":"single"}]}`, "needs options"},
		{`{"questions":[]}`, "do not fit its parameters"},
		{`{"questions":[{"question":"Seat?","kind":"essay"}]}`, "do not fit its parameters"},
		{`{"questions":[{"id":"a","question":"A?","kind":"text"},{"id":"a","question":"B?","kind":"text"}]}`, "id given twice"},
	} {
		f := newForms(t, person.FormsConfig{})
		chunks, msg, _ := runAsk(t, f, t.Context(), tc.args, nil)
		assert.NotContains(t, strings.Join(trace(chunks), " "), "side:", tc.args)
		assert.Contains(t, msg, tc.want, tc.args)
		assert.Zero(t, f.Len())
	}
}

// TestAskInsideANestedRun: a tool that runs an agent itself (a sub-agent)
// whose run has no session: the form belongs to the session of the outer
// run, and the two runs' equal call ids do not mix.
func TestAskInsideANestedRun(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, person.FormsConfig{})
	inner := newServer(t)
	inner.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("the user wants an aisle").Finish("stop"),
	)
	innerAgent := newAgent(t, inner, func(c *agent.Config) { c.DisablePlanning = true }, askWith(f))
	delegate := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "delegate", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
			var text string
			for c, err := range innerAgent.Run(ctx, agent.Input{Message: "find out"}) {
				if err != nil {
					return "", err
				}
				if req, ok := c.Side.(interact.FormRequest); ok {
					if _, err := answer(t, f, "", req.FormID, tripAnswers); err != interact.ErrWrongSession {
						return "", fmt.Errorf("answer without the outer session: %v", err)
					}
					if ok, err := answer(t, f, "outer", req.FormID, tripAnswers); !ok || err != nil {
						return "", fmt.Errorf("answer with the outer session: %v %v", ok, err)
					}
				}
				if c.Kind == agent.KindText {
					text += c.Text
				}
			}
			return text, nil
		},
	}
	outer := newServer(t)
	outer.Enqueue(
		agenttest.Reply().Call(0, "call_1", "delegate", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, outer, func(c *agent.Config) { c.DisablePlanning = true }, delegate)
	_, err := collect(a.Run(t.Context(), agent.Input{SessionID: "outer", Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, "the user wants an aisle", toolMessages(t, outer)["call_1"])
	assert.Equal(t, tripResult, toolMessages(t, inner)["call_1"])
	assert.Zero(t, f.Len())
}

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
