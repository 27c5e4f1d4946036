// Package pgstore is a [memory.Store] in PostgreSQL, through
// github.com/jackc/pgx/v5, for services that run several processes (or
// replicas) on one database. Its schema is created and migrated on open.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/storecol"
)

// DefaultSchema is the PostgreSQL schema that holds the store's tables
// unless [WithSchema] names another.
const DefaultSchema = "planround"

// Store is a [memory.Store] in PostgreSQL. Open one with [Open] or [New].
//
// Its tables live in one schema ([DefaultSchema] unless [WithSchema] says
// otherwise): sessions, messages, summaries, schema_version, and those of
// durable runs and event logs. Times are kept as Unix nanoseconds
// (bigint), so they come back exactly as stored; message content is kept
// as bytes (bytea), so any Go string, NUL bytes and invalid UTF-8
// included, comes back unchanged.
//
// Many processes may use the same schema at once. An Append or Summarize
// locks its session's row for its transaction, so appends to one session
// are serialised and their ids increase in append order; ids come from
// sequences and are never reused, though ids of different sessions may
// interleave.
//
// Statements are prepared and cached per connection (pgx's default); behind
// a pooler in transaction mode such as PgBouncer, pass a pool whose
// ConnConfig.DefaultQueryExecMode is pgx.QueryExecModeExec to [New].
//
// A Store is safe for concurrent use. Its methods return copies.
//
// # Durable runs
//
// A Store implements [memory.CallLog], [memory.ApprovalStore],
// [memory.Leaser], [memory.Notifier] and [memory.EventLog] for every
// process on its schema, on any machine: a decision is one UPDATE of a
// pending row, so of concurrent deciders exactly one wins; an append of
// events is one statement that moves the session's last event number only
// from the one before its first event, so of concurrent writers exactly
// one gets each number; leases expire by the database server's clock, so
// replicas whose clocks differ agree on them; notes travel by PostgreSQL's
// NOTIFY and LISTEN, on channels named after the schema, so stores on
// different schemas of one database do not hear each other. See
// [Store.Listen] for the connection that listens.
//
// It implements [memory.KV] too, for every process on its schema: a
// SwapValue is one conditional statement.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // Close closes pool
	schema string
	// Table names, quoted and qualified with the schema.
	sessions, messages, summaries, version string
	openCalls, approvals, leases, events   string
	kv, apiCalls                           string
	// apiLimits are the bounds of the API log; nil: the defaults.
	apiLimits atomic.Pointer[memory.APILogLimits]
	// lis is the LISTEN connection of Listen and its listeners.
	lis listener
}

// Option configures a [Store].
type Option func(*Store)

// WithSchema puts the store's tables in the PostgreSQL schema name
// (created when missing) instead of [DefaultSchema]. Stores on different
// schemas of one database share nothing.
func WithSchema(name string) Option { return func(st *Store) { st.schema = name } }

// ErrSchemaTooNew is returned (wrapped) by [Open] and [New] for a schema
// written by a newer version of this package.
var ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this version knows")

