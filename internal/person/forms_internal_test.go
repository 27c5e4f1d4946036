package person

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
)

var testQuestions = []interact.Question{
	{ID: "name", Question: "Your name?", Kind: interact.KindText},
	{ID: "seat", Question: "Seat?", Kind: interact.KindSingle, Options: []string{"window", "aisle"}},
	{ID: "meals", Question: "Meals?", Kind: interact.KindMultiple, Options: []string{"veg", "fish", "meat"}},
}

var testAnswers = interact.Answers{"name": {"Ada"}, "seat": {"window"}, "meals": {"veg", "fish"}}

func newForms(t *testing.T, timeout time.Duration) *Forms {
	t.Helper()
	f, err := StartForms(FormsConfig{Timeout: timeout})
	require.NoError(t, err)
	return f
}

// callInfo is the call callID of session as the agent describes it.
func callInfo(session, callID string) agent.CallInfo {
	return agent.CallInfo{SessionID: session, CallID: callID, Tool: "ask_user_question", Round: 1}
}

// open registers a form as ask_user_question's side message does, for the
// call callID of session, and returns the form as the front end sees it.
func open(t *testing.T, ctx context.Context, f *Forms, session, callID string) interact.FormRequest {
	t.Helper()
	qs, err := interact.CheckQuestions(testQuestions)
	require.NoError(t, err)
	req, err := f.register(ctx, callInfo(session, callID), session, session+"\x00"+callID, interact.FormRequest{Title: "Trip", Questions: qs})
	require.NoError(t, err)
	return req
}

// takeAndWait does what ask_user_question's Execute does with a registered
// form.
func takeAndWait(ctx context.Context, f *Forms, session, callID string) (interact.Answers, error) {
	h := f.take(session + "\x00" + callID)
	if h == nil {
		return nil, errors.New("no form registered for the call")
	}
	return f.wait(ctx, h.w, h.req.Questions)
}

// answer gives answers to the form id of session as a person would.
func answer(t *testing.T, f *Forms, session, id string, answers interact.Answers) (bool, error) {
	t.Helper()
	return f.Answer(t.Context(), interact.FormReply{SessionID: session, FormID: id, Answers: answers, By: "alice", Via: "test"})
}

// pending returns the open forms of session.
func pending(t *testing.T, f *Forms, session string) []interact.PendingForm {
	t.Helper()
	p, err := f.Pending(t.Context(), session)
	require.NoError(t, err)
	return p
}

// cancelSession cancels the forms of session and returns how many.
func cancelSession(t *testing.T, f *Forms, session string) int {
	t.Helper()
	n, err := f.CancelSession(t.Context(), session)
	require.NoError(t, err)
	return n
}

func TestStartFormsRefusesNegativeTimeout(t *testing.T) {
	_, err := StartForms(FormsConfig{Timeout: -time.Second})
	require.Error(t, err)
	f := newForms(t, 0)
	assert.Equal(t, interact.DefaultTimeout, f.Timeout())
}

// TestAnswerBeforeWait: answers given as soon as the form_request is seen,
// before the call waits, are what the call gets.
func TestAnswerBeforeWait(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	assert.Equal(t, interact.TypeFormRequest, e.Type)
	assert.Len(t, e.FormID, 32)

	ok, err := answer(t, f, "s1", e.FormID, testAnswers)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, f.Len(), "answered, not yet taken")
	assert.Empty(t, pending(t, f, "s1"), "answered forms are not pending")

	got, err := takeAndWait(t.Context(), f, "s1", "call_1")
	require.NoError(t, err)
	assert.Equal(t, testAnswers, got)
	assert.Zero(t, f.Len())
}

// TestAnswerDuringWait: answers given while the call waits wake it.
func TestAnswerDuringWait(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	done := make(chan error, 1)
	var got interact.Answers
	go func() {
		var err error
		got, err = takeAndWait(t.Context(), f, "s1", "call_1")
		done <- err
	}()
	ok, err := answer(t, f, "s1", e.FormID, testAnswers)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, <-done)
	assert.Equal(t, testAnswers, got)
	assert.Zero(t, f.Len())
}

// TestFirstAnswerWins: a second answer changes nothing and says the form
// was not open.
func TestFirstAnswerWins(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	ok, err := answer(t, f, "s1", e.FormID, testAnswers)
	require.NoError(t, err)
	require.True(t, ok)
	second := interact.Answers{"name": {"Bob"}, "seat": {"aisle"}, "meals": {}}
	ok, err = answer(t, f, "s1", e.FormID, second)
	require.NoError(t, err)
	assert.False(t, ok)
	got, err := takeAndWait(t.Context(), f, "s1", "call_1")
	require.NoError(t, err)
	assert.Equal(t, testAnswers, got)

	ok, err = answer(t, f, "s1", e.FormID, second)
	assert.NoError(t, err)
	assert.False(t, ok, "a form whose call took its answers is stale")
	ok, err = answer(t, f, "s1", "no-such-form", testAnswers)
	assert.NoError(t, err)
	assert.False(t, ok)
}

