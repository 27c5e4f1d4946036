// Package sqlitestore is the embedded default [memory.Store]: one SQLite
// file through the pure-Go driver modernc.org/sqlite (no cgo), safe for
// concurrent sessions, with its schema created and migrated on open.
package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/notehub"
	"github.com/planround/planround/memory/internal/storecol"
)

// Store is a [memory.Store] in one SQLite file, through the pure-Go driver
// modernc.org/sqlite (no cgo). Open one with [Open].
//
// The database runs in WAL mode with foreign keys on and a busy timeout.
// Writes go through a single connection, each in a BEGIN IMMEDIATE
// transaction, so writers in this process queue in Go instead of failing
// with SQLITE_BUSY; reads use a separate pool and do not wait for writers.
// Several processes of one machine may open the same file; the busy
// timeout covers their short write transactions. (A file on a network file
// system is not supported: SQLite's locks do not hold there.)
//
// A Store is safe for concurrent use. Its methods return copies.
//
// # Durable runs
//
// A Store implements [memory.CallLog], [memory.ApprovalStore],
// [memory.Leaser], [memory.Notifier] and [memory.EventLog] for every
// process that opens its file: records, approvals, leases and events are
// rows, decisions and appends of events are taken in one write transaction
// each, and leases expire by this machine's clock.
//
// SQLite has no notifications, so notes travel through the file. A note
// reaches the listeners of the Store that sent it at once, and those of
// the other Stores on the file, in this process or another, within about a
// quarter of a second: a Store that has listeners looks at the file four
// times a second (PRAGMA data_version, which changes when another
// connection commits, read on a connection of its own; the notes are read
// only when it changed). A note is written to the file only when another
// Store listens, so a process alone on its file pays one indexed read per
// note, and a Store without listeners looks at nothing. So a decision
// taken in one process wakes the run that waits for it in another at once,
// and a client that follows a session's events through one process sees
// the turn that another one drives as it goes.
//
// It implements [memory.KV] too, for every process that opens its file: a
// SwapValue compares and writes in one write transaction.
type Store struct {
	path  string
	id    string      // this Store's id: the sender of its notes (see notes.go)
	w     *sql.DB     // one connection: every write goes through it
	r     *sql.DB     // pool of readers
	p     *sql.DB     // one reader connection, for the poller of notes
	notes notehub.Hub // the listeners of Listen
	lis   listeners   // the count of Listens and the poller
	// apiLimits are the bounds of the API log; nil: the defaults.
	apiLimits atomic.Pointer[memory.APILogLimits]
}

// sqliteAppID marks a database file as planround's (PRAGMA application_id):
// "plrn".
const sqliteAppID = 0x706c726e

// sqliteBusyTimeout is how long a connection waits for a lock held by
// another process before it reports SQLITE_BUSY.
const sqliteBusyTimeout = 10 * time.Second

// migration is one schema change: its SQL, then its Go step, when it has
// one, in the same transaction.
type migration struct {
	sql string
	fn  func(ctx context.Context, tx *sql.Tx) error
}

