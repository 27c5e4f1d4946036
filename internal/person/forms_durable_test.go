package person_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// sharedStore is a store two replicas share: forms, answers and the notes
// that carry answers between them.
type sharedStore interface {
	memory.Store
	memory.ApprovalStore
	memory.Notifier
}

// eachStore runs fn with a MemStore and with a SQLite file.
func eachStore(t *testing.T, fn func(t *testing.T, st sharedStore)) {
	t.Run("memory", func(t *testing.T) { fn(t, &memory.MemStore{}) })
	t.Run("sqlite", func(t *testing.T) { fn(t, openSQLite(t, filepath.Join(t.TempDir(), "planround.db"))) })
}

// openSQLite opens the SQLite store at path, closed when the test ends.
func openSQLite(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), path)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}

// formsReplica returns a Forms configured by cfg, closed when the test ends.
func formsReplica(t *testing.T, cfg person.FormsConfig) *person.Forms {
	t.Helper()
	f := newForms(t, cfg)
	t.Cleanup(func() { assert.NoError(t, f.Close()) })
	return f
}

// otherResult is what the model reads for otherAnswers.
var otherAnswers = interact.Answers{"seat": {"window"}, "q2": {"Bob"}, "meals": {}}

const otherResult = `{"answers":[` +
	`{"id":"seat","question":"Seat?","answer":"window"},` +
	`{"id":"q2","question":"Your name?","answer":"Bob"},` +
	`{"id":"meals","question":"Meals?","answer":[]}]}`

// askOn runs one ask_user_question call of forms in session s1 and calls
// onForm with the form_request; it returns the chunks and the tool message
// the model read. The run is bounded by a short deadline: a call that
// waits for anything but a prompt answer fails the test.
func askOn(t *testing.T, forms *person.Forms, onForm func(interact.FormRequest)) ([]agent.Chunk, string) {
	t.Helper()
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, askWith(forms))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var chunks []agent.Chunk
	for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "ask me"}) {
		require.NoError(t, err)
		chunks = append(chunks, c)
		if req, ok := c.Side.(interact.FormRequest); ok {
			onForm(req)
		}
	}
	require.NoError(t, ctx.Err(), "the run waited too long")
	return chunks, toolMessages(t, srv)["call_1"]
}

// TestFormAnsweredOnAnotherReplica: a form asked by a call of one Forms is
// answered through a second Forms that shares the store and the notifier
// (another replica); the waiting call gets the answers at once, and the
// store keeps who answered.
func TestFormAnsweredOnAnotherReplica(t *testing.T) {
	leaktest.Check(t)
	eachStore(t, func(t *testing.T, st sharedStore) {
		cfg := person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour}
		a, b := formsReplica(t, cfg), formsReplica(t, cfg)
		var formID string
		answered := make(chan time.Time, 1)
		var wg sync.WaitGroup
		chunks, msg := askOn(t, a, func(req interact.FormRequest) {
			formID = req.FormID
			wg.Go(func() {
				time.Sleep(50 * time.Millisecond) // the call waits by then
				ok, err := b.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: req.FormID, Answers: tripAnswers, By: "bob", Via: "replica-b"})
				assert.NoError(t, err)
				assert.True(t, ok)
				answered <- time.Now()
			})
		})
		ended := time.Now()
		wg.Wait()
		assert.Equal(t, tripResult, msg)
		assert.Less(t, ended.Sub(<-answered), 5*time.Second, "the answer reached the waiting call at once")
		assert.Contains(t, trace(chunks), "tool:result:ask_user_question")
		assert.Zero(t, a.Len())
		assert.Zero(t, b.Len())

		rec, err := st.GetApproval(t.Context(), formID)
		require.NoError(t, err)
		assert.Equal(t, memory.KindForm, rec.Kind)
		assert.True(t, rec.Decided)
		assert.Equal(t, "bob", rec.Decision.Principal)
		assert.Equal(t, "replica-b", rec.Decision.Channel)
	})
}

