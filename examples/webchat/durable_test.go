package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// historyAt reads GET /api/history of the session on the server at base as
// client: the entries, and the X-Session-Seq and X-Session-Running headers.
func historyAt(t *testing.T, client *http.Client, base, session string) ([]historyEntry, int64, bool) {
	t.Helper()
	resp, err := client.Get(base + "/api/history?session_id=" + session)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var hist []historyEntry
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&hist))
	seq, err := strconv.ParseInt(resp.Header.Get(headerSeq), 10, 64)
	require.NoError(t, err, "%s: %q", headerSeq, resp.Header.Get(headerSeq))
	return hist, seq, resp.Header.Get(headerRunning) == "true"
}

// openSQLite opens the SQLite store in file path, closed when t ends.
func openSQLite(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// suspendedAtApproval runs a server on the SQLite file db, in a temporary
// folder, up to the approval card of a command that appends to a file of
// t's (ran counts its runs), then closes it: the turn of session s1 is
// suspended in st, waiting for the decision on call. The harness a keeps
// the browser (its cookie) that started it.
func suspendedAtApproval(t *testing.T) (db string, st *sqlitestore.Store, a *harness, s1 string, call *agent.ToolCall, ran func() int) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "chat.db")
	message, ran := markerCommand(t)
	st = openSQLite(t, db)
	a = newHarness(t, Options{Store: st})
	s1 = a.newSession(t)
	ev, _ := a.openEvents(t, s1)
	a.chat(t, s1, message)
	call, _ = ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	a.srv.Close()
	done, _ := ev.runDone(t)
	require.Equal(t, "suspended", done.Status)
	return db, st, a, s1, call, ran
}

// markerCommand returns a message that asks the demo model to run a
// command appending a line to a file of t's, and a function counting the
// lines: how many times the tool ran.
func markerCommand(t *testing.T) (string, func() int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ran.txt")
	count := func() int {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		return strings.Count(string(b), "\n")
	}
	return "Please run `echo ran >> " + path + "`", count
}

// TestTurnLogReplay: a page that reloads mid-run gets the history up to
// the run's start and, from the turn log, the run's events so far (its
// user message and the text streamed) and then the rest; a stream that
// reconnects with Last-Event-ID gets what it missed, once.
func TestTurnLogReplay(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "Weather in Oslo?")
	call, seen := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	require.Equal(t, "run_started", seen[0].name)
	var started runStarted
	require.NoError(t, json.Unmarshal([]byte(seen[0].data), &started))
	assert.Equal(t, "Weather in Oslo?", started.Message)
	ids := make([]int64, len(seen))
	for i, e := range seen {
		ids[i], _ = strconv.ParseInt(e.id, 10, 64)
		require.Equal(t, int64(i+1), ids[i], "events are numbered from 1 without a gap: %v", e)
	}

	// A reload: the history ends where the run started.
	hist, seq, running := historyAt(t, h.client, h.ts.URL, s1)
	assert.True(t, running)
	assert.Equal(t, int64(0), seq, "the first turn: nothing before it")
	for _, e := range hist {
		assert.NotEqual(t, memory.RoleUser, e.Role, "the run's user message comes with its events: %+v", e)
	}
	re, hello := openEventsAt(t, h.client, h.ts.URL, s1, "after="+strconv.FormatInt(seq, 10))
	assert.Equal(t, true, hello["busy"])
	assert.Equal(t, true, hello["replay"])
	replayed := re.until(t, func(e sseEvent) bool { return e.id == strconv.Itoa(len(seen)) })
	require.Len(t, replayed, len(seen))
	for i := range seen {
		assert.Equal(t, seen[i], replayed[i], "event %d replayed as it was sent", i+1)
	}

	// A reconnect after the third event gets the fourth on, and then the
	// live events, each once.
	rc := h.newClientWithJar(t, h.client)
	req, err := http.NewRequest(http.MethodGet, h.ts.URL+"/api/events?session_id="+s1+"&after=1", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", "3")
	resp, err := rc.Do(req)
	require.NoError(t, err)
	late := &events{body: resp.Body, ch: make(chan sseEvent, 1000), done: make(chan struct{})}
	go late.read(resp.Body)
	t.Cleanup(late.close)
	require.Equal(t, "hello", late.next(t).name)
	assert.Equal(t, "4", late.next(t).id, "Last-Event-ID wins over after")

	h.decide(t, s1, call, true)
	done, _ := ev.runDone(t)
	assert.Equal(t, "finished", done.Status)
	for _, stream := range []*events{re, late} {
		var got []string
		for _, e := range stream.until(t, func(e sseEvent) bool { return e.name == "run_done" }) {
			got = append(got, e.id)
		}
		for i := 1; i < len(got); i++ {
			a, _ := strconv.Atoi(got[i-1])
			b, _ := strconv.Atoi(got[i])
			assert.Equal(t, a+1, b, "no event twice, none missed: %v", got)
		}
	}

	// Once it ended, the history holds the whole turn, up to run_done.
	hist, seq2, running := historyAt(t, h.client, h.ts.URL, s1)
	assert.False(t, running)
	assert.Greater(t, seq2, int64(len(seen)))
	assert.Equal(t, memory.RoleUser, hist[0].Role)
	_, hello = openEventsAt(t, h.client, h.ts.URL, s1, "after="+strconv.FormatInt(seq2, 10))
	assert.Equal(t, false, hello["busy"])

	// A number this log never gave: the server has no durable store, so
	// the stream goes on without a replay (no reload event).
	_, hello = openEventsAt(t, h.client, h.ts.URL, s1, "after=100000")
	assert.Equal(t, false, hello["replay"])
	assert.Equal(t, float64(seq2), hello["seq"])
}