// migrations are the schema changes, in order: migrations[i] takes the
// schema from version i to version i+1 (PRAGMA user_version). Append new
// ones; never edit a released one.
var migrations = []migration{
	// 1: sessions, messages, summaries.
	{sql: `CREATE TABLE sessions (
		id         TEXT PRIMARY KEY,
		title      TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL, -- Unix nanoseconds, UTC
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
		tool_calls   TEXT,             -- JSON array of memory.ToolCall, NULL when none
		tool_call_id TEXT NOT NULL DEFAULT '',
		name         TEXT NOT NULL DEFAULT '',
		hook         INTEGER NOT NULL DEFAULT 0,
		summary_id   INTEGER REFERENCES summaries (id),
		created_at   INTEGER NOT NULL
	) STRICT;
	CREATE INDEX messages_session ON messages (session_id, id);
	CREATE INDEX messages_active ON messages (session_id, id) WHERE summary_id IS NULL;`},
	// 2: tool-call arguments are JSON objects in tool_calls, no longer
	// strings holding JSON text; arguments that were no object are
	// wrapped by memory.ValidArguments.
	{fn: argumentsAsObjects},
	// 3: the images of user messages. Older rows have none.
	{sql: `ALTER TABLE messages ADD COLUMN images TEXT; -- JSON array of memory.Image, NULL when none`},
	// 4: durable runs: open tool calls, approvals and leases.
	{sql: `CREATE TABLE open_calls (
		session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		message_id  INTEGER NOT NULL,
		call_id     TEXT NOT NULL,
		seq         INTEGER NOT NULL, -- first-saved order in the session
		round       INTEGER NOT NULL,
		approval_id TEXT NOT NULL DEFAULT '',
		executing   INTEGER NOT NULL DEFAULT 0,
		partial     TEXT NOT NULL DEFAULT '',
		updated_at  INTEGER NOT NULL,
		PRIMARY KEY (session_id, message_id, call_id)
	) STRICT;
	CREATE INDEX open_calls_call ON open_calls (session_id, call_id);
	CREATE INDEX open_calls_seq ON open_calls (session_id, seq); -- the next seq, without a scan
	CREATE TABLE approvals (
		id                 TEXT PRIMARY KEY,
		session_id         TEXT NOT NULL, -- no foreign key: an approval needs no session row
		call_id            TEXT NOT NULL,
		tool               TEXT NOT NULL,
		arguments          BLOB,          -- kept byte for byte
		round              INTEGER NOT NULL,
		created_at         INTEGER NOT NULL,
		decided            INTEGER NOT NULL DEFAULT 0,
		approved           INTEGER NOT NULL DEFAULT 0,
		reason             TEXT NOT NULL DEFAULT '',
		cause              TEXT NOT NULL DEFAULT '',
		decision_arguments BLOB,
		scope              TEXT NOT NULL DEFAULT '',
		decided_at         INTEGER
	) STRICT;
	CREATE INDEX approvals_session ON approvals (session_id);
	CREATE INDEX approvals_pending ON approvals (created_at, id) WHERE decided = 0;
	CREATE TABLE leases (
		session_id TEXT PRIMARY KEY, -- no foreign key: a lease needs no session row
		holder     TEXT NOT NULL,
		expires_at INTEGER NOT NULL  -- Unix nanoseconds, this machine's clock
	) STRICT;`},
	// 5: sessions' event logs (memory.EventLog). The session's row keeps
	// the number of its last event, trimmed or not: an append checks and
	// sets it in its transaction.
	{sql: `ALTER TABLE sessions ADD COLUMN last_event INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE events (
		session_id TEXT NOT NULL, -- no foreign key: appends check the session's row, DeleteSession deletes the rows
		seq        INTEGER NOT NULL,
		turn       INTEGER NOT NULL,
		kind       TEXT NOT NULL,
		data       BLOB,             -- kept byte for byte; NULL when empty
		created_at INTEGER NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (session_id, seq)
	) STRICT;`},
	// 6: how each tool message's call ended (memory.Message.Outcome and
	// Cause). Older rows stay unknown: ''.
	{sql: `ALTER TABLE messages ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN cause TEXT NOT NULL DEFAULT '';`},
	// 7: what an approval record is and names (memory.Approval Kind, Key
	// and Digest), who decided it and through what (ApprovalDecision
	// Principal and Channel), and the indexes of ApprovalByKey and of
	// Decisions. Older rows keep '' in each: approvals without a key, of
	// the approval kind, decided by nobody named. The key index is partial,
	// so rows without a key never collide.
	{sql: `ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE approvals ADD COLUMN call_key TEXT NOT NULL DEFAULT '';
	ALTER TABLE approvals ADD COLUMN digest TEXT NOT NULL DEFAULT '';
	ALTER TABLE approvals ADD COLUMN principal TEXT NOT NULL DEFAULT '';
	ALTER TABLE approvals ADD COLUMN channel TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX approvals_key ON approvals (session_id, call_key) WHERE call_key <> '';
	CREATE INDEX approvals_decided ON approvals (decided_at, id) WHERE decided = 1;
	CREATE INDEX approvals_session_decided ON approvals (session_id, decided_at, id) WHERE decided = 1;`},
	// 8: the key-value store beside the conversations (memory.KV).
	{sql: `CREATE TABLE kv (
		namespace  TEXT NOT NULL,
		key        TEXT NOT NULL,
		value      BLOB NOT NULL, -- kept byte for byte
		updated_at INTEGER NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (namespace, key)
	) STRICT, WITHOUT ROWID;`},
	// 9: what a running tool saved to take its call up again
	// (memory.OpenCall.State), kept as bytes. Older rows have none.
	{sql: `ALTER TABLE open_calls ADD COLUMN state BLOB NOT NULL DEFAULT x'';`},
	// 10: the log of model calls (memory.APILog). Records belong to no
	// session row: a log outlives the sessions it tells of. started
	// is indexed for the age bound and the Since filter.
	{sql: `CREATE TABLE api_calls (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		session_id    TEXT NOT NULL DEFAULT '',
		round         INTEGER NOT NULL,
		model         TEXT NOT NULL,
		purpose       TEXT NOT NULL,
		request       BLOB,    -- kept byte for byte; NULL when metadata only
		reply         TEXT,    -- JSON of memory.APIReply; NULL when none
		finish_reason TEXT NOT NULL DEFAULT '',
		input_tokens  INTEGER NOT NULL DEFAULT 0,
		output_tokens INTEGER NOT NULL DEFAULT 0,
		status        TEXT NOT NULL,
		error         TEXT NOT NULL DEFAULT '',
		first_token   INTEGER NOT NULL DEFAULT 0, -- nanoseconds
		latency       INTEGER NOT NULL DEFAULT 0, -- nanoseconds
		started       INTEGER NOT NULL            -- Unix nanoseconds, UTC
	) STRICT;
	CREATE INDEX api_calls_started ON api_calls (started);
	CREATE INDEX api_calls_session ON api_calls (session_id, id);`},
	// 11: notes between the Stores on the file (memory.Notifier, see
	// notes.go): the last notes sent, and the Stores that listen.
	{sql: `CREATE TABLE notes (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a poller reads the notes after the last it read
		channel    TEXT NOT NULL,
		payload    BLOB NOT NULL,    -- kept byte for byte
		sender     TEXT NOT NULL,    -- the Store that sent it, and delivered it to its own listeners
		created_at INTEGER NOT NULL  -- Unix nanoseconds, UTC
	) STRICT;
	CREATE TABLE note_listeners (
		store      TEXT PRIMARY KEY, -- a Store whose poller reads the notes
		expires_at INTEGER NOT NULL  -- Unix nanoseconds, this machine's clock
	) STRICT, WITHOUT ROWID;`},
	// 12: the approvals that version 6 and older wrote have no key; the
	// call whose open-call record names one gives it its key, as the agent
	// names its calls (agent.ApprovalRequest.Key: "<message id>/<call
	// id>"), so that the turn resumed after the upgrade finds the approval,
	// pending or decided, instead of asking a second time. A key a record
	// of the session has already is left to that record.
	{sql: `UPDATE approvals SET call_key = k.key FROM (
		SELECT session_id, approval_id, MIN(message_id || '/' || call_id) AS key
		FROM open_calls WHERE approval_id <> '' GROUP BY session_id, approval_id
	) AS k
	WHERE approvals.id = k.approval_id AND approvals.session_id = k.session_id AND approvals.call_key = ''
		AND NOT EXISTS (SELECT 1 FROM approvals AS b WHERE b.session_id = k.session_id AND b.call_key = k.key);`},
}