// TestFormsAcrossReplicas: between two Forms sharing a store, answers that
// do not fit and answers from another session are refused and leave the
// form open on both; of two answers given at once on the two, the first
// wins and is what the model reads.
func TestFormsAcrossReplicas(t *testing.T) {
	leaktest.Check(t)
	eachStore(t, func(t *testing.T, st sharedStore) {
		cfg := person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour}
		a, b := formsReplica(t, cfg), formsReplica(t, cfg)
		var won interact.Answers
		_, msg := askOn(t, a, func(req interact.FormRequest) {
			reply := func(answers interact.Answers) interact.FormReply {
				return interact.FormReply{SessionID: "s1", FormID: req.FormID, Answers: answers, By: "someone"}
			}
			ok, err := b.Answer(t.Context(), interact.FormReply{SessionID: "s2", FormID: req.FormID, Answers: tripAnswers})
			assert.ErrorIs(t, err, interact.ErrWrongSession)
			assert.False(t, ok)
			ok, err = b.Answer(t.Context(), reply(interact.Answers{"seat": {"roof"}, "q2": {"Ada"}, "meals": {}}))
			assert.ErrorIs(t, err, interact.ErrInvalidAnswers)
			assert.False(t, ok)
			for _, f := range []*person.Forms{a, b} {
				p := pendingForms(t, f, "s1")
				require.Len(t, p, 1, "the form stays open")
				assert.Equal(t, req.FormID, p[0].FormID)
			}

			var wg sync.WaitGroup
			results := make([]bool, 2)
			for i, f := range []*person.Forms{a, b} {
				wg.Go(func() {
					ok, err := f.Answer(t.Context(), reply([]interact.Answers{tripAnswers, otherAnswers}[i]))
					assert.NoError(t, err)
					results[i] = ok
				})
			}
			wg.Wait()
			require.NotEqual(t, results[0], results[1], "exactly one answer is taken")
			won = otherAnswers
			if results[0] {
				won = tripAnswers
			}
			assert.Empty(t, pendingForms(t, b, "s1"))
		})
		want := otherResult
		if won["q2"][0] == "Ada" {
			want = tripResult
		}
		assert.Equal(t, want, msg)
	})
}

// TestFormTimeoutCountsFromCreation: a form's timeout counts from its
// creation, on every replica: past it, the other replica neither lists nor
// takes the form, and the call, which starts to wait only then, ends at
// once.
func TestFormTimeoutCountsFromCreation(t *testing.T) {
	leaktest.Check(t)
	eachStore(t, func(t *testing.T, st sharedStore) {
		const timeout = time.Second
		cfg := person.FormsConfig{Store: st, Notifier: st, Timeout: timeout}
		a, b := formsReplica(t, cfg), formsReplica(t, cfg)
		var resumed time.Time
		chunks, msg := askOn(t, a, func(req interact.FormRequest) {
			time.Sleep(timeout + 100*time.Millisecond) // the call has not started to wait
			assert.Empty(t, pendingForms(t, b, "s1"))
			ok, err := b.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: req.FormID, Answers: tripAnswers})
			assert.NoError(t, err)
			assert.False(t, ok, "too late")
			resumed = time.Now()
		})
		ended := time.Now() // the call's result, then one more model request
		require.Contains(t, trace(chunks), "tool:result:ask_user_question")
		assert.Less(t, ended.Sub(resumed), timeout*3/4, "the wait did not start the clock again")
		assert.Equal(t, "error: the user did not answer the form within 1s", msg)
		assert.Zero(t, a.Len())
	})
}

// TestCancelSessionCancelsOnlyForms: Forms.CancelSession ends the session's
// forms, on any replica, and leaves the approvals kept in the same store
// pending.
func TestCancelSessionCancelsOnlyForms(t *testing.T) {
	leaktest.Check(t)
	eachStore(t, func(t *testing.T, st sharedStore) {
		m, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Notifier: st, Timeout: time.Hour})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, m.Close()) })
		_, err = st.CreateSession(t.Context(), memory.Session{ID: "s1"})
		require.NoError(t, err)
		_, err = m.Request(t.Context(), agent.ApprovalRequest{SessionID: "s1", Round: 1,
			Call: agent.ToolCall{ID: "call_9", Name: "get_weather", Arguments: []byte(`{}`)}})
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = m.CancelSession(context.Background(), "s1") })

		cfg := person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour}
		a, b := formsReplica(t, cfg), formsReplica(t, cfg)
		appr, err := m.Pending(t.Context(), "s1")
		require.NoError(t, err)
		require.Len(t, appr, 1)
		assert.Empty(t, pendingForms(t, a, "s1"), "an approval is no form")
		ok, err := a.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: appr[0].ApprovalID, Answers: tripAnswers})
		assert.NoError(t, err)
		assert.False(t, ok, "an approval is not answered as a form")
		_, msg := askOn(t, a, func(interact.FormRequest) {
			n, err := b.CancelSession(t.Context(), "s1")
			assert.NoError(t, err)
			assert.Equal(t, 1, n, "the form, not the approval")
		})
		assert.Equal(t, "error: the form was cancelled before the user answered", msg)
		p, err := m.Pending(t.Context(), "s1")
		require.NoError(t, err)
		require.Len(t, p, 1, "the approval is still pending")
		assert.Equal(t, "call_9", p[0].Call.ID)
		assert.Empty(t, pendingForms(t, a, "s1"))
	})
}

