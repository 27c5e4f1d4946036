package pgstore_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/upgradetest"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/storetest"
)

func TestDurable(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.RunDurable(t, func(t *testing.T) memory.Store { return open(t, url, freshSchema(t, url)) })
}

// TestNotifierPair runs the two-process suite on two Stores, each with its
// pool and LISTEN connection, on one schema.
func TestNotifierPair(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.RunNotifierPair(t, func(t *testing.T) (memory.Notifier, memory.Notifier) {
		schema := freshSchema(t, url)
		return open(t, url, schema), open(t, url, schema)
	})
}

// TestEventLogPair runs the two-process suite of event logs on two Stores,
// each with its pool, on one schema: of writers on both, exactly one gets
// each number.
func TestEventLogPair(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.RunEventLogPair(t, func(t *testing.T) (memory.Store, memory.Store) {
		schema := freshSchema(t, url)
		return open(t, url, schema), open(t, url, schema)
	})
}

// heard is what one listener was called with.
type heard chan string

// listenOn listens to channel of st into a buffered channel; the listener
// stops when t ends.
func listenOn(t *testing.T, st *pgstore.Store, channel string) heard {
	t.Helper()
	h := make(heard, 100)
	stop, err := st.Listen(t.Context(), channel, func(p string) { h <- p })
	require.NoError(t, err)
	t.Cleanup(stop)
	return h
}

// next returns the next payload heard, failing t after 10s.
func (h heard) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-h:
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing heard within 10s")
		return ""
	}
}

// TestNotifierSchemas: stores on two schemas of one database do not hear
// each other's notes on a channel of the same name.
func TestNotifierSchemas(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	a, b := open(t, url, freshSchema(t, url)), open(t, url, freshSchema(t, url))
	ha, hb := listenOn(t, a, "c"), listenOn(t, b, "c")
	require.NoError(t, a.Notify(t.Context(), "c", "for a"))
	require.NoError(t, b.Notify(t.Context(), "c", "for b"))
	assert.Equal(t, "for a", ha.next(t))
	assert.Equal(t, "for b", hb.next(t))
	require.NoError(t, a.Notify(t.Context(), "c", "a again"))
	assert.Equal(t, "a again", ha.next(t), "a heard b's note")
	select {
	case p := <-hb:
		t.Errorf("b heard %q from a's schema", p)
	default:
	}
}

// listenBackends returns the pids of the LISTEN connections of stores on
// schema.
func listenBackends(t *testing.T, st *pgstore.Store, schema string) []int32 {
	t.Helper()
	rows, err := st.Pool().Query(t.Context(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid", pgstore.ListenAppName(schema))
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}

// waitBackends waits, for at most 10s, until stores on schema have n
// LISTEN connections, and returns their pids.
func waitBackends(t *testing.T, st *pgstore.Store, schema string, n int) []int32 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := listenBackends(t, st, schema)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d LISTEN connections after 10s, want %d", len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestListenReconnect terminates the LISTEN connection from the server: its
// listeners hear an empty payload once it is back, then notes again.
func TestListenReconnect(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	x, y := listenOn(t, st, "x"), listenOn(t, st, "y")
	require.NoError(t, st.Notify(t.Context(), "x", "before"))
	assert.Equal(t, "before", x.next(t))

	pids := listenBackends(t, st, schema)
	require.Len(t, pids, 1, "one LISTEN connection for two channels")
	var ok bool
	require.NoError(t, st.Pool().QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pids[0]).Scan(&ok))
	require.True(t, ok)

	assert.Equal(t, "", x.next(t), "x: the hint that notes may have been lost")
	assert.Equal(t, "", y.next(t), "y: the hint that notes may have been lost")
	require.NoError(t, st.Notify(t.Context(), "x", "after"))
	require.NoError(t, st.Notify(t.Context(), "y", "after y"))
	assert.Equal(t, "after", x.next(t))
	assert.Equal(t, "after y", y.next(t))
	// The terminated backend leaves pg_stat_activity a moment after its
	// client reconnected: wait for it to go.
	deadline := time.Now().Add(10 * time.Second)
	again := listenBackends(t, st, schema)
	for slices.Contains(again, pids[0]) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		again = listenBackends(t, st, schema)
	}
	require.Len(t, again, 1)
	assert.NotEqual(t, pids[0], again[0], "a new connection")
}

