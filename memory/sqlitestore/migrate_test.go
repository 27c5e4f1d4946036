package sqlitestore_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/upgradetest"
	"github.com/planround/planround/memory/sqlitestore"
)

// schemaV1 is the schema the first released version of the store wrote
// (user_version 1), kept here as the released code left it: databases in
// users' hands look like this.
const schemaV1 = `CREATE TABLE sessions (
		id         TEXT PRIMARY KEY,
		title      TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	) STRICT;
	CREATE INDEX sessions_updated ON sessions (updated_at DESC, id);
	CREATE TABLE summaries (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		content    TEXT NOT NULL,
		first_id   INTEGER NOT NULL,
		last_id    INTEGER NOT NULL,
		created_at INTEGER NOT NULL
	) STRICT;
	CREATE INDEX summaries_session ON summaries (session_id, id);
	CREATE TABLE messages (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		role         TEXT NOT NULL,
		content      TEXT NOT NULL,
		tool_calls   TEXT,
		tool_call_id TEXT NOT NULL DEFAULT '',
		name         TEXT NOT NULL DEFAULT '',
		hook         INTEGER NOT NULL DEFAULT 0,
		summary_id   INTEGER REFERENCES summaries (id),
		created_at   INTEGER NOT NULL
	) STRICT;
	CREATE INDEX messages_session ON messages (session_id, id);
	CREATE INDEX messages_active ON messages (session_id, id) WHERE summary_id IS NULL;
	PRAGMA user_version = 1;
	PRAGMA application_id = 1886155374;`

// TestOpenMigratesVersion1: a database written by the first version, whose
// tool-call arguments are JSON strings (some of them, from before the agent
// wrapped what the model got wrong, not even objects), opens and reads as
// the current version writes: every argument a JSON object, the rest of
// each message unchanged, and the database writable.
func TestOpenMigratesVersion1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v1.db")
	db := rawDB(t, path)
	_, err := db.Exec(schemaV1)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 'old', 1, 2)`)
	require.NoError(t, err)
	rows := []struct {
		role, content string
		calls         any
		callID, name  string
	}{
		{"user", "weather?", nil, "", ""},
		{"assistant", "checking <need_tool>", `[{"id":"c1","name":"get_weather","arguments":"{\"city\": \"Paris\"}"},` +
			`{"id":"c2","name":"get_weather","arguments":"{\"city\": \"Par"},` +
			`{"id":"c3","name":"ls","arguments":""}]`, "", ""},
		{"tool", "sunny", nil, "c1", "get_weather"},
		{"tool", "bad arguments", nil, "c2", "get_weather"},
		{"tool", "a.txt", nil, "c3", "ls"},
	}
	for i, r := range rows {
		_, err = db.Exec(`INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, name, created_at) VALUES ('s', ?, ?, ?, ?, ?, ?)`,
			r.role, r.content, r.calls, r.callID, r.name, 10+i)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	st := openSQLite(t, path)
	got, err := st.Messages(ctx, "s", true)
	require.NoError(t, err)
	require.Len(t, got, len(rows))
	for i, m := range got {
		assert.Equal(t, rows[i].content, m.Content, "message %d", i)
		assert.Equal(t, memory.Role(rows[i].role), m.Role, "message %d", i)
		assert.Equal(t, rows[i].callID, m.ToolCallID, "message %d", i)
	}
	calls := got[1].ToolCalls
	require.Len(t, calls, 3)
	wantArgs := []string{`{"city":"Paris"}`, `{"invalid_arguments":"{\"city\": \"Par"}`, `{}`}
	for i, c := range calls {
		assert.JSONEq(t, wantArgs[i], string(c.Arguments), "call %s", c.ID)
		assert.True(t, memory.IsObject(c.Arguments), "call %s: %s", c.ID, c.Arguments)
	}
	// The history reads back through JSON as objects, as a host shows it.
	b, err := json.Marshal(got[1])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"arguments":{"city":"Paris"}`)

	for i, m := range got {
		assert.Nil(t, m.Images, "message %d: rows of version 1 have no images", i)
		// How their calls ended was not kept: unknown, never a result.
		assert.Empty(t, m.Outcome, "message %d: an old row's outcome is unknown", i)
		assert.Empty(t, m.Cause, "message %d", i)
	}

	// The database is current and writable, images included.
	img := memory.Image{MIMEType: "image/png", Data: []byte("\x89PNG")}
	_, err = st.Append(ctx, "s", memory.Message{Role: memory.RoleUser, Content: "and this?", Images: []memory.Image{img}})
	require.NoError(t, err)
	got, err = st.Messages(ctx, "s", false)
	require.NoError(t, err)
	assert.Equal(t, []memory.Image{img}, got[len(got)-1].Images)
	var version int
	require.NoError(t, rawDB(t, path).QueryRow("PRAGMA user_version").Scan(&version))
	assert.Equal(t, currentVersion, version)

	// The tables of durable runs are there and work with the old rows.
	require.NoError(t, st.SaveCall(ctx, "s", memory.OpenCall{MessageID: got[1].ID, CallID: "c9"}))
	open, err := st.OpenCalls(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, open, 1)
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "ap", SessionID: "s", CallID: "c9", Tool: "ls"}))
	ok, err := st.AcquireLease(ctx, "s", "me", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	// So is the event log: an old session's starts at 0.
	last, err := st.LastEvent(ctx, "s")
	require.NoError(t, err)
	assert.Zero(t, last)
	require.NoError(t, st.AppendEvents(ctx, "s", memory.Event{Seq: 1, Turn: 1, Kind: "turn_started"}))
	require.NoError(t, st.DeleteSession(ctx, "s"))
	_, err = st.GetApproval(ctx, "ap")
	assert.ErrorIs(t, err, memory.ErrNotFound)
}