// argumentsAsObjects rewrites the tool calls of version 1, whose arguments
// were strings, with the arguments as JSON objects.
func argumentsAsObjects(ctx context.Context, tx *sql.Tx) error {
	type row struct {
		id    int64
		calls string
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, tool_calls FROM messages WHERE tool_calls IS NOT NULL")
	if err != nil {
		return err
	}
	var todo []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.calls); err != nil {
			rows.Close()
			return err
		}
		todo = append(todo, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range todo {
		var old []struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(r.calls), &old); err != nil {
			return fmt.Errorf("message %d: tool calls: %w", r.id, err)
		}
		calls := make([]memory.ToolCall, len(old))
		for i, c := range old {
			calls[i] = memory.ToolCall{ID: c.ID, Name: c.Name, Arguments: memory.ValidArguments([]byte(c.Arguments))}
		}
		b, err := storecol.EncodeJSON(calls)
		if err != nil {
			return fmt.Errorf("message %d: tool calls: %w", r.id, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET tool_calls = ? WHERE id = ?", b, r.id); err != nil {
			return err
		}
	}
	return nil
}

// ErrSchemaTooNew is returned (wrapped) by [Open] for a database
// written by a newer version of this package.
var ErrSchemaTooNew = errors.New("sqlitestore: database schema is newer than this version knows")

// Open opens the SQLite database at path, creating the file when it
// does not exist, and brings its schema up to date. Close the store when
// done.
//
// A file that Open creates is readable and writable by its owner only:
// mode 0600 on Unix (less what the umask takes away, as ever), and the
// -wal, -shm and -journal files get the same, as SQLite gives them the
// mode of the database file. A file that exists keeps its mode: Open
// never changes the permissions of a file it did not create, so a
// database that others may read (one made before Open created files
// 0600 was 0644 under the usual umask) stays readable until its owner
// runs chmod 600 on it and on its -wal and -shm files. Open does not
// create the folder the file is in.
//
// A file that is not a SQLite database, or belongs to another application,
// is an error that names the path; the file is left untouched. A database
// whose schema version is newer than this package knows is an error
// wrapping [ErrSchemaTooNew]. Migrations run in one transaction each, so a
// crash never leaves a half-migrated schema.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlitestore: open: want a file path, got %q (use MemStore for an in-memory store)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, err
	}
	// The writer sets the persistent journal mode and begins IMMEDIATE
	// transactions; readers are query-only and begin deferred ones.
	dsn := func(write bool) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		if write {
			q.Add("_pragma", "journal_mode(WAL)")
			q.Add("_pragma", "synchronous(NORMAL)")
			q.Set("_txlock", "immediate")
		} else {
			q.Set("_query_only", "1")
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String()
	}

	st := &Store{path: abs, id: newStoreID()}
	if st.w, err = sql.Open("sqlite", dsn(true)); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	st.w.SetMaxOpenConns(1)
	st.w.SetMaxIdleConns(1)
	st.w.SetConnMaxLifetime(0)
	st.w.SetConnMaxIdleTime(0)
	if err := st.migrateRetrying(ctx); err != nil {
		st.w.Close()
		return nil, err
	}
	if st.r, err = sql.Open("sqlite", dsn(false)); err != nil {
		st.w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	st.r.SetMaxOpenConns(4)
	st.r.SetMaxIdleConns(4)
	if st.p, err = sql.Open("sqlite", dsn(false)); err != nil {
		st.r.Close()
		st.w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	st.p.SetMaxOpenConns(1)
	st.p.SetMaxIdleConns(1)
	return st, nil
}

// prepareFile creates the file at path, with mode 0600, when it does not
// exist, and refuses an existing, non-empty file that does not start with
// the SQLite header, before the driver touches it.
//
// The driver would create a missing file with mode 0644 minus the umask,
// readable by every user of the machine under the usual umask 022.
// O_CREATE without O_EXCL either creates the file or opens the one that
// is there, in one step, so there is no window between a check and the
// creation: an Open in another process at the same moment opens the
// empty file this one created (SQLite takes an empty file for a new
// database), and a file that exists is opened as it is and keeps its
// mode. A symbolic link is followed, as the driver follows it. Between
// this call and the
// driver's open, only someone who may write the folder can replace the
// file, and such a user can read or replace the database anyway.
func prepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			return fmt.Errorf("sqlitestore: open %s: is a directory", path)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fmt.Errorf("sqlitestore: open %s: is a directory", path)
	}
	var hdr [16]byte
	n, err := io.ReadFull(f, hdr[:])
	if n == 0 && (err == io.EOF) {
		return nil // an empty file is a new database to SQLite
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if !bytes.Equal(hdr[:n], []byte("SQLite format 3\x00")) {
		return fmt.Errorf("sqlitestore: open %s: not a SQLite database (left untouched)", path)
	}
	return nil
}