// TestListenConnection: the LISTEN connection is opened by the first Listen,
// is not one of the pool's, is closed when the last listener stops and
// opened again by the next Listen, and is closed by Close with listeners
// still listening.
func TestListenConnection(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			st.Close()
		}
	})
	assert.Empty(t, listenBackends(t, st, schema), "no connection before Listen")

	var stops []func()
	for _, ch := range []string{"a", "a", "b"} {
		stop, err := st.Listen(t.Context(), ch, func(string) {})
		require.NoError(t, err)
		stops = append(stops, stop)
	}
	require.Len(t, listenBackends(t, st, schema), 1)
	assert.Zero(t, st.Pool().Stat().AcquiredConns(), "the LISTEN connection is not held from the pool")
	for _, stop := range stops {
		stop()
	}
	waitBackends(t, st, schema, 0)

	h := listenOn(t, st, "a")
	require.NoError(t, st.Notify(t.Context(), "a", "back"))
	assert.Equal(t, "back", h.next(t))
	other := open(t, url, schema)
	waitBackends(t, other, schema, 1)
	st.Close()
	closed = true
	waitBackends(t, other, schema, 0)
	_, err = st.Listen(t.Context(), "a", func(string) {})
	assert.ErrorContains(t, err, "closed")
}

// TestListenCancelled: a Listen whose context ends while it waits for the
// connection returns the context's error and leaves nothing behind.
func TestListenCancelled(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	st := open(t, url, freshSchema(t, url))
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		stop, err := st.Listen(ctx, "c", func(string) {})
		cancel()
		if err == nil {
			stop()
		}
	}
	h := listenOn(t, st, "c")
	require.NoError(t, st.Notify(t.Context(), "c", "kept"))
	assert.Equal(t, "kept", h.next(t))
}

// TestNotifyPayloadText: PostgreSQL carries text only.
func TestNotifyPayloadText(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	st := open(t, url, freshSchema(t, url))
	for _, p := range []string{"nul \x00", "bad \xff"} {
		assert.ErrorContains(t, st.Notify(t.Context(), "c", p), "UTF-8", "payload %q", p)
	}
}

// TestPgChannel: channel names are identifiers PostgreSQL keeps whole,
// readable when they can be, and different for different pairs.
func TestPgChannel(t *testing.T) {
	long := strings.Repeat("s", 60)
	cases := []struct{ schema, channel string }{
		{"planround", "approvals"},
		{"planround", "Approvals"},
		{"planround_test_abc", "a.b"},
		{"a.b", "c"},
		{"a", "b.c"},
		{long, "x"},
		{long, "y"},
		{"s", "bad \xff"},
		{"s", "nul \x00"},
		{"s", strings.Repeat("é", 40)},
	}
	seen := map[string]string{}
	for _, c := range cases {
		name := pgstore.PgChannel(c.schema, c.channel)
		assert.LessOrEqual(t, len(name), 63, "%q", name)
		assert.True(t, utf8.ValidString(name) && !strings.ContainsRune(name, 0), "%q", name)
		pair := c.schema + " / " + c.channel
		if other, ok := seen[name]; ok {
			t.Errorf("%s and %s share channel %q", other, pair, name)
		}
		seen[name] = pair
	}
	assert.Equal(t, "planround.planround.approvals", pgstore.PgChannel("planround", "approvals"))
	assert.LessOrEqual(t, len(pgstore.ListenAppName(long+long)), 63)
}