// migrations are the schema changes, in order: migrations[i] takes the
// schema from version i to version i+1. Append new ones; never edit a
// released one. %[1]s is the quoted schema name.
var migrations = []string{
	// 1: sessions, summaries, messages (with images).
	`CREATE TABLE %[1]s.sessions (
		id         text PRIMARY KEY,
		title      text NOT NULL DEFAULT '',
		created_at bigint NOT NULL, -- Unix nanoseconds, UTC
		updated_at bigint NOT NULL
	);
	CREATE INDEX sessions_updated ON %[1]s.sessions (updated_at DESC, id);
	CREATE TABLE %[1]s.summaries (
		id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		session_id text NOT NULL REFERENCES %[1]s.sessions (id) ON DELETE CASCADE,
		content    text NOT NULL,
		first_id   bigint NOT NULL,
		last_id    bigint NOT NULL,
		created_at bigint NOT NULL
	);
	CREATE INDEX summaries_session ON %[1]s.summaries (session_id, id);
	CREATE TABLE %[1]s.messages (
		id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		session_id   text NOT NULL REFERENCES %[1]s.sessions (id) ON DELETE CASCADE,
		role         text NOT NULL,
		content      bytea NOT NULL,  -- the Go string's bytes, exactly
		tool_calls   json,            -- array of memory.ToolCall, NULL when none
		tool_call_id text NOT NULL DEFAULT '',
		name         text NOT NULL DEFAULT '',
		hook         boolean NOT NULL DEFAULT false,
		summary_id   bigint REFERENCES %[1]s.summaries (id),
		created_at   bigint NOT NULL,
		images       json             -- array of memory.Image, NULL when none
	);
	CREATE INDEX messages_session ON %[1]s.messages (session_id, id);
	CREATE INDEX messages_active ON %[1]s.messages (session_id, id) WHERE summary_id IS NULL;`,
	// 2: durable runs: open tool calls, approvals and leases.
	`CREATE TABLE %[1]s.open_calls (
		session_id  text NOT NULL REFERENCES %[1]s.sessions (id) ON DELETE CASCADE,
		message_id  bigint NOT NULL,
		call_id     text NOT NULL,
		seq         bigint GENERATED ALWAYS AS IDENTITY, -- first-saved order
		round       integer NOT NULL,
		approval_id text NOT NULL DEFAULT '',
		executing   boolean NOT NULL DEFAULT false,
		partial     bytea NOT NULL DEFAULT '', -- the Go string's bytes, exactly
		updated_at  bigint NOT NULL,
		PRIMARY KEY (session_id, message_id, call_id)
	);
	CREATE INDEX open_calls_call ON %[1]s.open_calls (session_id, call_id);
	CREATE TABLE %[1]s.approvals (
		id                 text PRIMARY KEY,
		session_id         text NOT NULL, -- no foreign key: an approval needs no session row
		call_id            text NOT NULL,
		tool               text NOT NULL,
		arguments          bytea,         -- kept byte for byte
		round              integer NOT NULL,
		created_at         bigint NOT NULL,
		decided            boolean NOT NULL DEFAULT false,
		approved           boolean NOT NULL DEFAULT false,
		reason             text NOT NULL DEFAULT '',
		cause              text NOT NULL DEFAULT '',
		decision_arguments bytea,
		scope              text NOT NULL DEFAULT '',
		decided_at         bigint
	);
	CREATE INDEX approvals_session ON %[1]s.approvals (session_id);
	CREATE INDEX approvals_pending ON %[1]s.approvals (created_at, id) WHERE NOT decided;
	CREATE TABLE %[1]s.leases (
		session_id text PRIMARY KEY, -- no foreign key: a lease needs no session row
		holder     text NOT NULL,
		expires_at timestamptz NOT NULL -- by the server's clock
	);`,
	// 3: sessions' event logs (memory.EventLog). The session's row keeps
	// the number of its last event, trimmed or not: an append moves it in
	// the statement that inserts the events, under the row's lock. Adding
	// a column with a constant default does not rewrite the table.
	`ALTER TABLE %[1]s.sessions ADD COLUMN last_event bigint NOT NULL DEFAULT 0;
	CREATE TABLE %[1]s.events (
		session_id text NOT NULL, -- no foreign key: appends go through the session's row, DeleteSession deletes the rows
		seq        bigint NOT NULL,
		turn       bigint NOT NULL,
		kind       text NOT NULL,
		data       bytea,           -- kept byte for byte; NULL when empty
		created_at bigint NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (session_id, seq)
	);`,
	// 4: how each tool message's call ended (memory.Message.Outcome and
	// Cause; the cause kept as bytes, as content is). Older rows stay
	// unknown: ''. A constant default does not rewrite the table.
	`ALTER TABLE %[1]s.messages ADD COLUMN outcome text NOT NULL DEFAULT '';
	ALTER TABLE %[1]s.messages ADD COLUMN cause bytea NOT NULL DEFAULT '';`,
	// 5: what an approval record is and names (memory.Approval Kind, Key
	// and Digest), who decided it and through what (ApprovalDecision
	// Principal and Channel), and the indexes of ApprovalByKey and of
	// Decisions. Older rows keep '' in each; the key index is partial, so
	// rows without a key never collide. Ids are ordered byte-wise (COLLATE
	// "C"), as Go compares strings, whatever the database's collation.
	`ALTER TABLE %[1]s.approvals
		ADD COLUMN kind text NOT NULL DEFAULT '',
		ADD COLUMN call_key text NOT NULL DEFAULT '',
		ADD COLUMN digest text NOT NULL DEFAULT '',
		ADD COLUMN principal text NOT NULL DEFAULT '',
		ADD COLUMN channel text NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX approvals_key ON %[1]s.approvals (session_id, call_key) WHERE call_key <> '';
	CREATE INDEX approvals_decided ON %[1]s.approvals (decided_at, id COLLATE "C") WHERE decided;
	CREATE INDEX approvals_session_decided ON %[1]s.approvals (session_id, decided_at, id COLLATE "C") WHERE decided;`,
	// 6: the key-value store beside the conversations (memory.KV). Keys
	// compare byte-wise (COLLATE "C"), as Go compares strings.
	`CREATE TABLE %[1]s.kv (
		namespace  text COLLATE "C" NOT NULL,
		key        text COLLATE "C" NOT NULL,
		value      bytea NOT NULL, -- kept byte for byte
		updated_at bigint NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (namespace, key)
	);`,
	// 7: what a running tool saved to take its call up again
	// (memory.OpenCall.State), kept as bytes. Older rows have none; a
	// constant default does not rewrite the table.
	`ALTER TABLE %[1]s.open_calls ADD COLUMN state bytea NOT NULL DEFAULT '';`,
	// 8: the log of model calls (memory.APILog). Records belong to no
	// session row: a log outlives the sessions it tells of. started is
	// indexed for the age bound and the Since filter. The error text is
	// kept as bytes: a provider's may be any bytes.
	`CREATE TABLE %[1]s.api_calls (
		id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		session_id    text NOT NULL DEFAULT '',
		round         integer NOT NULL,
		model         text NOT NULL,
		purpose       text NOT NULL,
		request       bytea,  -- kept byte for byte; NULL when metadata only
		reply         bytea,  -- JSON of memory.APIReply; NULL when none
		finish_reason text NOT NULL DEFAULT '',
		input_tokens  bigint NOT NULL DEFAULT 0,
		output_tokens bigint NOT NULL DEFAULT 0,
		status        text NOT NULL,
		error         bytea NOT NULL DEFAULT '',
		first_token   bigint NOT NULL DEFAULT 0, -- nanoseconds
		latency       bigint NOT NULL DEFAULT 0, -- nanoseconds
		started       bigint NOT NULL            -- Unix nanoseconds, UTC
	);
	CREATE INDEX api_calls_started ON %[1]s.api_calls (started);
	CREATE INDEX api_calls_session ON %[1]s.api_calls (session_id, id);`,
	// 9: the approvals that version 4 and older wrote have no key; the
	// call whose open-call record names one gives it its key, as the agent
	// names its calls (agent.ApprovalRequest.Key: "<message id>/<call
	// id>"), so that the turn resumed after the upgrade finds the approval,
	// pending or decided, instead of asking a second time. A key a record
	// of the session has already is left to that record.
	`UPDATE %[1]s.approvals AS a SET call_key = k.key FROM (
		SELECT session_id, approval_id, MIN(message_id::text || '/' || call_id) AS key
		FROM %[1]s.open_calls WHERE approval_id <> '' GROUP BY session_id, approval_id
	) AS k
	WHERE a.id = k.approval_id AND a.session_id = k.session_id AND a.call_key = ''
		AND NOT EXISTS (SELECT 1 FROM %[1]s.approvals AS b WHERE b.session_id = k.session_id AND b.call_key = k.key);`,
}

