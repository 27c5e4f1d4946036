package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/storecol"
)

// SaveCall implements [memory.CallLog.SaveCall].
func (st *Store) SaveCall(ctx context.Context, sessionID string, c memory.OpenCall) error {
	if err := memory.ValidateOpenCall(c); err != nil {
		return fmt.Errorf("pgstore: save call of %q: %w", sessionID, err)
	}
	if len(c.Arguments) > 0 {
		return st.saveCallEdited(ctx, sessionID, c)
	}
	tag, err := st.pool.Exec(ctx, st.saveCallSQL(), st.saveCallArgs(sessionID, c)...)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: deleted meanwhile
		return errMissing("save call of", sessionID)
	}
	if err != nil {
		return fmt.Errorf("pgstore: save call %q of %q: %w", c.CallID, sessionID, err)
	}
	if tag.RowsAffected() == 0 {
		return errMissing("save call of", sessionID)
	}
	return nil
}

// saveCallEdited saves c and writes c.Arguments over the arguments of the
// call in its stored assistant message, in one transaction. The message's
// row is locked while its calls are rewritten.
func (st *Store) saveCallEdited(ctx context.Context, sessionID string, c memory.OpenCall) error {
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var calls pgtype.Text
		err := tx.QueryRow(ctx, "SELECT tool_calls::text FROM "+st.messages+" WHERE id = $1 AND session_id = $2 FOR UPDATE",
			c.MessageID, sessionID).Scan(&calls)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !calls.Valid) {
			if _, serr := st.Session(ctx, sessionID); errors.Is(serr, memory.ErrNotFound) {
				return memory.ErrNotFound
			}
			return fmt.Errorf("no message %d with calls in the session", c.MessageID)
		}
		if err != nil {
			return err
		}
		edited, err := storecol.SetArguments([]byte(calls.String), c.CallID, c.Arguments)
		if err != nil {
			return fmt.Errorf("message %d: %w", c.MessageID, err)
		}
		if _, err := tx.Exec(ctx, "UPDATE "+st.messages+" SET tool_calls = $1 WHERE id = $2", edited, c.MessageID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, st.saveCallSQL(), st.saveCallArgs(sessionID, c)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: save call %q of %q: %w", c.CallID, sessionID, err)
	}
	return nil
}

// AppendCalls implements [memory.CallLog.AppendCalls].
func (st *Store) AppendCalls(ctx context.Context, sessionID string, calls []memory.OpenCall, msgs ...memory.Message) ([]memory.Message, error) {
	if err := memory.ValidateAppendCalls(calls, msgs); err != nil {
		return nil, fmt.Errorf("pgstore: append calls to %q: %w", sessionID, err)
	}
	return st.append(ctx, sessionID, msgs, calls)
}

// saveCallSQL inserts or replaces an open-call record. The row comes from
// the session's: no session, no row. seq is taken on insert and kept on
// replace: the first-saved order.
func (st *Store) saveCallSQL() string {
	return `INSERT INTO ` + st.openCalls + `
			(session_id, message_id, call_id, round, approval_id, executing, partial, updated_at, state)
		SELECT id, $2, $3, $4, $5, $6, $7, $8, $9 FROM ` + st.sessions + ` WHERE id = $1
		ON CONFLICT (session_id, message_id, call_id) DO UPDATE SET
			round = excluded.round, approval_id = excluded.approval_id, executing = excluded.executing,
			partial = excluded.partial, updated_at = excluded.updated_at, state = excluded.state`
}

// saveCallArgs are the arguments of saveCallSQL.
func (st *Store) saveCallArgs(sessionID string, c memory.OpenCall) []any {
	return []any{sessionID, c.MessageID, c.CallID, c.Round, c.ApprovalID, c.Executing, []byte(c.Partial), storecol.Now().UnixNano(), []byte(c.State)}
}

// queueSaveCall queues the save of c in b.
func (st *Store) queueSaveCall(b *pgx.Batch, sessionID string, c memory.OpenCall) {
	b.Queue(st.saveCallSQL(), st.saveCallArgs(sessionID, c)...)
}

