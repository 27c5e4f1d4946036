package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/pgtest"
)

// texts of the chunks among events.
func eventTexts(t *testing.T, evs []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, e := range evs {
		if e.name == "" {
			if c := e.chunk(t); c.Kind == agent.KindText {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// TestReplicasOnPostgres: two web chat processes on one PostgreSQL schema
// serve one browser as replicas with no stickiness. Its owner cookie works
// on both; a turn started on A streams to the browser's event stream on B;
// a page reloaded on B mid-run gets the text streamed so far and the rest;
// a decision posted to B wakes the run waiting on A; an interrupt posted to
// B stops a run on A; and once A is killed, B ends the turn A left (its
// card stays answerable) and a decision posted to B resumes it there. The
// tool runs once per decision.
func TestReplicasOnPostgres(t *testing.T) {
	leaktest.Check(t)
	url := postgresURL(t)
	replicas(t, "-postgres", url, "-postgres-schema", freshSchema(t, url))
}

// TestReplicasOnSQLite: TestReplicasOnPostgres with both processes on one
// SQLite file, whose store carries the notes between them through the file.
func TestReplicasOnSQLite(t *testing.T) {
	leaktest.Check(t)
	replicas(t, "-db", filepath.Join(t.TempDir(), "chat.db"))
}

// replicas is TestReplicasOnPostgres on the store that db names.
func replicas(t *testing.T, db ...string) {
	args := append(db, "-lease-ttl", "1s", "-sweep-interval", "100ms")
	a := startChild(t, args...)
	b := startChild(t, args...)

	// One browser, its cookie from A, and a session made by A.
	client := browserOf(t, a.url)
	s1 := postSession(t, client, a.url)
	_, _, _ = historyAt(t, client, b.url, s1) // B takes A's cookie
	other := browserOf(t, b.url)
	status, _ := getAs(t, other, b.url+"/api/history?session_id="+s1)
	assert.Equal(t, http.StatusForbidden, status, "another browser on B")

	// 1. A turn started on A, watched on B; a reload on B mid-run; the
	// decision posted to B.
	message, ran := markerCommand(t)
	onB, _ := openEventsAt(t, client, b.url, s1, "after=0")
	status, out := postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": message}))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	call, seen := onB.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, "run_started", seen[0].name)
	assert.Contains(t, seen[0].data, "echo ran", "the message that started it")
	streamed := eventTexts(t, seen)
	require.NotEmpty(t, streamed, "text came before the approval")

	hist, seq, running := historyAt(t, client, b.url, s1)
	assert.True(t, running, "the run on A is in progress, says B")
	for _, e := range hist {
		assert.NotEqual(t, "user", string(e.Role), "the run's message comes with its events")
	}
	reloaded, hello := openEventsAt(t, client, b.url, s1, "after="+strconv.FormatInt(seq, 10))
	assert.Equal(t, true, hello["busy"])
	again := reloaded.until(t, func(e sseEvent) bool { return e.id == seen[len(seen)-1].id })
	assert.Equal(t, streamed, eventTexts(t, again), "the reloaded page has the text streamed so far")

	status, out = postAs(t, client, b.url, "/api/tool-approve", approveBody(s1, call, true, nil))
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, true, out["success"], "%v", out)
	done, chunks := onB.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	assert.Contains(t, summary(chunks), "result run_command")
	done, _ = reloaded.runDone(t)
	assert.Equal(t, "finished", done.Status)
	assert.Equal(t, 1, ran(), "the tool ran once")

	// 2. An interrupt posted to B stops the run waiting on A.
	status, out = postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": "Weather in Oslo?"}))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	onB.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	status, out = postAs(t, client, b.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": "hi"}))
	assert.Equal(t, http.StatusConflict, status, "B does not start a run that A drives: %v", out)
	status, out = postAs(t, client, b.url, "/api/sessions/delete", mustString(map[string]string{"session_id": s1}))
	assert.Equal(t, http.StatusConflict, status, "B does not delete a session whose run A drives: %v", out)
	status, body := getAs(t, client, b.url+"/api/sessions")
	require.Equal(t, http.StatusOK, status)
	var list []sessionEntry
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list, 1)
	assert.True(t, list[0].Busy, "B's list says A runs the session")
	status, out = postAs(t, client, b.url, "/api/interrupt", mustString(map[string]string{"session_id": s1}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	done, _ = onB.runDone(t)
	assert.Equal(t, "interrupted", done.Status, "%+v", done)

	// 3. A dies while a run waits: the decision posted to B resumes the
	// turn there.
	status, out = postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": message}))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	call, _ = onB.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Error(t, a.stop(t, syscall.SIGKILL))
	// B's sweeper ends the turn that nobody drives any more, once A's lease
	// has expired: suspended, its card answerable.
	done, _ = onB.runDone(t)
	assert.Equal(t, runDone{Status: "suspended", Reason: reasonStopped}, done)
	hist, _, running = historyAt(t, client, b.url, s1)
	assert.False(t, running)
	var open []openCall
	for _, e := range hist {
		open = append(open, e.OpenCalls...)
	}
	require.Len(t, open, 1, "%+v", hist)
	assert.Equal(t, call.ApprovalID, open[0].ApprovalID)
	status, out = postAs(t, client, b.url, "/api/tool-approve", approveBody(s1, call, true, nil))
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, true, out["success"], "%v", out)
	evs := onB.until(t, func(e sseEvent) bool {
		if e.name != "run_started" {
			return false
		}
		var d runStarted
		require.NoError(t, json.Unmarshal([]byte(e.data), &d))
		return d.Resumed
	})
	require.NotEmpty(t, evs)
	done, chunks = onB.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v\n%s", done, b.stderr)
	assert.Contains(t, summary(chunks), "result run_command")
	assert.Equal(t, 2, ran(), "once per decision")
	require.NoError(t, b.stop(t, syscall.SIGTERM), "%s", b.stderr)
}