// TestDurableTwoStores: of deciders on two stores with a pool each, one
// wins; a lease taken through one is refused through the other, and
// expires by the server's clock.
func TestDurableTwoStores(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	a, b := open(t, url, schema), open(t, url, schema)
	ctx := t.Context()
	require.NoError(t, a.CreateApproval(ctx, memory.Approval{ID: "ap", SessionID: "s", CallID: "c", Tool: "f"}))
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		st := []*pgstore.Store{a, b}[i%2]
		wg.Go(func() {
			_, errs[i] = st.DecideApproval(ctx, "s", "ap", memory.ApprovalDecision{Approved: true, Reason: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
		} else {
			assert.ErrorIs(t, err, memory.ErrDecided, "decider %d", i)
		}
	}
	assert.Equal(t, 1, won, "deciders that won")

	ok, err := a.AcquireLease(ctx, "s", "A", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.AcquireLease(ctx, "s", "B", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	var left float64
	require.NoError(t, a.Pool().QueryRow(ctx, "SELECT (extract(epoch FROM expires_at - now()) * 1e9)::float8 FROM "+
		pgx.Identifier{schema, "leases"}.Sanitize()+" WHERE session_id = 's'").Scan(&left))
	assert.InDelta(t, float64(time.Minute), left, float64(10*time.Second), "expiry set by the server's clock")
}

// TestMigrateVersion1 opens a schema left at version 1, with data, by an
// older version: it is migrated and its data kept.
func TestMigrateVersion1(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	ctx := t.Context()
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	m, err := st.Append(ctx, "s", memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f"}, {ID: "old", Name: "f"}}},
		memory.Message{Role: memory.RoleTool, ToolCallID: "old", Name: "f", Content: "rejected by user"})
	require.NoError(t, err)
	st.Close()
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP TABLE "+q("open_calls")+", "+q("approvals")+", "+q("leases")+", "+q("events")+", "+q("kv")+", "+q("api_calls")+
		"; ALTER TABLE "+q("sessions")+" DROP COLUMN last_event; ALTER TABLE "+q("messages")+" DROP COLUMN outcome, DROP COLUMN cause"+
		"; UPDATE "+q("schema_version")+" SET version = 1")
	require.NoError(t, err)

	st = open(t, url, schema)
	checkVersion(t, url, schema)
	got, err := st.Messages(ctx, "s", true)
	require.NoError(t, err)
	require.Len(t, got, 2)
	// A tool message from before outcomes were kept stays unknown.
	assert.Equal(t, "rejected by user", got[1].Content)
	assert.Empty(t, got[1].Outcome, "an old tool message's outcome is unknown, never a result")
	assert.Empty(t, got[1].Cause)
	require.NoError(t, st.SaveCall(ctx, "s", memory.OpenCall{MessageID: m[0].ID, CallID: "c"}))
	_, err = st.Append(ctx, "s", memory.Message{Role: memory.RoleTool, ToolCallID: "c", Name: "f", Content: "ok"})
	require.NoError(t, err)
	calls, err := st.OpenCalls(ctx, "s")
	require.NoError(t, err)
	assert.Empty(t, calls)
	// The event log of a session from before it starts at 0.
	last, err := st.LastEvent(ctx, "s")
	require.NoError(t, err)
	assert.Zero(t, last)
	require.NoError(t, st.AppendEvents(ctx, "s", memory.Event{Seq: 1, Turn: 1, Kind: "turn_started"}))
}

// downgradeToVersion4 makes the tables of schema, made by the current
// version, those version 4 made, with their rows: approvals without kind,
// key, digest, principal and channel, open calls without state, no kv nor
// api_calls. It returns a connection to write rows as version 4 did, and
// the quoting of a table of the schema.
func downgradeToVersion4(t *testing.T, url, schema string) (*pgx.Conn, func(table string) string) {
	t.Helper()
	ctx := t.Context()
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	// Dropping the columns drops the indexes on them.
	_, err = conn.Exec(ctx, "ALTER TABLE "+q("approvals")+" DROP COLUMN kind, DROP COLUMN call_key, DROP COLUMN digest, DROP COLUMN principal, DROP COLUMN channel"+
		"; DROP INDEX "+q("approvals_decided")+", "+q("approvals_session_decided")+
		"; DROP TABLE "+q("kv")+", "+q("api_calls")+
		"; ALTER TABLE "+q("open_calls")+" DROP COLUMN state"+
		"; UPDATE "+q("schema_version")+" SET version = 4")
	require.NoError(t, err)
	return conn, q
}

// TestMigrateVersion4Approvals opens a schema left at version 4, with
// pending and decided approvals (two pending without a key in one session,
// so the key index must be partial), by an older version: they are kept,
// with the new fields empty, listed by Decisions as of the approval kind,
// decidable with a principal, and beside new keyed records.
func TestMigrateVersion4Approvals(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	ctx := t.Context()
	decidedAt := time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)
	for _, a := range []memory.Approval{
		{ID: "p1", SessionID: "s", CallID: "c1", Tool: "ls", Arguments: json.RawMessage(`{"dir": "/"}`), Round: 1},
		{ID: "p2", SessionID: "s", CallID: "c2", Tool: "ls", Round: 1},
		{ID: "d1", SessionID: "s", CallID: "c3", Tool: "rm", Round: 2, Decided: true, DecidedAt: decidedAt,
			Decision: memory.ApprovalDecision{Approved: true, Reason: "ok", Cause: "user", Arguments: json.RawMessage(`{"f":2}`), Scope: "session"}},
	} {
		require.NoError(t, st.CreateApproval(ctx, a))
	}
	d1, err := st.GetApproval(ctx, "d1")
	require.NoError(t, err)
	st.Close()
	downgradeToVersion4(t, url, schema)

	st = open(t, url, schema)
	checkVersion(t, url, schema)
	pending, err := st.PendingApprovals(ctx, "s")
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, `{"dir": "/"}`, string(pending[0].Arguments))
	list, err := st.Decisions(ctx, memory.DecisionQuery{SessionID: "s", Kind: memory.KindApproval})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, d1, list[0])
	assert.Empty(t, list[0].Decision.Principal)

	d, err := st.DecideApproval(ctx, "s", "p1", memory.ApprovalDecision{Approved: true, Principal: "alice", Channel: "http"})
	require.NoError(t, err)
	assert.Equal(t, "alice", d.Decision.Principal)
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "n1", SessionID: "s", CallID: "c5", Tool: "ls"}))
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "n2", SessionID: "s", CallID: "c6", Tool: "ls", Key: "k"}))
	err = st.CreateApproval(ctx, memory.Approval{ID: "n3", SessionID: "s", CallID: "c7", Tool: "ls", Key: "k"})
	assert.ErrorIs(t, err, memory.ErrExists)
}