// newClientWithJar returns a client with c's cookies, and so its owner.
func (h *harness) newClientWithJar(t *testing.T, c *http.Client) *http.Client {
	t.Helper()
	return &http.Client{Transport: h.ts.Client().Transport, Jar: c.Jar}
}

// TestSuspendOnCloseResumeOnDecision: on a SQLite store, Close suspends a
// run that waits for a decision (its page hears so); a new server on the
// same file shows the card in the history, answerable with its approval
// id, and a decision posted to it resumes the turn on the page's event
// stream: the tool runs once and the run ends.
func TestSuspendOnCloseResumeOnDecision(t *testing.T) {
	leaktest.Check(t)
	db := filepath.Join(t.TempDir(), "chat.db")
	message, ran := markerCommand(t)

	st := openSQLite(t, db)
	a := newHarness(t, Options{Store: st})
	s1 := a.newSession(t)
	ev, hello := a.openEvents(t, s1)
	assert.Equal(t, true, hello["durable"])
	a.chat(t, s1, message)
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	a.srv.Close()
	done, chunks := ev.runDone(t)
	assert.Equal(t, runDone{Status: "suspended", Reason: reasonShutdown}, done)
	require.NotEmpty(t, chunks)
	assert.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)
	require.NoError(t, st.Close())
	assert.Zero(t, ran(), "nothing ran before the decision")

	st2 := openSQLite(t, db)
	b := newHarness(t, Options{Store: st2})
	b.client = b.newClientWithJar(t, a.client) // the same browser
	hist, seq, running := historyAt(t, b.client, b.ts.URL, s1)
	assert.False(t, running)
	var open []openCall
	for _, e := range hist {
		open = append(open, e.OpenCalls...)
	}
	require.Len(t, open, 1, "the card of the waiting call: %+v", hist)
	assert.Equal(t, openCall{CallID: call.ID, State: "approval", ApprovalID: call.ApprovalID, Tool: call.Name, ArgumentsDigest: call.ArgumentsDigest}, open[0])

	ev2, _ := openEventsAt(t, b.client, b.ts.URL, s1, "after="+strconv.FormatInt(seq, 10))
	out := b.decide(t, s1, call, true)
	assert.Equal(t, true, out["success"], "the card is answerable after the restart: %v", out)
	first := ev2.next(t)
	require.Equal(t, "run_started", first.name, "the resumed turn comes to the page: %v", first)
	var started runStarted
	require.NoError(t, json.Unmarshal([]byte(first.data), &started))
	assert.True(t, started.Resumed)
	done, chunks = ev2.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	assert.Contains(t, summary(chunks), "result run_command")
	assert.Equal(t, 1, ran(), "the tool ran once")

	hist, _, _ = historyAt(t, b.client, b.ts.URL, s1)
	for _, e := range hist {
		assert.Empty(t, e.OpenCalls, "nothing open once the turn ended")
	}
	assert.Equal(t, memory.RoleAssistant, hist[len(hist)-1].Role)
	out = b.decide(t, s1, call, true)
	assert.Equal(t, false, out["success"], "decided once")
	assert.Equal(t, 1, ran())
}

