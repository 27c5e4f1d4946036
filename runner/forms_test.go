package runner_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// formOf returns the form of a form_request side chunk; false for any
// other event. The side message is the FormRequest itself in the process
// that ran the call, and its JSON in one that read the event from the
// store.
func formOf(e runner.Event) (interact.FormRequest, bool) {
	if e.Chunk == nil || e.Chunk.Kind != agent.KindSide {
		return interact.FormRequest{}, false
	}
	b, err := json.Marshal(e.Chunk.Side)
	var form interact.FormRequest
	if err != nil || json.Unmarshal(b, &form) != nil || form.Type != interact.TypeFormRequest {
		return interact.FormRequest{}, false
	}
	return form, true
}

func isForm(e runner.Event) bool {
	_, ok := formOf(e)
	return ok
}

// suspendAtForm starts a turn of session s1 on p that asks a form, and
// waits until the turn ended suspended at it (the call suspends its run
// after options.suspendAfter). It returns the form.
func suspendAtForm(ctx context.Context, t *testing.T, p *replica, f *follow) interact.FormRequest {
	t.Helper()
	turn, err := p.r.Start(ctx, agent.Input{SessionID: "s1", Message: "ask me about the weather"})
	require.NoError(t, err)
	form, _ := formOf(f.waitFor(ctx, "the form_request", isForm))
	end := f.waitFor(ctx, "the end of the turn", func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded })
	require.Equal(t, runner.StatusSuspended, end.Ended.Status, "the turn did not suspend at its form (%s)", describe(f.seen))
	<-turn.Done()
	return form
}

// resumedTurns counts the EventTurnStarted events of resumed turns that f
// got within d.
func resumedTurns(ctx context.Context, f *follow, d time.Duration) int {
	n := 0
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case e := <-f.events:
			f.seen = append(f.seen, e)
			if e.Kind == runner.EventTurnStarted && e.Started.Resumed {
				n++
			}
		case <-timer.C:
			return n
		case <-ctx.Done():
			return n
		}
	}
}

// TestFormAnsweredElsewhereResumes: a turn suspends at its form
// (ask_user_question, SuspendAfter); the answers, given to a second Forms
// that shares the store and its notifier (another process, say), resume
// the turn in the runner's process: the call runs again, takes the answers
// and the model gets them.
//
// It needs the agent of branch w21-agent (agent.Suspend from a resumable
// tool's Execute suspends the run; a resumed turn runs the call again).
func TestFormAnsweredElsewhereResumes(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{forms: true, suspendAfter: 100 * time.Millisecond})
	f := subscribe(ctx, t, p.r, "s1", 0)
	form := suspendAtForm(ctx, t, p, f)
	open, err := st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, open, 1, "the call stays open while its form waits")
	assert.Equal(t, form.FormID, open[0].ApprovalID, "the open call names the form it waits for")

	other, err := person.StartForms(person.FormsConfig{Store: st, Notifier: st})
	require.NoError(t, err)
	defer other.Close()
	ok, err := other.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: form.FormID,
		Answers: interact.Answers{"city": {"Quito"}}, By: "tester", Via: "test"})
	require.NoError(t, err)
	require.True(t, ok)

	started := f.waitFor(ctx, "the resumed turn", func(e runner.Event) bool { return e.Kind == runner.EventTurnStarted })
	assert.True(t, started.Started.Resumed)
	res := f.waitFor(ctx, "the form's result", isState(agent.StateResult))
	assert.Contains(t, res.Chunk.Tool.Result, "Quito")
	f.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
	msgs, err := st.Messages(ctx, "s1", true)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	last := msgs[len(msgs)-1]
	assert.Contains(t, last.Content, "Quito", "the model's answer echoes the tool message: the answers reached it")
	open, err = st.OpenCalls(ctx, "s1")
	require.NoError(t, err)
	assert.Empty(t, open)
	assert.Zero(t, runs.Load())
}

// TestSweepWaitsForPendingForm: Sweep leaves a turn suspended at an open
// form alone (resuming it would only ask again), and resumes it once the
// form is answered, also when no note of the answer reached the runner (a
// Forms without a Notifier answers).
//
// It needs the agent of branch w21-agent, as TestFormAnsweredElsewhereResumes.
func TestSweepWaitsForPendingForm(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	p := newReplica(t, st, model(t), &runs, options{forms: true, suspendAfter: 100 * time.Millisecond, sweep: -1})
	f := subscribe(ctx, t, p.r, "s1", 0)
	form := suspendAtForm(ctx, t, p, f)

	require.NoError(t, p.r.Sweep(ctx))
	assert.Zero(t, resumedTurns(ctx, f, 300*time.Millisecond), "Sweep resumed a turn whose form is open")

	quiet, err := person.StartForms(person.FormsConfig{Store: st})
	require.NoError(t, err)
	defer quiet.Close()
	ok, err := quiet.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: form.FormID, Answers: interact.Answers{"city": {"Lima"}}})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, resumedTurns(ctx, f, 200*time.Millisecond), "a turn resumed without a note or a sweep")

	require.NoError(t, p.r.Sweep(ctx))
	res := f.waitFor(ctx, "the form's result", isState(agent.StateResult))
	assert.Contains(t, res.Chunk.Tool.Result, "Lima")
	f.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
}

// TestCloseSuspendsAtAForm: a runner that shuts down while a run waits for
// its form (no SuspendAfter: it would wait until the timeout) suspends the
// run instead of interrupting it, so the form stays open and a runner
// started later resumes the turn on the answer.
func TestCloseSuspendsAtAForm(t *testing.T) {
	leaktest.Check(t)
	ctx := testContext(t, 20*time.Second)
	st := &memory.MemStore{}
	var runs atomic.Int32
	srv := model(t)
	p := newReplica(t, st, srv, &runs, options{forms: true})
	f := subscribe(ctx, t, p.r, "s1", 0)
	turn, err := p.r.Start(ctx, agent.Input{SessionID: "s1", Message: "ask me about the weather"})
	require.NoError(t, err)
	form, _ := formOf(f.waitFor(ctx, "the form_request", isForm))
	p.close()
	<-turn.Done()
	assert.Equal(t, runner.StatusSuspended, turn.Ended().Status, "the shutdown suspended the turn")

	pending, err := p.r.Pending(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, pending, 1, "the form is still open after the shutdown")
	require.NotNil(t, pending[0].Form)
	assert.Equal(t, form.FormID, pending[0].Form.FormID)

	q := newReplica(t, st, srv, &runs, options{forms: true})
	g := subscribe(ctx, t, q.r, "s1", 0)
	ok, err := q.r.Answer(ctx, runner.FormReply{SessionID: "s1", FormID: form.FormID, Answers: interact.Answers{"city": {"Quito"}}})
	require.NoError(t, err)
	require.True(t, ok)
	res := g.waitFor(ctx, "the form's result", isState(agent.StateResult))
	assert.Contains(t, res.Chunk.Tool.Result, "Quito")
	g.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
}