// TestMigrateApprovalsFromBeforeDigests: approvals that the version before
// digests and keys (version 4) left pending or decided, each named by its
// call's open-call record, are decided after the upgrade by the digest of
// their stored arguments (a wrong one is refused), and the turn resumed
// after the upgrade, which asks about its calls by key, gets them: the
// pending one to wait for (and its decision), the decided one's decision,
// never a second approval.
func TestMigrateApprovalsFromBeforeDigests(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	ctx := t.Context()
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	m, err := st.Append(ctx, "s", memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{
		{ID: "c1", Name: "run_command", Arguments: json.RawMessage(`{"command":"ls -l"}`)},
		{ID: "c2", Name: "run_command", Arguments: json.RawMessage(`{"command":"rm x"}`)}}})
	require.NoError(t, err)
	msg := m[0].ID
	require.NoError(t, st.SaveCall(ctx, "s", memory.OpenCall{MessageID: msg, CallID: "c1", Round: 1, ApprovalID: "old-pending"}))
	require.NoError(t, st.SaveCall(ctx, "s", memory.OpenCall{MessageID: msg, CallID: "c2", Round: 1, ApprovalID: "old-decided"}))
	st.Close()
	conn, q := downgradeToVersion4(t, url, schema)
	// As version 4 wrote them: the arguments as the model wrote them,
	// neither kind, key nor digest.
	now := time.Now().UnixNano()
	_, err = conn.Exec(ctx, "INSERT INTO "+q("approvals")+` (id, session_id, call_id, tool, arguments, round, created_at, decided, approved, reason, cause, decided_at) VALUES
		('old-pending', 's', 'c1', 'run_command', convert_to('{"command": "ls -l"}', 'UTF8'), 1, $1, false, false, '', '', NULL),
		('old-decided', 's', 'c2', 'run_command', convert_to('{"command": "rm x"}', 'UTF8'), 1, $1, true, false, 'not that', 'user', $1)`, now)
	require.NoError(t, err)

	st = open(t, url, schema)
	checkVersion(t, url, schema)
	upgradetest.ApprovalsFromBeforeDigests(t, st, msg)
}