// postgresURL returns the test server's URL (see pgtest.URL).
func postgresURL(t testing.TB) string { t.Helper(); return pgtest.URL(t) }

// freshSchema returns a schema of t's own, dropped when t ends.
func freshSchema(t testing.TB, url string) string {
	t.Helper()
	return pgtest.Schema(t, url, "webchat_test_")
}

// TestFormOnAnyReplica: a form asked by a run on replica A is listed by B
// (from the shared store) and answered through B; the answer wakes the
// call waiting on A, and the turn ends with the answers. A second answer,
// on A, is stale.
func TestFormOnAnyReplica(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		leaktest.Check(t)
		url := postgresURL(t)
		formOnAnyReplica(t, "-postgres", url, "-postgres-schema", freshSchema(t, url))
	})
	t.Run("sqlite", func(t *testing.T) {
		leaktest.Check(t)
		formOnAnyReplica(t, "-db", filepath.Join(t.TempDir(), "chat.db"))
	})
}

func formOnAnyReplica(t *testing.T, args ...string) {
	a := startChild(t, args...)
	b := startChild(t, args...)
	client := browserOf(t, a.url)
	s1 := postSession(t, client, a.url)

	onA, _ := openEventsAt(t, client, a.url, s1, "after=0")
	status, out := postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": "Ask me a few questions"}))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	_, form := onA.untilForm(t)

	// B lists it: a page opened on B draws it.
	onB, hello := openEventsAt(t, client, b.url, s1, "")
	assert.Equal(t, true, hello["busy"])
	_, listed := onB.untilForm(t)
	assert.Equal(t, form.FormID, listed.FormID)

	answers := map[string]any{"colour": "blue", "days": []string{"Friday"}, "note": "from B"}
	status, out = postAs(t, client, b.url, "/api/form-answer", mustString(map[string]any{"session_id": s1, "form_id": form.FormID, "answers": answers}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "answered on B: %v", out)
	done, chunks := onA.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	assert.Contains(t, result, "from B", "the call on A took the answers given to B")

	status, out = postAs(t, client, a.url, "/api/form-answer", mustString(map[string]any{"session_id": s1, "form_id": form.FormID, "answers": answers}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, false, out["success"], "answered once: %v", out)
}