// Open connects to the PostgreSQL database at url (a pgx connection string,
// such as postgres://user@host:5432/db?sslmode=disable) with a pool of its
// own and brings the schema up to date. Close the store when done.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: %w", redact(cfg), err)
	}
	st, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	st.owned = true
	return st, nil
}

// redact names the server of cfg without its password.
func redact(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// New returns a store on pool and brings the schema up to date. The pool
// stays the caller's: [Store.Close] leaves it open.
//
// Migrations run in one transaction each, under a transaction-level
// advisory lock for the schema, so processes that open the same schema at
// once wait for each other and each migration runs exactly once. A schema
// whose version is newer than this package knows is an error wrapping
// [ErrSchemaTooNew].
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	st := &Store{pool: pool, schema: DefaultSchema}
	for _, o := range opts {
		o(st)
	}
	if st.schema == "" {
		return nil, errors.New("pgstore: empty schema name")
	}
	q := func(table string) string { return pgx.Identifier{st.schema, table}.Sanitize() }
	st.sessions, st.messages, st.summaries, st.version = q("sessions"), q("messages"), q("summaries"), q("schema_version")
	st.openCalls, st.approvals, st.leases, st.events = q("open_calls"), q("approvals"), q("leases"), q("events")
	st.kv, st.apiCalls = q("kv"), q("api_calls")
	st.lis.st = st
	if err := st.migrate(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: migrate schema %q: %w", st.schema, err)
	}
	return st, nil
}