// TestDecisionsOrderByteWise: Decisions orders ids byte-wise, as Go
// compares strings, and pages by them the same way, also when the id
// column's collation orders otherwise (ICU's, where "b0" sorts before
// "Zz"), as a database created with another default collation would.
func TestDecisionsOrderByteWise(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	ctx := t.Context()
	var icu bool
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu')`).Scan(&icu))
	if !icu {
		t.Skip("the server has no ICU collation und-x-icu")
	}
	_, err := st.Pool().Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema, "approvals"}.Sanitize()+` ALTER COLUMN id TYPE text COLLATE "und-x-icu"`)
	require.NoError(t, err)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"b0", "Zz", "a1", "B2"} {
		require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: id, SessionID: "s", CallID: "c", Tool: "t", Decided: true, DecidedAt: at}))
	}
	ids := func(q memory.DecisionQuery) []string {
		list, err := st.Decisions(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, a := range list {
			out = append(out, a.ID)
		}
		return out
	}
	assert.Equal(t, []string{"B2", "Zz", "a1", "b0"}, ids(memory.DecisionQuery{}))
	assert.Equal(t, []string{"B2", "Zz", "a1", "b0"}, ids(memory.DecisionQuery{SessionID: "s"}))
	assert.Equal(t, []string{"a1", "b0"}, ids(memory.DecisionQuery{Since: at, AfterID: "Zz"}))
	assert.Equal(t, []string{"a1", "b0"}, ids(memory.DecisionQuery{SessionID: "s", Since: at, AfterID: "Zz"}))
}

