package main

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// readyForm is an ask_user_question form of one single-choice question.
const readyForm = `{"title":"Ready?","questions":[{"id":"ready","question":"Are you ready?","kind":"single","options":["yes","no"]}]}`

// TestFormSuspendsAndResumesAfterRestart: on a SQLite store, a run whose
// form waits longer than SuspendAfter is suspended, and the server stops;
// a new server on the same file lists the form in the history's open call
// and on the event stream, takes its answer, resumes the turn, and the
// model receives the answer.
func TestFormSuspendsAndResumesAfterRestart(t *testing.T) {
	leaktest.Check(t)
	db := filepath.Join(t.TempDir(), "chat.db")
	model := toolModel(t, toolCall{"ask_user_question", readyForm})

	st := openSQLite(t, db)
	a := newModelHarness(t, onModel(model, Options{Store: st, SuspendAfter: 200 * time.Millisecond}))
	s1 := a.newSession(t)
	ev, _ := a.openEvents(t, s1)
	a.chat(t, s1, "Ask me")
	_, form := ev.untilForm(t)
	done, _ := ev.runDone(t)
	require.Equal(t, "suspended", done.Status, "%+v", done)
	a.srv.Close()
	require.NoError(t, st.Close())

	st2 := openSQLite(t, db)
	b := newModelHarness(t, onModel(model, Options{Store: st2}))
	b.client = b.newClientWithJar(t, a.client) // the same browser
	hist, seq, running := historyAt(t, b.client, b.ts.URL, s1)
	assert.False(t, running)
	var open []openCall
	for _, e := range hist {
		open = append(open, e.OpenCalls...)
	}
	require.Len(t, open, 1, "the form's call: %+v", hist)
	assert.Equal(t, "executing", open[0].State)
	require.NotNil(t, open[0].Form, "the open form, drawn again from the store")
	assert.Equal(t, form.FormID, open[0].Form.FormID)
	assert.Equal(t, "Are you ready?", open[0].Form.Questions[0].Question)

	// A page that names no event gets the form on the stream too.
	fresh, _ := openEventsAt(t, b.client, b.ts.URL, s1, "")
	_, again := fresh.untilForm(t)
	assert.Equal(t, form.FormID, again.FormID)

	ev2, _ := openEventsAt(t, b.client, b.ts.URL, s1, "after="+strconv.FormatInt(seq, 10))
	status, out := postAs(t, b.client, b.ts.URL, "/api/form-answer",
		mustString(map[string]any{"session_id": s1, "form_id": form.FormID, "answers": map[string]any{"ready": "yes"}}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "the form is answerable after the restart: %v", out)
	done, _ = ev2.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	reqs := model.Requests()
	tool, ok := reqs[len(reqs)-1].LastMessageWithRole("tool")
	require.True(t, ok)
	assert.JSONEq(t, `{"answers":[{"id":"ready","question":"Are you ready?","answer":"yes"}]}`, tool.Content, "the model receives the answer")
}

// TestSuspendedFormClosedByANewMessage: a new message on a session whose
// turn is suspended at a form closes that form (the user moved on): it is
// no longer listed, and an answer to it is stale.
func TestSuspendedFormClosedByANewMessage(t *testing.T) {
	leaktest.Check(t)
	model := toolModel(t, toolCall{"ask_user_question", readyForm})
	st := openSQLite(t, filepath.Join(t.TempDir(), "chat.db"))
	h := newModelHarness(t, onModel(model, Options{Store: st, SuspendAfter: 200 * time.Millisecond}))
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "Ask me")
	_, form := ev.untilForm(t)
	done, _ := ev.runDone(t)
	require.Equal(t, "suspended", done.Status, "%+v", done)

	h.chat(t, s1, "Never mind")
	_, second := ev.untilForm(t)
	assert.NotEqual(t, form.FormID, second.FormID)
	_, listed, err := h.srv.pending(t.Context(), s1)
	require.NoError(t, err)
	require.Len(t, listed, 1, "only the new form is open")
	assert.Equal(t, second.FormID, listed[0].FormID)
	status, out := h.post(t, "/api/form-answer", mustString(map[string]any{"session_id": s1, "form_id": form.FormID, "answers": map[string]any{"ready": "yes"}}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, false, out["success"], "the first form is closed: %v", out)

	// Suspended at the new form too: an interrupt closes it.
	done, _ = ev.runDone(t)
	require.Equal(t, "suspended", done.Status, "%+v", done)
	status, out = h.post(t, "/api/interrupt", mustString(map[string]string{"session_id": s1}))
	require.Equal(t, http.StatusOK, status, "the suspended turn's form is something to interrupt: %v", out)
	_, listed, err = h.srv.pending(t.Context(), s1)
	require.NoError(t, err)
	assert.Empty(t, listed)
	// The runner resumes the turn: the call reads that its form was closed.
	ev.untilState(t, agent.KindToolCall, agent.StateResult)
	ev.runDone(t)
}