// currentVersion is the schema version this version of the store writes.
const currentVersion = 12

// TestOpenMigratesVersion6: a database of version 6, whose approvals have
// no kind, key, digest, principal or channel (several pending ones in one
// session, decided ones, one of a session without a row), opens at the
// current version with every approval kept as it was and the new fields
// empty; the old records are listed by Decisions and can be decided, and
// new records with keys can be created beside them.
func TestOpenMigratesVersion6(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v6.db")
	db := rawDB(t, path)
	require.NoError(t, sqlitestore.MigrateTo(ctx, db, 6))
	_, err := db.Exec(`INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 'old', 1, 2)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO approvals (id, session_id, call_id, tool, arguments, round, created_at,
			decided, approved, reason, cause, decision_arguments, scope, decided_at) VALUES
		('p1', 's', 'c1', 'ls', CAST('{"dir": "/"}' AS BLOB), 1, 100, 0, 0, '', '', NULL, '', NULL),
		('p2', 's', 'c2', 'ls', NULL, 1, 101, 0, 0, '', '', NULL, '', NULL),
		('d1', 's', 'c3', 'rm', CAST('{"f":1}' AS BLOB), 2, 102, 1, 1, 'ok', 'user', CAST('{"f":2}' AS BLOB), 'session', 500),
		('d2', 'no-row', 'c4', 'rm', NULL, 1, 103, 1, 0, 'no', 'timeout', NULL, '', 400)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st := openSQLite(t, path)
	var version int
	require.NoError(t, rawDB(t, path).QueryRow("PRAGMA user_version").Scan(&version))
	assert.Equal(t, currentVersion, version)

	p1, err := st.GetApproval(ctx, "p1")
	require.NoError(t, err)
	assert.Equal(t, memory.Approval{ID: "p1", SessionID: "s", CallID: "c1", Tool: "ls", Arguments: json.RawMessage(`{"dir": "/"}`),
		Round: 1, CreatedAt: time.Unix(0, 100).UTC()}, p1)
	pending, err := st.PendingApprovals(ctx, "s")
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, []string{"p1", "p2"}, []string{pending[0].ID, pending[1].ID})

	// Old decisions are in the audit, as decisions of the approval kind
	// by nobody named.
	list, err := st.Decisions(ctx, memory.DecisionQuery{Kind: memory.KindApproval})
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "d2", list[0].ID)
	assert.Equal(t, memory.Approval{ID: "d1", SessionID: "s", CallID: "c3", Tool: "rm", Arguments: json.RawMessage(`{"f":1}`), Round: 2,
		CreatedAt: time.Unix(0, 102).UTC(), Decided: true, DecidedAt: time.Unix(0, 500).UTC(),
		Decision: memory.ApprovalDecision{Approved: true, Reason: "ok", Cause: "user", Arguments: json.RawMessage(`{"f":2}`), Scope: "session"}}, list[1])

	// An old pending record is decided with its principal; records without
	// a key never collide, and keys work beside them.
	d, err := st.DecideApproval(ctx, "s", "p1", memory.ApprovalDecision{Approved: true, Principal: "alice", Channel: "http"})
	require.NoError(t, err)
	assert.Equal(t, "alice", d.Decision.Principal)
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "n1", SessionID: "s", CallID: "c5", Tool: "ls"}))
	require.NoError(t, st.CreateApproval(ctx, memory.Approval{ID: "n2", SessionID: "s", CallID: "c6", Tool: "ls", Key: "k", Kind: memory.KindForm}))
	err = st.CreateApproval(ctx, memory.Approval{ID: "n3", SessionID: "s", CallID: "c7", Tool: "ls", Key: "k"})
	assert.ErrorIs(t, err, memory.ErrExists)
	_, err = st.ApprovalByKey(ctx, "s", "")
	assert.ErrorIs(t, err, memory.ErrNotFound)
	got, err := st.ApprovalByKey(ctx, "s", "k")
	require.NoError(t, err)
	assert.Equal(t, "n2", got.ID)
}

// TestOpenMigratesOpenCallState: a database of the version before open
// calls had a state (version 8) opens at the current version with its
// open-call records kept, each with an empty state, and a state saved then
// reads back.
func TestOpenMigratesOpenCallState(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	db := rawDB(t, path)
	require.NoError(t, sqlitestore.MigrateTo(ctx, db, 8))
	_, err := db.Exec(`INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 'old', 1, 2)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO messages (session_id, role, content, tool_calls, created_at)
		VALUES ('s', 'assistant', '', '[{"id":"c1","name":"ls","arguments":{}}]', 3)`)
	require.NoError(t, err)
	var msg int64
	require.NoError(t, db.QueryRow(`SELECT id FROM messages`).Scan(&msg))
	_, err = db.Exec(`INSERT INTO open_calls (session_id, message_id, call_id, seq, round, approval_id, executing, partial, updated_at)
		VALUES ('s', ?, 'c1', 1, 1, '', 1, 'half', 4)`, msg)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st := openSQLite(t, path)
	calls, err := st.OpenCalls(ctx, "s")
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, memory.OpenCall{MessageID: msg, CallID: "c1", Round: 1, Executing: true, Partial: "half", UpdatedAt: time.Unix(0, 4).UTC()}, calls[0])
	calls[0].State = `{"task":"t-1"}`
	require.NoError(t, st.SaveCall(ctx, "s", calls[0]))
	calls, err = st.OpenCalls(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, `{"task":"t-1"}`, calls[0].State)
}

// TestOpenMigratesApprovalsFromBeforeDigests: approvals that the version
// before digests and keys (version 6) left pending or decided, each named
// by its call's open-call record, are decided after the upgrade by the
// digest of their stored arguments (a wrong one is refused), and the turn
// resumed after the upgrade, which asks about its calls by key, gets them:
// the pending one to wait for (and its decision), the decided one's
// decision, never a second approval.
func TestOpenMigratesApprovalsFromBeforeDigests(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v6.db")
	db := rawDB(t, path)
	require.NoError(t, sqlitestore.MigrateTo(ctx, db, 6))
	_, err := db.Exec(`INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 'old', 1, 2)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO messages (session_id, role, content, tool_calls, created_at) VALUES ('s', 'assistant', '',
		'[{"id":"c1","name":"run_command","arguments":{"command":"ls -l"}},{"id":"c2","name":"run_command","arguments":{"command":"rm x"}}]', 3)`)
	require.NoError(t, err)
	var msg int64
	require.NoError(t, db.QueryRow(`SELECT id FROM messages`).Scan(&msg))
	// As version 6 wrote them: the arguments as the model wrote them,
	// neither kind, key nor digest.
	now := time.Now().UnixNano()
	_, err = db.Exec(`INSERT INTO open_calls (session_id, message_id, call_id, seq, round, approval_id, updated_at) VALUES
		('s', ?1, 'c1', 1, 1, 'old-pending', ?2), ('s', ?1, 'c2', 2, 1, 'old-decided', ?2)`, msg, now)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO approvals (id, session_id, call_id, tool, arguments, round, created_at, decided, approved, reason, cause, decided_at) VALUES
		('old-pending', 's', 'c1', 'run_command', CAST('{"command": "ls -l"}' AS BLOB), 1, ?1, 0, 0, '', '', NULL),
		('old-decided', 's', 'c2', 'run_command', CAST('{"command": "rm x"}' AS BLOB), 1, ?1, 1, 0, 'not that', 'user', ?1)`, now)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st := openSQLite(t, path)
	upgradetest.ApprovalsFromBeforeDigests(t, st, msg)
}