// Schema returns the name of the PostgreSQL schema that holds the tables.
func (st *Store) Schema() string { return st.schema }

// Pool returns the connection pool the store uses.
func (st *Store) Pool() *pgxpool.Pool { return st.pool }

// migrate brings the schema to len(migrations) in one transaction that
// holds the schema's advisory lock: a concurrent opener waits, then finds
// the schema current.
func (st *Store) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "planround/pgstore:"+st.schema); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", pgx.Identifier{st.schema}.Sanitize()).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{st.schema}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+st.version+" (version integer NOT NULL)"); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, "SELECT version FROM "+st.version).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.Exec(ctx, "INSERT INTO "+st.version+" (version) VALUES (0)"); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if version > len(migrations) {
			return fmt.Errorf("%w: schema version %d, this version knows up to %d", ErrSchemaTooNew, version, len(migrations))
		}
		if version == len(migrations) {
			return nil
		}
		for ; version < len(migrations); version++ {
			if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[version], pgx.Identifier{st.schema}.Sanitize())); err != nil {
				return fmt.Errorf("migration %d: %w", version+1, err)
			}
		}
		_, err = tx.Exec(ctx, "UPDATE "+st.version+" SET version = $1", version)
		return err
	})
}

// Close stops every listener of [Store.Listen], waiting for calls of their
// functions in progress to return, closes the LISTEN connection, and closes
// the pool when [Open] made it; a pool passed to [New] stays open.
func (st *Store) Close() {
	st.lis.close()
	if st.owned {
		st.pool.Close()
	}
}

// errMissing wraps memory.ErrNotFound.
func errMissing(op, id string) error {
	return fmt.Errorf("pgstore: %s %q: %w", op, id, memory.ErrNotFound)
}

// CreateSession implements [memory.Store.CreateSession].
func (st *Store) CreateSession(ctx context.Context, s memory.Session) (memory.Session, error) {
	if err := memory.ValidateSession(s); err != nil {
		return memory.Session{}, fmt.Errorf("pgstore: create session: %w", err)
	}
	if s.ID == "" {
		s.ID = memory.NewSessionID()
	}
	s.CreatedAt = storecol.NormTime(s.CreatedAt, storecol.Now())
	s.UpdatedAt = storecol.NormTime(s.UpdatedAt, s.CreatedAt)
	tag, err := st.pool.Exec(ctx,
		"INSERT INTO "+st.sessions+" (id, title, created_at, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
		s.ID, s.Title, s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano())
	if err == nil && tag.RowsAffected() == 0 {
		err = memory.ErrExists
	}
	if err != nil {
		return memory.Session{}, fmt.Errorf("pgstore: create session %q: %w", s.ID, err)
	}
	return s, nil
}

// Session implements [memory.Store.Session].
func (st *Store) Session(ctx context.Context, id string) (memory.Session, error) {
	s := memory.Session{ID: id}
	var created, updated int64
	err := st.pool.QueryRow(ctx, "SELECT title, created_at, updated_at FROM "+st.sessions+" WHERE id = $1", id).
		Scan(&s.Title, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Session{}, errMissing("session", id)
	}
	if err != nil {
		return memory.Session{}, fmt.Errorf("pgstore: session %q: %w", id, err)
	}
	s.CreatedAt, s.UpdatedAt = storecol.FromNanos(created), storecol.FromNanos(updated)
	return s, nil
}

// Sessions implements [memory.Store.Sessions].
func (st *Store) Sessions(ctx context.Context) ([]memory.Session, error) {
	rows, err := st.pool.Query(ctx, "SELECT id, title, created_at, updated_at FROM "+st.sessions+" ORDER BY updated_at DESC, id")
	if err != nil {
		return nil, fmt.Errorf("pgstore: sessions: %w", err)
	}
	defer rows.Close()
	out := []memory.Session{}
	for rows.Next() {
		var s memory.Session
		var created, updated int64
		if err := rows.Scan(&s.ID, &s.Title, &created, &updated); err != nil {
			return nil, fmt.Errorf("pgstore: sessions: %w", err)
		}
		s.CreatedAt, s.UpdatedAt = storecol.FromNanos(created), storecol.FromNanos(updated)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: sessions: %w", err)
	}
	return out, nil
}