// TestCardFromBeforeTheUpgrade: a card that waited across the upgrade to
// the version whose approvals keep the digest of their arguments (its
// record as the upgrade leaves one of the version before: no kind, digest,
// principal or channel, and the key the store's migration gives it from
// its call's record) is shown after the upgrade with the digest of its
// arguments, is answerable with it, and its decision resumes the turn:
// the tool runs once. A decision that names other arguments is refused.
func TestCardFromBeforeTheUpgrade(t *testing.T) {
	leaktest.Check(t)
	db, st, a, s1, call, ran := suspendedAtApproval(t)
	require.NoError(t, st.Close())

	// The first server's last writes (its lease's release, the log's
	// flush) may still hold the file for a moment after its store closed:
	// wait for the lock as the stores do instead of failing at once.
	raw, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	res, err := raw.Exec(`UPDATE approvals SET kind = '', digest = '', principal = '', channel = '' WHERE id = ?`, call.ApprovalID)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, raw.Close())

	st2 := openSQLite(t, db)
	b := newHarness(t, Options{Store: st2})
	b.client = b.newClientWithJar(t, a.client)
	hist, seq, _ := historyAt(t, b.client, b.ts.URL, s1)
	var open []openCall
	for _, e := range hist {
		open = append(open, e.OpenCalls...)
	}
	require.Len(t, open, 1, "the card of the waiting call: %+v", hist)
	assert.Equal(t, openCall{CallID: call.ID, State: "approval", ApprovalID: call.ApprovalID, Tool: call.Name, ArgumentsDigest: call.ArgumentsDigest}, open[0],
		"the card shows the digest of the arguments it shows")

	other := *call
	other.ArgumentsDigest = agent.ArgumentsDigest(json.RawMessage(`{"command":"rm -rf /"}`))
	status, out := b.post(t, "/api/tool-approve", approveBody(s1, &other, true, nil))
	assert.Equal(t, http.StatusConflict, status, "a decision on other arguments: %v", out)

	ev2, _ := openEventsAt(t, b.client, b.ts.URL, s1, "after="+strconv.FormatInt(seq, 10))
	out = b.decide(t, s1, call, true)
	assert.Equal(t, true, out["success"], "the card is answerable after the upgrade: %v", out)
	done, chunks := ev2.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	assert.Contains(t, summary(chunks), "result run_command")
	assert.Equal(t, 1, ran(), "the tool ran once")
}

// TestSweeperResumesADecidedTurn: a decision taken while no server ran
// the turn (here straight in the store) is found by the sweeper of the
// next server at its start, which resumes the turn.
func TestSweeperResumesADecidedTurn(t *testing.T) {
	leaktest.Check(t)
	_, st, a, s1, call, ran := suspendedAtApproval(t)
	approvals, ok := any(st).(memory.ApprovalStore)
	require.True(t, ok, "the SQLite store keeps approvals")
	_, err := approvals.DecideApproval(context.Background(), s1, call.ApprovalID, memory.ApprovalDecision{Approved: true})
	require.NoError(t, err)

	b := newHarness(t, Options{Store: st})
	b.client = b.newClientWithJar(t, a.client)
	// From the start of the store's log: the sweeper may have resumed the
	// turn before the stream opens. The first turn (suspended) comes first.
	ev2, _ := openEventsAt(t, b.client, b.ts.URL, s1, "after=0")
	done, _ := ev2.runDone(t)
	require.Equal(t, "suspended", done.Status, "%+v", done)
	done, chunks := ev2.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	assert.Contains(t, summary(chunks), "result run_command")
	assert.Equal(t, 1, ran())
}

// TestNewMessageClosesWaitingCards: a new message on a session whose turn
// waits for a decision rejects the waiting call (the user moved on) before
// its own run goes on; the card's approval is no longer answerable.
func TestNewMessageClosesWaitingCards(t *testing.T) {
	leaktest.Check(t)
	_, st, a, s1, call, ran := suspendedAtApproval(t)

	b := newHarness(t, Options{Store: st})
	b.client = b.newClientWithJar(t, a.client)
	ev2, _ := b.openEvents(t, s1)
	b.chat(t, s1, "Hello again")
	done, chunks := ev2.runDone(t)
	assert.Equal(t, "finished", done.Status, "%+v", done)
	var rejected *agent.ToolCall
	for _, c := range chunks {
		if c.Kind == agent.KindToolRejected {
			rejected = c.Tool
			break
		}
		require.NotEqual(t, agent.KindText, c.Kind, "the waiting call is closed before the new run writes: %v", summary(chunks))
	}
	require.NotNil(t, rejected, "the waiting call is closed: %v", summary(chunks))
	assert.Equal(t, call.ID, rejected.ID)
	assert.Equal(t, agent.CauseMovedOn, rejected.Cause)
	out := b.decide(t, s1, call, true)
	assert.Equal(t, false, out["success"])
	assert.Zero(t, ran())
}