// OpenCalls implements [memory.CallLog.OpenCalls].
func (st *Store) OpenCalls(ctx context.Context, sessionID string) ([]memory.OpenCall, error) {
	rows, err := st.pool.Query(ctx, `SELECT c.message_id, c.call_id, c.round, c.approval_id, c.executing, c.partial, c.updated_at, c.state
		FROM `+st.sessions+` s LEFT JOIN `+st.openCalls+` c ON c.session_id = s.id
		WHERE s.id = $1 ORDER BY c.message_id, c.seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open calls of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.OpenCall{}
	found := false
	for rows.Next() {
		found = true
		var (
			msg, updated     pgtype.Int8
			round            pgtype.Int4
			callID, approval pgtype.Text
			executing        pgtype.Bool
			partial, state   []byte
		)
		if err := rows.Scan(&msg, &callID, &round, &approval, &executing, &partial, &updated, &state); err != nil {
			return nil, fmt.Errorf("pgstore: open calls of %q: %w", sessionID, err)
		}
		if !msg.Valid {
			continue // the session, without records
		}
		out = append(out, memory.OpenCall{MessageID: msg.Int64, CallID: callID.String, Round: int(round.Int32),
			ApprovalID: approval.String, Executing: executing.Bool, Partial: string(partial), State: string(state), UpdatedAt: storecol.FromNanos(updated.Int64)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: open calls of %q: %w", sessionID, err)
	}
	if !found {
		return nil, errMissing("open calls of", sessionID)
	}
	return out, nil
}

// OpenSessions implements [memory.CallLog.OpenSessions].
func (st *Store) OpenSessions(ctx context.Context) ([]string, error) {
	rows, err := st.pool.Query(ctx, "SELECT DISTINCT session_id FROM "+st.openCalls)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: open sessions: %w", err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// approvalCols are the columns scanApproval reads, in its order.
const approvalCols = `id, session_id, call_id, tool, arguments, round, created_at, kind, call_key, digest,
	decided, approved, reason, cause, decision_arguments, scope, decided_at, principal, channel`

// scanApproval reads one row of approvalCols.
func scanApproval(row pgx.Row) (memory.Approval, error) {
	var (
		a                  memory.Approval
		created            int64
		round              int32
		decidedAt          pgtype.Int8
		args, decisionArgs []byte
	)
	err := row.Scan(&a.ID, &a.SessionID, &a.CallID, &a.Tool, &args, &round, &created, &a.Kind, &a.Key, &a.Digest,
		&a.Decided, &a.Decision.Approved, &a.Decision.Reason, &a.Decision.Cause, &decisionArgs, &a.Decision.Scope, &decidedAt,
		&a.Decision.Principal, &a.Decision.Channel)
	if err != nil {
		return memory.Approval{}, err
	}
	a.Round, a.CreatedAt = int(round), storecol.FromNanos(created)
	if len(args) > 0 {
		a.Arguments = args
	}
	if len(decisionArgs) > 0 {
		a.Decision.Arguments = decisionArgs
	}
	if decidedAt.Valid {
		a.DecidedAt = storecol.FromNanos(decidedAt.Int64)
	}
	return a, nil
}

// queryApprovals runs q, which selects approvalCols, and reads its rows.
func (st *Store) queryApprovals(ctx context.Context, q string, args ...any) ([]memory.Approval, error) {
	rows, err := st.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Approval, error) { return scanApproval(row) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []memory.Approval{}
	}
	return out, nil
}

// bytea returns b as a column value: NULL when empty.
func bytea(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// CreateApproval implements [memory.ApprovalStore.CreateApproval]. The
// unique index approvals_key refuses a second record of a session's key,
// also when two processes create it at once.
func (st *Store) CreateApproval(ctx context.Context, a memory.Approval) error {
	if err := memory.ValidateApproval(a); err != nil {
		return fmt.Errorf("pgstore: create approval: %w", err)
	}
	t := storecol.Now()
	a.CreatedAt = storecol.NormTime(a.CreatedAt, t)
	var decidedAt *int64 // NULL while pending
	if a.Decided {
		n := storecol.NormTime(a.DecidedAt, t).UnixNano()
		decidedAt = &n
	} else {
		a.Decision = memory.ApprovalDecision{}
	}
	d := a.Decision
	tag, err := st.pool.Exec(ctx, `INSERT INTO `+st.approvals+` (id, session_id, call_id, tool, arguments, round, created_at,
			kind, call_key, digest, decided, approved, reason, cause, decision_arguments, scope, decided_at, principal, channel)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) ON CONFLICT (id) DO NOTHING`,
		a.ID, a.SessionID, a.CallID, a.Tool, bytea(a.Arguments), a.Round, a.CreatedAt.UnixNano(),
		a.Kind, a.Key, a.Digest, a.Decided, d.Approved, d.Reason, d.Cause, bytea(d.Arguments), d.Scope, decidedAt, d.Principal, d.Channel)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "approvals_key" { // unique_violation
		return fmt.Errorf("pgstore: create approval %q: session %q has key %q already: %w", a.ID, a.SessionID, a.Key, memory.ErrExists)
	}
	if err == nil && tag.RowsAffected() == 0 {
		err = memory.ErrExists
	}
	if err != nil {
		return fmt.Errorf("pgstore: create approval %q: %w", a.ID, err)
	}
	return nil
}

// DecideApproval implements [memory.ApprovalStore.DecideApproval]. The
// decision is one UPDATE of the row while it is pending: concurrent
// deciders, in any process, wait for each other's row lock, and the ones
// that follow the first find the row decided. When nothing was updated, a
// second statement, which sees what the winner committed, says why.
func (st *Store) DecideApproval(ctx context.Context, sessionID, id string, d memory.ApprovalDecision) (memory.Approval, error) {
	// A second round is needed only when the approval was created between
	// the two statements.
	for range 3 {
		a, err := scanApproval(st.pool.QueryRow(ctx, `UPDATE `+st.approvals+` SET decided = true, approved = $1,
				reason = $2, cause = $3, decision_arguments = $4, scope = $5, decided_at = $6, principal = $7, channel = $8
			WHERE id = $9 AND session_id = $10 AND NOT decided
			RETURNING `+approvalCols,
			d.Approved, d.Reason, d.Cause, bytea(d.Arguments), d.Scope, storecol.Now().UnixNano(), d.Principal, d.Channel, id, sessionID))
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return memory.Approval{}, fmt.Errorf("pgstore: decide approval %q: %w", id, err)
		}
		a, err = scanApproval(st.pool.QueryRow(ctx, "SELECT "+approvalCols+" FROM "+st.approvals+" WHERE id = $1", id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return memory.Approval{}, fmt.Errorf("pgstore: decide approval %q: %w", id, memory.ErrNotFound)
		case err != nil:
			return memory.Approval{}, fmt.Errorf("pgstore: decide approval %q: %w", id, err)
		case a.SessionID != sessionID:
			return memory.Approval{}, fmt.Errorf("pgstore: decide approval %q: %w", id, memory.ErrWrongSession)
		case a.Decided:
			return a, fmt.Errorf("pgstore: decide approval %q: %w", id, memory.ErrDecided)
		}
	}
	return memory.Approval{}, fmt.Errorf("pgstore: decide approval %q: the approval changed under three attempts", id)
}

// GetApproval implements [memory.ApprovalStore.GetApproval].
func (st *Store) GetApproval(ctx context.Context, id string) (memory.Approval, error) {
	a, err := scanApproval(st.pool.QueryRow(ctx, "SELECT "+approvalCols+" FROM "+st.approvals+" WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = memory.ErrNotFound
	}
	if err != nil {
		return memory.Approval{}, fmt.Errorf("pgstore: approval %q: %w", id, err)
	}
	return a, nil
}

// ApprovalByKey implements [memory.ApprovalStore.ApprovalByKey], through
// the index approvals_key.
func (st *Store) ApprovalByKey(ctx context.Context, sessionID, key string) (memory.Approval, error) {
	a, err := scanApproval(st.pool.QueryRow(ctx, "SELECT "+approvalCols+" FROM "+st.approvals+
		" WHERE session_id = $1 AND call_key = $2 AND call_key <> ''", sessionID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		err = memory.ErrNotFound
	}
	if err != nil {
		return memory.Approval{}, fmt.Errorf("pgstore: approval of %q with key %q: %w", sessionID, key, err)
	}
	return a, nil
}

// PendingApprovals implements [memory.ApprovalStore.PendingApprovals].
func (st *Store) PendingApprovals(ctx context.Context, sessionID string) ([]memory.Approval, error) {
	q, args := "SELECT "+approvalCols+" FROM "+st.approvals+" WHERE NOT decided ORDER BY created_at, id", []any(nil)
	if sessionID != "" {
		q = "SELECT " + approvalCols + " FROM " + st.approvals + " WHERE NOT decided AND session_id = $1 ORDER BY created_at, id"
		args = append(args, sessionID)
	}
	out, err := st.queryApprovals(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: pending approvals of %q: %w", sessionID, err)
	}
	return out, nil
}

// decisionsSQL returns the query of Decisions for q and its arguments. It
// reads the partial index of decided rows in order, approvals_decided or,
// for one session, approvals_session_decided, from q's first row; ids
// compare byte-wise (COLLATE "C"), as the indexes hold them.
func (st *Store) decisionsSQL(q memory.DecisionQuery) (string, []any) {
	var b strings.Builder
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	b.WriteString("SELECT " + approvalCols + " FROM " + st.approvals + " WHERE decided")
	if q.SessionID != "" {
		b.WriteString(" AND session_id = " + arg(q.SessionID))
	}
	switch q.Kind {
	case "":
	case memory.KindApproval:
		b.WriteString(" AND kind IN ('', " + arg(q.Kind) + ")")
	default:
		b.WriteString(" AND kind = " + arg(q.Kind))
	}
	switch {
	case q.Since.IsZero():
	case q.AfterID != "":
		b.WriteString(" AND (decided_at, id COLLATE \"C\") > (" + arg(storecol.Bound(q.Since)) + ", " + arg(q.AfterID) + ")")
	default:
		b.WriteString(" AND decided_at >= " + arg(storecol.Bound(q.Since)))
	}
	if !q.Until.IsZero() {
		b.WriteString(" AND decided_at < " + arg(storecol.Bound(q.Until)))
	}
	b.WriteString(" ORDER BY decided_at, id COLLATE \"C\"")
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + arg(q.Limit))
	}
	return b.String(), args
}

// Decisions implements [memory.ApprovalStore.Decisions].
func (st *Store) Decisions(ctx context.Context, q memory.DecisionQuery) ([]memory.Approval, error) {
	query, args := st.decisionsSQL(q)
	out, err := st.queryApprovals(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: decisions: %w", err)
	}
	return out, nil
}

// maxLease bounds a lease's ttl, so that the server's timestamps hold its
// expiry.
const maxLease = 100 * 365 * 24 * time.Hour

// AcquireLease implements [memory.Leaser.AcquireLease]. Expiry is measured
// with the server's clock (now()), so processes on machines whose clocks
// differ agree on it; ttl is rounded up to a microsecond.
func (st *Store) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl <= 0 {
		return false, fmt.Errorf("pgstore: acquire lease of %q: want a holder and a positive ttl, got holder %q and ttl %s", sessionID, holder, ttl)
	}
	micros := (min(ttl, maxLease) + time.Microsecond - 1) / time.Microsecond
	var h string
	err := st.pool.QueryRow(ctx, `INSERT INTO `+st.leases+` AS l (session_id, holder, expires_at)
			VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond')
		ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE l.holder = excluded.holder OR l.expires_at <= now()
		RETURNING holder`, sessionID, holder, int64(micros)).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // another holder's lease stands
	}
	if err != nil {
		return false, fmt.Errorf("pgstore: acquire lease of %q for %q: %w", sessionID, holder, err)
	}
	return true, nil
}

// ReleaseLease implements [memory.Leaser.ReleaseLease].
func (st *Store) ReleaseLease(ctx context.Context, sessionID, holder string) error {
	if _, err := st.pool.Exec(ctx, "DELETE FROM "+st.leases+" WHERE session_id = $1 AND holder = $2", sessionID, holder); err != nil {
		return fmt.Errorf("pgstore: release lease of %q by %q: %w", sessionID, holder, err)
	}
	return nil
}

var (
	_ memory.CallLog       = (*Store)(nil)
	_ memory.ApprovalStore = (*Store)(nil)
	_ memory.Leaser        = (*Store)(nil)
	_ memory.Notifier      = (*Store)(nil)
)