// RenameSession implements [memory.Store.RenameSession].
func (st *Store) RenameSession(ctx context.Context, id, title string) error {
	tag, err := st.pool.Exec(ctx, "UPDATE "+st.sessions+" SET title = $1, updated_at = $2 WHERE id = $3", title, storecol.Now().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("pgstore: rename session %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return errMissing("rename session", id)
	}
	return nil
}

// DeleteSession implements [memory.Store.DeleteSession]. Its messages,
// summaries and open-call records go with it (ON DELETE CASCADE), and its
// approvals, lease, API log records and event log in the same transaction.
func (st *Store) DeleteSession(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM "+st.sessions+" WHERE id = $1", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrNotFound
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+st.approvals+" WHERE session_id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+st.leases+" WHERE session_id = $1", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+st.apiCalls+" WHERE session_id = $1", id); err != nil {
			return err
		}
		// After the session's row: an append that held it has committed,
		// and a later one finds no row.
		_, err = tx.Exec(ctx, "DELETE FROM "+st.events+" WHERE session_id = $1", id)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: delete session %q: %w", id, err)
	}
	return nil
}

// Append implements [memory.Store.Append]. In the same transaction, a tool
// message removes the session's open-call records of its call
// ([memory.CallLog]).
func (st *Store) Append(ctx context.Context, sessionID string, msgs ...memory.Message) ([]memory.Message, error) {
	if err := memory.ValidateMessages(msgs); err != nil {
		return nil, fmt.Errorf("pgstore: append to %q: %w", sessionID, err)
	}
	return st.append(ctx, sessionID, msgs, nil)
}

