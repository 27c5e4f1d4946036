package sqlitestore_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
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
const currentVersion = 7