// migrateRetrying runs migrate, again while it fails with SQLITE_BUSY for
// up to sqliteBusyTimeout. Openers that start at the same moment race to put
// a new file into WAL mode when their first connection opens, and SQLite
// answers the losers SQLITE_BUSY at once, without its busy handler.
func (st *Store) migrateRetrying(ctx context.Context) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	wait := 5 * time.Millisecond
	for {
		err := st.migrate(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (5, with any extended
// code).
func isBusy(err error) bool {
	var coder interface{ Code() int }
	return errors.As(err, &coder) && coder.Code()&0xff == 5
}

// migrate brings the schema to len(migrations), one transaction per step.
func (st *Store) migrate(ctx context.Context) error {
	for {
		done, err := st.migrateStep(ctx)
		if err != nil {
			return fmt.Errorf("sqlitestore: open %s: %w", st.path, err)
		}
		if done {
			return nil
		}
	}
}

// migrateStep applies the next migration, if any, and reports whether the
// schema is current.
func (st *Store) migrateStep(ctx context.Context) (done bool, err error) {
	tx, err := st.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE: other openers wait
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var appID, version int64
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return false, err
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, err
	}
	if appID != 0 && appID != sqliteAppID {
		return false, fmt.Errorf("database belongs to another application (application_id %#x)", appID)
	}
	switch {
	case version > int64(len(migrations)):
		return false, fmt.Errorf("%w: schema version %d, this version knows up to %d", ErrSchemaTooNew, version, len(migrations))
	case version == int64(len(migrations)):
		return true, nil
	}
	m := migrations[version]
	if m.sql != "" {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return false, fmt.Errorf("migration %d: %w", version+1, err)
		}
	}
	if m.fn != nil {
		if err := m.fn(ctx, tx); err != nil {
			return false, fmt.Errorf("migration %d: %w", version+1, err)
		}
	}
	// PRAGMA values cannot be bound parameters; both are our own integers.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", version+1, sqliteAppID)); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	return false, tx.Commit()
}

// Path returns the absolute path of the database file.
func (st *Store) Path() string { return st.path }

// Close stops every listener of Listen, waiting for calls of their
// functions in progress to return, and the poller of notes, and closes the
// database. Calls in flight may fail; calls after Close return an error.
func (st *Store) Close() error {
	st.notes.Close()
	st.closeListeners()
	return errors.Join(st.p.Close(), st.r.Close(), st.w.Close())
}

// write runs fn in a write transaction (BEGIN IMMEDIATE on the writer
// connection) and commits when fn succeeds.
func (st *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exists returns nil when the session exists, an error wrapping
// memory.ErrNotFound when it does not.
func exists(ctx context.Context, q querier, op, id string) error {
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM sessions WHERE id = ?", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitestore: %s %q: %w", op, id, memory.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: %s %q: %w", op, id, err)
	}
	return nil
}

// CreateSession implements [memory.Store.CreateSession].
func (st *Store) CreateSession(ctx context.Context, s memory.Session) (memory.Session, error) {
	if err := memory.ValidateSession(s); err != nil {
		return memory.Session{}, fmt.Errorf("sqlitestore: create session: %w", err)
	}
	if s.ID == "" {
		s.ID = memory.NewSessionID()
	}
	s.CreatedAt = storecol.NormTime(s.CreatedAt, storecol.Now())
	s.UpdatedAt = storecol.NormTime(s.UpdatedAt, s.CreatedAt)
	err := st.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			"INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
			s.ID, s.Title, s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return memory.ErrExists
		}
		return nil
	})
	if err != nil {
		return memory.Session{}, fmt.Errorf("sqlitestore: create session %q: %w", s.ID, err)
	}
	return s, nil
}