// TestDecisionsUseIndexes: on a table of many approvals, after ANALYZE,
// a page of Decisions is an index scan of approvals_decided or, for one
// session, approvals_session_decided, in its order: no sort of every
// decision.
func TestDecisionsUseIndexes(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	ctx := t.Context()
	table := pgx.Identifier{schema, "approvals"}.Sanitize()
	_, err := st.Pool().Exec(ctx, `INSERT INTO `+table+` (id, session_id, call_id, tool, round, created_at, decided, decided_at, kind)
		SELECT 'a' || i, 's' || (i % 50), 'c', 't', 1, i, i % 4 <> 0, CASE WHEN i % 4 <> 0 THEN i END, (ARRAY['', 'approval', 'form'])[i % 3 + 1]
		FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, "ANALYZE "+table)
	require.NoError(t, err)
	since := time.Unix(0, 100)
	for _, c := range []struct {
		q     memory.DecisionQuery
		index string
	}{
		{memory.DecisionQuery{Limit: 10}, "approvals_decided"},
		{memory.DecisionQuery{Since: since, AfterID: "a5", Limit: 10}, "approvals_decided"},
		{memory.DecisionQuery{SessionID: "s3", Limit: 10}, "approvals_session_decided"},
		{memory.DecisionQuery{SessionID: "s3", Kind: memory.KindApproval, Since: since, AfterID: "a5", Until: time.Unix(0, 5000), Limit: 10}, "approvals_session_decided"},
	} {
		query, args := pgstore.DecisionsSQL(st, c.q)
		rows, err := st.Pool().Query(ctx, "EXPLAIN "+query, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		assert.Contains(t, plan, "Index Scan using "+c.index+" ", "Decisions(%+v)", c.q)
		assert.NotContains(t, plan, "Sort", "Decisions(%+v)", c.q)
	}
}

// cancelRequestCode opens a PostgreSQL cancel request.
const cancelRequestCode = 80877102

// proxy forwards TCP connections from 127.0.0.1 to a server. Taken down,
// it cuts the connections it holds and closes every new one at once,
// counting them.
type proxy struct {
	target  string
	ln      net.Listener
	refused chan struct{} // a token per connection closed while down
	wg      sync.WaitGroup

	mu     sync.Mutex
	isDown bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{target: target, ln: ln, refused: make(chan struct{}, 1000), conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.isDown
		p.mu.Unlock()
		if down {
			// A cancel request that pgx sends for a broken connection
			// is not an attempt to connect.
			var head [8]byte
			c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := io.ReadFull(c, head[:])
			c.Close()
			if err == nil && binary.BigEndian.Uint32(head[4:]) != cancelRequestCode {
				select {
				case p.refused <- struct{}{}:
				default:
				}
			}
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, s}, {s, c}} {
			p.wg.Go(func() {
				io.Copy(pair[0], pair[1])
				pair[0].Close()
				pair[1].Close()
			})
		}
	}
}

// down cuts every connection and refuses new ones.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// up forwards new connections again.
func (p *proxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

// TestListenServerDown cuts the store's way to the server: while it is
// down, a new Listen fails with the connection's error, the LISTEN
// connection is tried again with growing pauses, and notes sent by others are lost;
// once it is back, the listeners hear the empty payload, then notes again.
func TestListenServerDown(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	p := startProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	u.Host = p.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "5")
	u.RawQuery = q.Encode()

	schema := freshSchema(t, url)
	direct := open(t, url, schema)
	st := open(t, u.String(), schema)
	h := listenOn(t, st, "c")
	require.NoError(t, direct.Notify(t.Context(), "c", "before"))
	assert.Equal(t, "before", h.next(t))

	p.down()
	_, err = st.Listen(t.Context(), "other", func(string) {})
	require.Error(t, err, "Listen while the server cannot be reached")
	require.NoError(t, direct.Notify(t.Context(), "c", "lost"))
	// The loop tries again, waiting longer each time.
	start := time.Now()
	for i := range 4 {
		select {
		case <-p.refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d connection attempts within 10s while the server was down, want 4", i)
		}
	}
	assert.Greater(t, time.Since(start), 100*time.Millisecond, "attempts without growing pauses")
	p.up()
	assert.Equal(t, "", h.next(t), "the hint that notes may have been lost")
	require.NoError(t, direct.Notify(t.Context(), "c", "after"))
	assert.Equal(t, "after", h.next(t))
}

// TestListenAgain stops the only listener of a channel and listens to it
// again at once, many times: every note sent after Listen returned is
// heard, though the loop may be about to UNLISTEN the channel when Listen
// is called.
func TestListenAgain(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	st := open(t, url, freshSchema(t, url))
	listenOn(t, st, "keep") // the connection stays up throughout
	stop := func() {}
	for i := range 100 {
		stop()
		h := make(heard, 10)
		var err error
		stop, err = st.Listen(t.Context(), "x", func(p string) { h <- p })
		require.NoError(t, err)
		want := strconv.Itoa(i)
		require.NoError(t, st.Notify(t.Context(), "x", want))
		select {
		case got := <-h:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			stop()
			t.Fatalf("round %d: the note sent after Listen returned was not heard", i)
		}
	}
	stop()
}

func TestKV(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.RunKV(t, func(t *testing.T) memory.KV { return open(t, url, freshSchema(t, url)) })
}

// TestKVPair: two Stores, each with its pool, on one schema share their
// values, and of swaps through both one wins.
func TestKVPair(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.RunKVPair(t, func(t *testing.T) (a, b memory.KV) {
		schema := freshSchema(t, url)
		return open(t, url, schema), open(t, url, schema)
	})
}

func TestAPILog(t *testing.T) {
	url := server(t)
	storetest.RunAPILog(t, func(t *testing.T, l memory.APILogLimits) memory.APILog {
		st := open(t, url, freshSchema(t, url))
		st.SetAPILogLimits(l)
		return st
	})
}