// append appends valid msgs to the session and, in the same transaction,
// saves calls (records of the last message's calls) when not empty.
func (st *Store) append(ctx context.Context, sessionID string, msgs []memory.Message, open []memory.OpenCall) ([]memory.Message, error) {
	out := memory.CloneMessages(msgs)
	t := storecol.Now()
	// Encoded before the transaction starts.
	calls, images := make([]*string, len(out)), make([]*string, len(out))
	for i := range out {
		out[i].CreatedAt = storecol.NormTime(out[i].CreatedAt, t)
		if len(out[i].ToolCalls) > 0 {
			b, err := storecol.EncodeJSON(out[i].ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("pgstore: append to %q: message %d: %w", sessionID, i, err)
			}
			calls[i] = &b
		}
		if len(out[i].Images) > 0 {
			b, err := storecol.EncodeJSON(out[i].Images)
			if err != nil {
				return nil, fmt.Errorf("pgstore: append to %q: message %d: %w", sessionID, i, err)
			}
			images[i] = &b
		}
	}
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// The update locks the session's row until commit: appends to one
		// session take their ids one transaction after the other.
		tag, err := tx.Exec(ctx, "UPDATE "+st.sessions+" SET updated_at = $1 WHERE id = $2", t.UnixNano(), sessionID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrNotFound
		}
		if len(out) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		q := `INSERT INTO ` + st.messages + `
			(session_id, role, content, tool_calls, tool_call_id, name, hook, created_at, images, outcome, cause)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`
		for i, m := range out {
			b.Queue(q, sessionID, string(m.Role), []byte(m.Content), calls[i], m.ToolCallID, m.Name, m.Hook,
				m.CreatedAt.UnixNano(), images[i], string(m.Outcome), []byte(m.Cause)).QueryRow(func(row pgx.Row) error {
				if err := row.Scan(&out[i].ID); err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				return nil
			})
		}
		var answered []string
		for _, m := range out {
			if m.Role == memory.RoleTool {
				answered = append(answered, m.ToolCallID)
			}
		}
		if len(answered) > 0 {
			b.Queue("DELETE FROM "+st.openCalls+" WHERE session_id = $1 AND call_id = ANY($2)", sessionID, answered)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil || len(open) == 0 {
			return err
		}
		// The records need the assistant message's id: a second batch.
		b = &pgx.Batch{}
		for _, c := range open {
			c.MessageID = out[len(out)-1].ID
			st.queueSaveCall(b, sessionID, c)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: append to %q: %w", sessionID, err)
	}
	return out, nil
}

// Messages implements [memory.Store.Messages].
func (st *Store) Messages(ctx context.Context, sessionID string, all bool) ([]memory.Message, error) {
	active := " AND summary_id IS NULL"
	if all {
		active = ""
	}
	rows, err := st.pool.Query(ctx, `SELECT id, role, content, tool_calls::text, tool_call_id, name, hook,
			summary_id, created_at, images::text, outcome, cause
		FROM `+st.messages+` WHERE session_id = $1`+active+` ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: messages of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.Message{}
	for rows.Next() {
		var (
			m             memory.Message
			role          string
			content       []byte
			calls, images pgtype.Text
			summary       pgtype.Int8
			created       int64
			outcome       string
			cause         []byte
		)
		if err := rows.Scan(&m.ID, &role, &content, &calls, &m.ToolCallID, &m.Name, &m.Hook, &summary, &created, &images, &outcome, &cause); err != nil {
			return nil, fmt.Errorf("pgstore: messages of %q: %w", sessionID, err)
		}
		m.Role, m.Content, m.SummaryID, m.CreatedAt = memory.Role(role), string(content), summary.Int64, storecol.FromNanos(created)
		m.Outcome, m.Cause = memory.Outcome(outcome), string(cause)
		if calls.Valid {
			if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("pgstore: messages of %q: message %d: tool calls: %w", sessionID, m.ID, err)
			}
		}
		if images.Valid {
			if err := json.Unmarshal([]byte(images.String), &m.Images); err != nil {
				return nil, fmt.Errorf("pgstore: messages of %q: message %d: images: %w", sessionID, m.ID, err)
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: messages of %q: %w", sessionID, err)
	}
	if len(out) == 0 {
		// No message: the session may not exist.
		if _, err := st.Session(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("pgstore: messages of %q: %w", sessionID, errors.Unwrap(err))
		}
	}
	return out, nil
}

// errNoActive is the error of a summary range holding no active message.
var errNoActive = errors.New("no active message in the range")

// Summarize implements [memory.Store.Summarize].
func (st *Store) Summarize(ctx context.Context, sessionID string, s memory.Summary) (memory.Summary, error) {
	if err := memory.ValidateSummary(s); err != nil {
		return memory.Summary{}, fmt.Errorf("pgstore: summarize %q: %w", sessionID, err)
	}
	t := storecol.Now()
	s.CreatedAt = storecol.NormTime(s.CreatedAt, t)
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// Locks the session's row, as Append does.
		tag, err := tx.Exec(ctx, "UPDATE "+st.sessions+" SET updated_at = $1 WHERE id = $2", t.UnixNano(), sessionID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrNotFound
		}
		err = tx.QueryRow(ctx,
			"INSERT INTO "+st.summaries+" (session_id, content, first_id, last_id, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
			sessionID, s.Content, s.FirstID, s.LastID, s.CreatedAt.UnixNano()).Scan(&s.ID)
		if err != nil {
			return err
		}
		tag, err = tx.Exec(ctx,
			"UPDATE "+st.messages+" SET summary_id = $1 WHERE session_id = $2 AND id BETWEEN $3 AND $4 AND summary_id IS NULL",
			s.ID, sessionID, s.FirstID, s.LastID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w [%d, %d]", errNoActive, s.FirstID, s.LastID)
		}
		return nil
	})
	if err != nil {
		return memory.Summary{}, fmt.Errorf("pgstore: summarize %q: %w", sessionID, err)
	}
	return s, nil
}

// Summaries implements [memory.Store.Summaries].
func (st *Store) Summaries(ctx context.Context, sessionID string) ([]memory.Summary, error) {
	rows, err := st.pool.Query(ctx, `SELECT m.id, m.content, m.first_id, m.last_id, m.created_at
		FROM `+st.sessions+` s LEFT JOIN `+st.summaries+` m ON m.session_id = s.id
		WHERE s.id = $1 ORDER BY m.id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: summaries of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.Summary{}
	found := false
	for rows.Next() {
		found = true
		var (
			id, first, last, created *int64
			content                  *string
		)
		if err := rows.Scan(&id, &content, &first, &last, &created); err != nil {
			return nil, fmt.Errorf("pgstore: summaries of %q: %w", sessionID, err)
		}
		if id == nil {
			continue
		}
		out = append(out, memory.Summary{ID: *id, Content: *content, FirstID: *first, LastID: *last, CreatedAt: storecol.FromNanos(*created)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: summaries of %q: %w", sessionID, err)
	}
	if !found {
		return nil, errMissing("summaries of", sessionID)
	}
	return out, nil
}

var _ memory.Store = (*Store)(nil)