// Session implements [memory.Store.Session].
func (st *Store) Session(ctx context.Context, id string) (memory.Session, error) {
	s := memory.Session{ID: id}
	var created, updated int64
	err := st.r.QueryRowContext(ctx, "SELECT title, created_at, updated_at FROM sessions WHERE id = ?", id).
		Scan(&s.Title, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Session{}, fmt.Errorf("sqlitestore: session %q: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Session{}, fmt.Errorf("sqlitestore: session %q: %w", id, err)
	}
	s.CreatedAt, s.UpdatedAt = storecol.FromNanos(created), storecol.FromNanos(updated)
	return s, nil
}

// Sessions implements [memory.Store.Sessions].
func (st *Store) Sessions(ctx context.Context) ([]memory.Session, error) {
	rows, err := st.r.QueryContext(ctx, "SELECT id, title, created_at, updated_at FROM sessions ORDER BY updated_at DESC, id")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: sessions: %w", err)
	}
	defer rows.Close()
	out := []memory.Session{}
	for rows.Next() {
		var s memory.Session
		var created, updated int64
		if err := rows.Scan(&s.ID, &s.Title, &created, &updated); err != nil {
			return nil, fmt.Errorf("sqlitestore: sessions: %w", err)
		}
		s.CreatedAt, s.UpdatedAt = storecol.FromNanos(created), storecol.FromNanos(updated)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: sessions: %w", err)
	}
	return out, nil
}

