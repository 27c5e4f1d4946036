package runner_test

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

// TestNewRefusesAgentStoreOrApprover: the store is named once, in
// Config.Store, and the runner asks the person itself: an Agent config
// that sets either is refused with an error that says where they go.
func TestNewRefusesAgentStoreOrApprover(t *testing.T) {
	st := &memory.MemStore{}
	for _, tc := range []struct {
		name string
		cfg  runner.Config
		want string
	}{
		{"no store", runner.Config{}, "Config.Store is nil"},
		{"agent store", runner.Config{Store: st, Agent: agent.Config{Model: "m", Store: st}}, "runner.Config.Store"},
		{"agent approver", runner.Config{Store: st, Agent: agent.Config{Model: "m", Approver: approval.ApproveAll()}}, "runner.Config.Policies"},
		{"negative timeout", runner.Config{Store: st, Agent: agent.Config{Model: "m"}, FormTimeout: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runner.New(tc.cfg)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestPersonInTheLoopSQLite: the person's door (Pending, Answer, Decide,
// Stop, Decisions) on process B for the runs of process A, two stores on
// one SQLite file.
func TestPersonInTheLoopSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat.db")
	testPersonInTheLoop(t, func(t *testing.T) memory.Store {
		st, err := sqlitestore.Open(t.Context(), path)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// TestPersonInTheLoopPostgres: the same on two stores of one PostgreSQL
// schema.
func TestPersonInTheLoopPostgres(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url, "runner_person_")
	testPersonInTheLoop(t, func(t *testing.T) memory.Store {
		st, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	})
}

func testPersonInTheLoop(t *testing.T, open func(*testing.T) memory.Store) {
	leaktest.Check(t)
	ctx := testContext(t, 60*time.Second)
	srv := model(t)
	var runs atomic.Int32
	stA, stB := open(t), open(t)
	a := newReplica(t, stA, srv, &runs, options{holder: "A", forms: true, sweep: -1})
	b := newReplica(t, stB, srv, &runs, options{holder: "B", forms: true, sweep: -1})

	t.Run("answer and decide on B", func(t *testing.T) {
		f := subscribe(ctx, t, a.r, "s1", 0)
		_, err := a.r.Start(ctx, agent.Input{SessionID: "s1", Message: "both, about the weather"})
		require.NoError(t, err)
		form, _ := formOf(f.waitFor(ctx, "the form_request", isForm))

		// B lists the form A's run waits for, and answers it.
		pending, err := b.r.Pending(ctx, "s1")
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.NotNil(t, pending[0].Form, "%+v", pending[0])
		assert.Nil(t, pending[0].Approval)
		assert.Equal(t, form.FormID, pending[0].Form.FormID)
		assert.Equal(t, "call_1", pending[0].Form.CallID)
		_, err = b.r.Answer(ctx, runner.FormReply{SessionID: "s2", FormID: form.FormID, Answers: interact.Answers{"city": {"Quito"}}})
		require.ErrorIs(t, err, interact.ErrWrongSession)
		_, err = b.r.Answer(ctx, runner.FormReply{SessionID: "s1", FormID: form.FormID, Answers: interact.Answers{"city": {"Paris"}}})
		require.ErrorIs(t, err, interact.ErrInvalidAnswers, "Paris is not an option")
		ok, err := b.r.Answer(ctx, runner.FormReply{SessionID: "s1", FormID: form.FormID, Answers: interact.Answers{"city": {"Quito"}}, By: "ada", Via: "test"})
		require.NoError(t, err)
		require.True(t, ok)

		// Then get_weather asks: B lists the approval, refuses decisions
		// for another call, and takes the one for the call shown.
		req := f.waitFor(ctx, "approval_required", isState(agent.StateApprovalRequired))
		call := req.Chunk.Tool
		pending, err = b.r.Pending(ctx, "s1")
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.NotNil(t, pending[0].Approval, "%+v", pending[0])
		assert.Nil(t, pending[0].Form)
		assert.Equal(t, call.ApprovalID, pending[0].Approval.ApprovalID)
		assert.Equal(t, call.ArgumentsDigest, pending[0].Approval.Call.ArgumentsDigest)
		for name, mutate := range map[string]func(*runner.Reply){
			"digest":  func(r *runner.Reply) { r.ArgumentsDigest = agent.ArgumentsDigest([]byte(`{"city":"Quito"}`)) },
			"call":    func(r *runner.Reply) { r.CallID = "call_1" },
			"tool":    func(r *runner.Reply) { r.Tool = "ask_user_question" },
			"nothing": func(r *runner.Reply) { r.CallID, r.Tool, r.ArgumentsDigest = "", "", "" },
		} {
			rep := approve("s1", call)
			mutate(&rep)
			ok, err := b.r.Decide(ctx, rep)
			require.ErrorIs(t, err, approval.ErrMismatch, "another %s", name)
			assert.False(t, ok)
		}
		rep := approve("s1", call)
		rep.SessionID = "s2"
		_, err = b.r.Decide(ctx, rep)
		require.ErrorIs(t, err, approval.ErrWrongSession)
		still, err := b.r.Pending(ctx, "s1")
		require.NoError(t, err)
		require.Len(t, still, 1, "a refused decision leaves the approval pending")

		rep = approve("s1", call)
		rep.Decision.By, rep.Decision.Via = "ada", "test"
		ok, err = b.r.Decide(ctx, rep)
		require.NoError(t, err)
		require.True(t, ok)
		f.waitFor(ctx, "the end", isEnd(runner.StatusFinished))
		assert.Equal(t, int32(1), runs.Load(), "get_weather ran once")
		pending, err = b.r.Pending(ctx, "s1")
		require.NoError(t, err)
		assert.Empty(t, pending)

		// The audit, read on A: ada's decision on the call she saw.
		var recs []approval.DecisionRecord
		for rec, err := range a.r.Decisions(ctx, approval.DecisionQuery{SessionID: "s1"}) {
			require.NoError(t, err)
			recs = append(recs, rec)
		}
		require.Len(t, recs, 1)
		assert.Equal(t, call.ApprovalID, recs[0].ApprovalID)
		assert.Equal(t, "call_2", recs[0].CallID)
		assert.Equal(t, "get_weather", recs[0].Tool)
		assert.Equal(t, call.ArgumentsDigest, recs[0].ArgumentsDigest)
		assert.True(t, recs[0].Decision.Approved)
		assert.Equal(t, "ada", recs[0].Decision.By)
		assert.Equal(t, "test", recs[0].Decision.Via)
	})

	t.Run("stop on B a run A drives", func(t *testing.T) {
		before := runs.Load()
		f := subscribe(ctx, t, a.r, "s2", 0)
		_, err := a.r.Start(ctx, agent.Input{SessionID: "s2", Message: "weather in Lima?"})
		require.NoError(t, err)
		f.waitFor(ctx, "approval_required", isState(agent.StateApprovalRequired))
		stopped, err := b.r.Stop(ctx, "s2")
		require.NoError(t, err)
		assert.True(t, stopped.Run, "B found A's run to interrupt: %+v", stopped)
		end := f.waitFor(ctx, "the end", func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded })
		assert.Equal(t, runner.StatusInterrupted, end.Ended.Status, "%+v", end.Ended)
		pending, err := b.r.Pending(ctx, "s2")
		require.NoError(t, err)
		assert.Empty(t, pending, "nothing of the stopped turn waits")
		assert.Equal(t, before, runs.Load(), "the stopped call never ran")
		running, err := b.r.Running(ctx, "s2")
		require.NoError(t, err)
		assert.False(t, running)
	})

	t.Run("stop on B a turn suspended at a form", func(t *testing.T) {
		f := subscribe(ctx, t, a.r, "s3", 0)
		_, err := a.r.Start(ctx, agent.Input{SessionID: "s3", Message: "ask me about the weather"})
		require.NoError(t, err)
		form, _ := formOf(f.waitFor(ctx, "the form_request", isForm))
		a.close() // A shuts down: the turn is suspended, the form stays open
		end := f.waitFor(ctx, "the end", func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded })
		require.Equal(t, runner.StatusSuspended, end.Ended.Status)
		pending, err := b.r.Pending(ctx, "s3")
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.Equal(t, form.FormID, pending[0].Form.FormID)

		g := subscribe(ctx, t, b.r, "s3", end.Seq)
		stopped, err := b.r.Stop(ctx, "s3")
		require.NoError(t, err)
		assert.Equal(t, runner.Stopped{Forms: 1}, stopped, "no run to interrupt; the open form cancelled")
		// The cancellation resumes the turn on B: the call tells the model
		// that the form was cancelled, and the turn ends.
		g.waitFor(ctx, "the resumed turn's end", func(e runner.Event) bool { return e.Kind == runner.EventTurnEnded })
		pending, err = b.r.Pending(ctx, "s3")
		require.NoError(t, err)
		assert.Empty(t, pending)
		ok, err := b.r.Answer(ctx, runner.FormReply{SessionID: "s3", FormID: form.FormID, Answers: interact.Answers{"city": {"Quito"}}})
		require.NoError(t, err)
		assert.False(t, ok, "a stopped form takes no answer")
		msgs, err := stB.Messages(ctx, "s3", true)
		require.NoError(t, err)
		found := false
		for _, m := range msgs {
			found = found || m.Role == "tool" && strings.Contains(m.Content, "cancelled")
		}
		assert.True(t, found, "the model read that the form was cancelled: %+v", msgs)
	})
}