// TestAnswerFromAnotherSession: another session cannot answer a form, and
// the form stays open for its own.
func TestAnswerFromAnotherSession(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "alice", "call_1")
	ok, err := answer(t, f, "mallory", e.FormID, testAnswers)
	assert.ErrorIs(t, err, interact.ErrWrongSession)
	assert.False(t, ok)
	assert.Len(t, pending(t, f, "alice"), 1)
	assert.Empty(t, pending(t, f, "mallory"))

	ok, err = answer(t, f, "alice", e.FormID, testAnswers)
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestInvalidAnswersKeepTheFormOpen: answers that do not fit the questions
// are refused with a message that names what is wrong; the form can still
// be answered.
func TestInvalidAnswersKeepTheFormOpen(t *testing.T) {
	f := newForms(t, time.Minute)
	e := open(t, t.Context(), f, "s1", "call_1")
	with := func(id string, a interact.Answer) interact.Answers {
		out := interact.Answers{}
		for k, v := range testAnswers {
			out[k] = v
		}
		if a == nil {
			delete(out, id)
		} else {
			out[id] = a
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		answers interact.Answers
		want    string
	}{
		{"nil", nil, "no answers"},
		{"missing", with("seat", nil), `question "seat": no answer`},
		{"unknown id", func() interact.Answers { a := with("x", interact.Answer{"?"}); return a }(), `no question has the id "x"`},
		{"two texts", with("name", interact.Answer{"a", "b"}), "want one text, got 2"},
		{"text too long", with("name", interact.Answer{string(make([]byte, interact.MaxTextAnswer+1))}), "longer than"},
		{"text not UTF-8", with("name", interact.Answer{"\xff"}), "not valid UTF-8"},
		{"single not an option", with("seat", interact.Answer{"roof"}), `"roof" is not one of its options`},
		{"single two options", with("seat", interact.Answer{"window", "aisle"}), "want one option, got 2"},
		{"single none", with("seat", interact.Answer{}), "want one option, got 0"},
		{"multiple not an option", with("meals", interact.Answer{"veg", "cake"}), `"cake" is not one of its options`},
		{"multiple twice", with("meals", interact.Answer{"veg", "veg"}), `option "veg" chosen twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := answer(t, f, "s1", e.FormID, tc.answers)
			require.ErrorIs(t, err, interact.ErrInvalidAnswers)
			assert.Contains(t, err.Error(), tc.want)
			assert.False(t, ok)
			assert.Len(t, pending(t, f, "s1"), 1, "the form stays open")
		})
	}
	ok, err := answer(t, f, "s1", e.FormID, with("meals", interact.Answer{}))
	require.NoError(t, err, "no option of a multiple choice is an answer")
	assert.True(t, ok)
}

// TestCancelSession: cancelling a session ends its forms, waited for or
// not yet, and no other session's.
func TestCancelSession(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, time.Minute)
	open(t, t.Context(), f, "s1", "call_1") // not waited for yet
	open(t, t.Context(), f, "s1", "call_2") // waited for below
	other := open(t, t.Context(), f, "s2", "call_1")
	answered := open(t, t.Context(), f, "s1", "call_3")
	_, err := answer(t, f, "s1", answered.FormID, testAnswers)
	require.NoError(t, err)

	waited := make(chan error, 1)
	e2 := f.take("s1\x00call_2")
	require.NotNil(t, e2)
	go func() {
		_, err := f.wait(t.Context(), e2.w, e2.req.Questions)
		waited <- err
	}()

	assert.Equal(t, 2, cancelSession(t, f, "s1"))
	assert.ErrorIs(t, <-waited, interact.ErrCancelled)
	_, err = takeAndWait(t.Context(), f, "s1", "call_1")
	assert.ErrorIs(t, err, interact.ErrCancelled)
	assert.Equal(t, "the form was cancelled before the user answered", err.Error())
	got, err := takeAndWait(t.Context(), f, "s1", "call_3")
	require.NoError(t, err, "an answered form keeps its answers")
	assert.Equal(t, testAnswers, got)

	assert.Len(t, pending(t, f, "s2"), 1)
	assert.Zero(t, cancelSession(t, f, "s1"))
	ok, err := answer(t, f, "s2", other.FormID, testAnswers)
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = takeAndWait(t.Context(), f, "s2", "call_1")
	require.NoError(t, err)
	assert.Zero(t, f.Len())
}

// TestTimeout: a form nobody answers ends after the timeout, counted from
// its creation (not from the start of the wait: a resumed turn's wait does
// not start the clock again), with a message for the model.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForms(t, 5*time.Minute)
		e := open(t, t.Context(), f, "s1", "call_1")
		time.Sleep(2 * time.Minute) // registered a while before the wait
		start := time.Now()
		_, err := takeAndWait(t.Context(), f, "s1", "call_1")
		assert.ErrorIs(t, err, interact.ErrTimeout)
		assert.Equal(t, "the user did not answer the form within 5m0s", err.Error())
		assert.Equal(t, 3*time.Minute, time.Since(start), "what is left of the timeout")
		assert.Zero(t, f.Len())
		ok, err := answer(t, f, "s1", e.FormID, testAnswers)
		assert.NoError(t, err)
		assert.False(t, ok, "a timed out form is stale")

		late := open(t, t.Context(), f, "s1", "call_2")
		time.Sleep(time.Hour)
		assert.Empty(t, pending(t, f, "s1"), "a form past its timeout is not listed")
		ok, err = answer(t, f, "s1", late.FormID, testAnswers)
		assert.NoError(t, err)
		assert.False(t, ok, "a form past its timeout takes no answer")
		start = time.Now()
		_, err = takeAndWait(t.Context(), f, "s1", "call_2")
		assert.ErrorIs(t, err, interact.ErrTimeout)
		assert.Zero(t, time.Since(start), "the wait of a form past its timeout ends at once")
		assert.Zero(t, f.Len())
	})
}

// TestWaitInterrupted: the wait returns the context's error when it ends,
// also when it had ended before the wait began.
func TestWaitInterrupted(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, time.Minute)
	open(t, t.Context(), f, "s1", "call_1")
	ctx, cancel := context.WithCancel(t.Context())
	go cancel()
	_, err := takeAndWait(ctx, f, "s1", "call_1")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, f.Len())

	open(t, t.Context(), f, "s1", "call_2")
	_, err = takeAndWait(ctx, f, "s1", "call_2")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, f.Len())
}

// TestUntakenFormEndsWithItsContext: a form whose call never ran (the
// consumer left after the side chunk) leaves when the run's context ends.
func TestUntakenFormEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForms(t, time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		e := open(t, ctx, f, "s1", "call_1")
		answered := open(t, ctx, f, "s1", "call_2")
		_, err := answer(t, f, "s1", answered.FormID, testAnswers)
		require.NoError(t, err)
		assert.Equal(t, 2, f.Len())
		cancel()
		synctest.Wait()
		assert.Zero(t, f.Len())
		f.mu.Lock()
		assert.Empty(t, f.byCall)
		f.mu.Unlock()
		ok, err := answer(t, f, "s1", e.FormID, testAnswers)
		assert.NoError(t, err)
		assert.False(t, ok, "the form of a call that never ran is not answerable")
		rec, err := f.core.Store().GetApproval(t.Context(), e.FormID)
		require.NoError(t, err)
		assert.Equal(t, string(agent.CauseApprovalInterrupted), rec.Decision.Cause)
		rec, err = f.core.Store().GetApproval(t.Context(), answered.FormID)
		require.NoError(t, err)
		assert.True(t, rec.Decision.Approved, "an answer given before stays")
	})
}

// TestUntakenFormOutlivesASuspension: a form whose run suspended before
// its call ran stays open in the store, for the resumed turn's call.
func TestUntakenFormOutlivesASuspension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForms(t, time.Minute)
		ctx, cancel := context.WithCancelCause(t.Context())
		e := open(t, ctx, f, "s1", "call_1")
		cancel(agent.ErrSuspended)
		synctest.Wait()
		assert.Zero(t, f.Len(), "no call of this process holds it")
		p := pending(t, f, "s1")
		require.Len(t, p, 1)
		assert.Equal(t, e.FormID, p[0].FormID)
		ok, err := answer(t, f, "s1", e.FormID, testAnswers)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

// TestTakenFormOutlivesNothing: once a call takes its form, the end of the
// registering context no longer touches it; the wait decides.
func TestTakenFormIsTheWaitersOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForms(t, time.Minute)
		regCtx, cancel := context.WithCancel(t.Context())
		e := open(t, regCtx, f, "s1", "call_1")
		got := make(chan interact.Answers, 1)
		go func() {
			a, _ := takeAndWait(t.Context(), f, "s1", "call_1")
			got <- a
		}()
		synctest.Wait() // the goroutine waits
		cancel()
		synctest.Wait()
		assert.Len(t, pending(t, f, "s1"), 1, "the form stays open for its waiter")
		ok, err := answer(t, f, "s1", e.FormID, testAnswers)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, testAnswers, <-got)
		assert.Zero(t, f.Len())
	})
}

// TestSameCallIDTwice: two forms registered for one call key (a provider
// that repeats call ids) are taken one each, oldest first.
func TestSameCallIDTwice(t *testing.T) {
	f := newForms(t, time.Minute)
	a := open(t, t.Context(), f, "s1", "call_1")
	b := open(t, t.Context(), f, "s1", "call_1")
	assert.NotEqual(t, a.FormID, b.FormID)
	assert.Equal(t, a.FormID, f.take("s1\x00call_1").req.FormID)
	assert.Equal(t, b.FormID, f.take("s1\x00call_1").req.FormID)
	assert.Nil(t, f.take("s1\x00call_1"))
}

func TestPendingListsOpenFormsOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForms(t, time.Minute)
		var ids []string
		for i := range 5 {
			ids = append(ids, open(t, t.Context(), f, "s1", fmt.Sprint("call_", i)).FormID)
			time.Sleep(time.Second)
		}
		_, err := answer(t, f, "s1", ids[2], testAnswers)
		require.NoError(t, err)
		p := pending(t, f, "s1")
		require.Len(t, p, 4)
		for i, want := range []int{0, 1, 3, 4} {
			assert.Equal(t, ids[want], p[i].FormID)
			assert.Equal(t, fmt.Sprint("call_", want), p[i].CallID)
			assert.Equal(t, "s1", p[i].SessionID)
			assert.Equal(t, "Trip", p[i].Title)
		}
		b, err := json.Marshal(p[0])
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		for _, k := range []string{"type", "form_id", "title", "questions", "session_id", "call_id", "created"} {
			assert.Contains(t, m, k)
		}
		cancelSession(t, f, "s1")
		for i := range 5 {
			f.take(fmt.Sprint("s1\x00call_", i))
		}
	})
}

// TestFormsConcurrent: many forms of many sessions registered, answered
// (right and wrong session, twice), cancelled and waited for at once; every
// wait returns and nothing stays. Run with -race.
func TestFormsConcurrent(t *testing.T) {
	leaktest.Check(t)
	f := newForms(t, time.Minute)
	const sessions, perSession = 8, 25
	var wg sync.WaitGroup
	for s := range sessions {
		session := fmt.Sprint("s", s)
		for i := range perSession {
			call := fmt.Sprint("call_", i)
			e := open(t, t.Context(), f, session, call)
			wg.Add(3)
			go func() {
				defer wg.Done()
				a, err := takeAndWait(t.Context(), f, session, call)
				if err == nil {
					assert.Equal(t, testAnswers, a)
				} else {
					assert.ErrorIs(t, err, interact.ErrCancelled)
				}
			}()
			go func() {
				defer wg.Done()
				ok, err := answer(t, f, "intruder", e.FormID, testAnswers)
				assert.False(t, ok)
				if err != nil { // nil once the form has left
					assert.ErrorIs(t, err, interact.ErrWrongSession)
				}
				answer(t, f, session, e.FormID, testAnswers)
				answer(t, f, session, e.FormID, testAnswers)
			}()
			go func() {
				defer wg.Done()
				if i%5 == 0 {
					cancelSession(t, f, session)
				}
				pending(t, f, session)
			}()
		}
	}
	wg.Wait()
	assert.Zero(t, f.Len())
	f.mu.Lock()
	assert.Empty(t, f.byCall)
	f.mu.Unlock()
}

// BenchmarkFormRoundTrip: one form registered, answered, taken and waited
// for, as one ask_user_question call does.
func BenchmarkFormRoundTrip(b *testing.B) {
	f, err := StartForms(FormsConfig{})
	if err != nil {
		b.Fatal(err)
	}
	qs, err := interact.CheckQuestions(testQuestions)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		req, err := f.register(ctx, callInfo("s1", "call_1"), "s1", "s1\x00call_1", interact.FormRequest{Questions: qs})
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := f.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: req.FormID, Answers: testAnswers}); !ok || err != nil {
			b.Fatal(ok, err)
		}
		h := f.take("s1\x00call_1")
		if _, err := f.wait(ctx, h.w, h.req.Questions); err != nil {
			b.Fatal(err)
		}
	}
	if f.Len() != 0 {
		b.Fatal("forms left")
	}
}