// RenameSession implements [memory.Store.RenameSession].
func (st *Store) RenameSession(ctx context.Context, id, title string) error {
	err := st.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?", title, storecol.Now().UnixNano(), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return memory.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: rename session %q: %w", id, err)
	}
	return nil
}

// DeleteSession implements [memory.Store.DeleteSession]. The session's
// open-call records, approvals, lease and event log go with it.
func (st *Store) DeleteSession(ctx context.Context, id string) error {
	err := st.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "delete session", id); err != nil {
			return err
		}
		// Messages first: they reference summaries. Approvals and leases
		// have no foreign key to the session.
		for _, q := range []string{
			"DELETE FROM open_calls WHERE session_id = ?",
			"DELETE FROM approvals WHERE session_id = ?",
			"DELETE FROM leases WHERE session_id = ?",
			"DELETE FROM api_calls WHERE session_id = ?",
			"DELETE FROM events WHERE session_id = ?",
			"DELETE FROM messages WHERE session_id = ?",
			"DELETE FROM summaries WHERE session_id = ?",
			"DELETE FROM sessions WHERE id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("sqlitestore: delete session %q: %w", id, err)
			}
		}
		return nil
	})
	return err
}

// Append implements [memory.Store.Append]. In the same transaction, a tool
// message removes the session's open-call records of its call
// ([memory.CallLog]).
func (st *Store) Append(ctx context.Context, sessionID string, msgs ...memory.Message) ([]memory.Message, error) {
	if err := memory.ValidateMessages(msgs); err != nil {
		return nil, fmt.Errorf("sqlitestore: append to %q: %w", sessionID, err)
	}
	return st.append(ctx, sessionID, msgs, nil)
}