// TestFormSurvivesARestart: on a SQLite file, a run whose form waits longer
// than SuspendAfter suspends; after everything is closed, a new store on the
// same file, a new Forms and a new Agent find the form (same id), take its
// answers, and the resumed turn gives them to the model and finishes.
func TestFormSurvivesARestart(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "planround.db")
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("An aisle seat for Ada.").Finish("stop"),
	)
	withStore := func(st memory.Store) func(*agent.Config) {
		return func(c *agent.Config) {
			c.DisablePlanning = true
			c.Store = st
		}
	}

	// The first process: the form is shown, nobody answers, the run
	// suspends.
	var formID string
	func() {
		st, err := sqlitestore.Open(t.Context(), path)
		require.NoError(t, err)
		defer func() { assert.NoError(t, st.Close()) }()
		forms, err := person.StartForms(person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour, SuspendAfter: 100 * time.Millisecond})
		require.NoError(t, err)
		defer func() { assert.NoError(t, forms.Close()) }()
		a := newAgent(t, srv, withStore(st), askWith(forms))
		chunks, err := collect(a.Run(t.Context(), agent.Input{SessionID: "s1", Message: "book me a seat"}))
		require.NoError(t, err)
		for _, c := range chunks {
			if req, ok := c.Side.(interact.FormRequest); ok {
				formID = req.FormID
			}
		}
		require.NotEmpty(t, formID, "%v", trace(chunks))
		require.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
		assert.Len(t, srv.Requests(), 1, "the model was not asked again")
		assert.Zero(t, forms.Len())
	}()

	// The second process, on the same file.
	st := openSQLite(t, path)
	forms := formsReplica(t, person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour, SuspendAfter: 100 * time.Millisecond})
	p := pendingForms(t, forms, "s1")
	require.Len(t, p, 1)
	assert.Equal(t, formID, p[0].FormID)
	assert.Equal(t, "call_1", p[0].CallID)
	assert.Equal(t, "Trip", p[0].Title)
	a := newAgent(t, srv, withStore(st), askWith(forms))

	// Resumed before anybody answered: the same form is shown again, and
	// the run suspends again.
	chunks, err := collect(a.Resume(t.Context(), "s1"))
	require.NoError(t, err)
	var again []string
	for _, c := range chunks {
		if req, ok := c.Side.(interact.FormRequest); ok {
			again = append(again, req.FormID)
		}
	}
	assert.Equal(t, []string{formID}, again, "%v", trace(chunks))
	require.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
	assert.Len(t, srv.Requests(), 1)

	ok, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: formID, Answers: tripAnswers, By: "ada", Via: "http"})
	require.NoError(t, err)
	require.True(t, ok)
	chunks, err = collect(a.Resume(t.Context(), "s1"))
	require.NoError(t, err)
	tr := trace(chunks)
	assert.Contains(t, tr, "tool:result:ask_user_question")
	assert.NotContains(t, tr, "suspended")
	require.Len(t, srv.Requests(), 2)
	assert.Equal(t, tripResult, toolMessages(t, srv)["call_1"], "the answers reached the model")
	assert.Empty(t, pendingForms(t, forms, "s1"))
	assert.Zero(t, forms.Len())
	open, err := st.OpenCalls(t.Context(), "s1")
	require.NoError(t, err)
	assert.Empty(t, open, "the turn finished")
	msgs, err := st.Messages(t.Context(), "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
	assert.Equal(t, "An aisle seat for Ada.", msgs[len(msgs)-1].Content)
}

// TestNewMessageClosesAPendingForm: a new user message to a session whose
// run suspended at a form (the user moved on) leaves the form no longer
// open: it is not listed and takes no answer.
func TestNewMessageClosesAPendingForm(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	m, err := person.StartApprovals(person.ApprovalsConfig{Store: st, Timeout: time.Hour})
	require.NoError(t, err)
	forms := formsReplica(t, person.FormsConfig{Store: st, Timeout: time.Hour, SuspendAfter: 50 * time.Millisecond})
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask_user_question", tripArgs).Finish("tool_calls"),
		agenttest.Reply().Text("Fine, no seat then.").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.DisablePlanning = true
		c.Store = st
		c.Approver = m // its CancelApproval closes the form of a call the user moved on from
	}, askWith(forms))

	chunks, err := collect(a.Run(t.Context(), agent.Input{SessionID: "s1", Message: "book me a seat"}))
	require.NoError(t, err)
	require.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
	p := pendingForms(t, forms, "s1")
	require.Len(t, p, 1)

	chunks, err = collect(a.Run(t.Context(), agent.Input{SessionID: "s1", Message: "never mind"}))
	require.NoError(t, err)
	assert.NotContains(t, trace(chunks), "suspended")
	assert.Empty(t, pendingForms(t, forms, "s1"), "the form is no longer open")
	ok, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: p[0].FormID, Answers: tripAnswers})
	assert.NoError(t, err)
	assert.False(t, ok, "the form takes no answer")
	rec, err := st.GetApproval(t.Context(), p[0].FormID)
	require.NoError(t, err)
	assert.True(t, rec.Decided)
	assert.False(t, rec.Decision.Approved)
	assert.Zero(t, forms.Len())
}