// append appends valid msgs to the session and, in the same transaction,
// calls also (when not nil) with the appended messages.
func (st *Store) append(ctx context.Context, sessionID string, msgs []memory.Message, also func(*sql.Tx, []memory.Message) error) ([]memory.Message, error) {
	out := memory.CloneMessages(msgs)
	t := storecol.Now()
	// Encoded before the transaction starts.
	calls, images := make([]any, len(out)), make([]any, len(out))
	for i := range out {
		out[i].CreatedAt = storecol.NormTime(out[i].CreatedAt, t)
		if len(out[i].ToolCalls) > 0 {
			b, err := storecol.EncodeJSON(out[i].ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("sqlitestore: append to %q: message %d: %w", sessionID, i, err)
			}
			calls[i] = b
		}
		if len(out[i].Images) > 0 {
			b, err := storecol.EncodeJSON(out[i].Images)
			if err != nil {
				return nil, fmt.Errorf("sqlitestore: append to %q: message %d: %w", sessionID, i, err)
			}
			images[i] = b
		}
	}
	err := st.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE sessions SET updated_at = ? WHERE id = ?", t.UnixNano(), sessionID)
		if err != nil {
			return fmt.Errorf("sqlitestore: append to %q: %w", sessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlitestore: append to %q: %w", sessionID, err)
		} else if n == 0 {
			return fmt.Errorf("sqlitestore: append to %q: %w", sessionID, memory.ErrNotFound)
		}
		if len(out) == 0 {
			return nil
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO messages
			(session_id, role, content, tool_calls, tool_call_id, name, hook, created_at, images, outcome, cause)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
		if err != nil {
			return fmt.Errorf("sqlitestore: append to %q: %w", sessionID, err)
		}
		defer stmt.Close()
		for i, m := range out {
			err := stmt.QueryRowContext(ctx, sessionID, string(m.Role), m.Content, calls[i],
				m.ToolCallID, m.Name, m.Hook, m.CreatedAt.UnixNano(), images[i], string(m.Outcome), m.Cause).Scan(&out[i].ID)
			if err != nil {
				return fmt.Errorf("sqlitestore: append to %q: message %d: %w", sessionID, i, err)
			}
		}
		for _, m := range out {
			if m.Role != memory.RoleTool {
				continue
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM open_calls WHERE session_id = ? AND call_id = ?", sessionID, m.ToolCallID); err != nil {
				return fmt.Errorf("sqlitestore: append to %q: close call %q: %w", sessionID, m.ToolCallID, err)
			}
		}
		if also != nil {
			return also(tx, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Messages implements [memory.Store.Messages].
func (st *Store) Messages(ctx context.Context, sessionID string, all bool) ([]memory.Message, error) {
	// One read transaction: the existence check and the rows see the same
	// snapshot.
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: messages of %q: %w", sessionID, err)
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, "messages of", sessionID); err != nil {
		return nil, err
	}
	q := `SELECT id, role, content, tool_calls, tool_call_id, name, hook, summary_id, created_at, images, outcome, cause
		FROM messages WHERE session_id = ? AND summary_id IS NULL ORDER BY id`
	if all {
		q = strings.Replace(q, " AND summary_id IS NULL", "", 1)
	}
	rows, err := tx.QueryContext(ctx, q, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: messages of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.Message{}
	for rows.Next() {
		var (
			m       memory.Message
			role    string
			calls   sql.NullString
			summary sql.NullInt64
			created int64
			images  sql.NullString
			outcome string
		)
		if err := rows.Scan(&m.ID, &role, &m.Content, &calls, &m.ToolCallID, &m.Name, &m.Hook, &summary, &created, &images, &outcome, &m.Cause); err != nil {
			return nil, fmt.Errorf("sqlitestore: messages of %q: %w", sessionID, err)
		}
		m.Role, m.SummaryID, m.CreatedAt, m.Outcome = memory.Role(role), summary.Int64, storecol.FromNanos(created), memory.Outcome(outcome)
		if calls.Valid {
			if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("sqlitestore: messages of %q: message %d: tool calls: %w", sessionID, m.ID, err)
			}
		}
		if images.Valid {
			if err := json.Unmarshal([]byte(images.String), &m.Images); err != nil {
				return nil, fmt.Errorf("sqlitestore: messages of %q: message %d: images: %w", sessionID, m.ID, err)
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: messages of %q: %w", sessionID, err)
	}
	return out, nil
}

// archiveSQL archives the active messages of a range. It finds them in the
// partial index messages_active, without a look at the archived ones in the
// range: n summaries of one long range cost n log n, not n² (issue 19).
const archiveSQL = "UPDATE messages SET summary_id = ? WHERE session_id = ? AND id BETWEEN ? AND ? AND summary_id IS NULL"

// Summarize implements [memory.Store.Summarize].
func (st *Store) Summarize(ctx context.Context, sessionID string, s memory.Summary) (memory.Summary, error) {
	if err := memory.ValidateSummary(s); err != nil {
		return memory.Summary{}, fmt.Errorf("sqlitestore: summarize %q: %w", sessionID, err)
	}
	t := storecol.Now()
	s.CreatedAt = storecol.NormTime(s.CreatedAt, t)
	err := st.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "summarize", sessionID); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx,
			"INSERT INTO summaries (session_id, content, first_id, last_id, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
			sessionID, s.Content, s.FirstID, s.LastID, s.CreatedAt.UnixNano()).Scan(&s.ID)
		if err != nil {
			return fmt.Errorf("sqlitestore: summarize %q: %w", sessionID, err)
		}
		res, err := tx.ExecContext(ctx, archiveSQL, s.ID, sessionID, s.FirstID, s.LastID)
		if err != nil {
			return fmt.Errorf("sqlitestore: summarize %q: %w", sessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlitestore: summarize %q: %w", sessionID, err)
		} else if n == 0 {
			return fmt.Errorf("sqlitestore: summarize %q: no active message in [%d, %d]", sessionID, s.FirstID, s.LastID)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE sessions SET updated_at = ? WHERE id = ?", t.UnixNano(), sessionID); err != nil {
			return fmt.Errorf("sqlitestore: summarize %q: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return memory.Summary{}, err
	}
	return s, nil
}

// Summaries implements [memory.Store.Summaries].
func (st *Store) Summaries(ctx context.Context, sessionID string) ([]memory.Summary, error) {
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: summaries of %q: %w", sessionID, err)
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, "summaries of", sessionID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx,
		"SELECT id, content, first_id, last_id, created_at FROM summaries WHERE session_id = ? ORDER BY id", sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: summaries of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.Summary{}
	for rows.Next() {
		var s memory.Summary
		var created int64
		if err := rows.Scan(&s.ID, &s.Content, &s.FirstID, &s.LastID, &created); err != nil {
			return nil, fmt.Errorf("sqlitestore: summaries of %q: %w", sessionID, err)
		}
		s.CreatedAt = storecol.FromNanos(created)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: summaries of %q: %w", sessionID, err)
	}
	return out, nil
}

var _ memory.Store = (*Store)(nil)
