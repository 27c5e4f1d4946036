package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/storecol"
)

// AppendCalls implements [memory.CallLog.AppendCalls].
func (st *Store) AppendCalls(ctx context.Context, sessionID string, calls []memory.OpenCall, msgs ...memory.Message) ([]memory.Message, error) {
	if err := memory.ValidateAppendCalls(calls, msgs); err != nil {
		return nil, fmt.Errorf("sqlitestore: append calls to %q: %w", sessionID, err)
	}
	return st.append(ctx, sessionID, msgs, func(tx *sql.Tx, out []memory.Message) error {
		for _, c := range calls {
			c.MessageID = out[len(out)-1].ID
			if err := saveCall(ctx, tx, sessionID, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// SaveCall implements [memory.CallLog.SaveCall].
func (st *Store) SaveCall(ctx context.Context, sessionID string, c memory.OpenCall) error {
	if err := memory.ValidateOpenCall(c); err != nil {
		return fmt.Errorf("sqlitestore: save call of %q: %w", sessionID, err)
	}
	err := st.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "save call of", sessionID); err != nil {
			return err
		}
		if len(c.Arguments) > 0 {
			if err := setArguments(ctx, tx, sessionID, c); err != nil {
				return err
			}
		}
		return saveCall(ctx, tx, sessionID, c)
	})
	return err
}

// setArguments writes c.Arguments over the arguments of the call in its
// stored assistant message, in tx.
func setArguments(ctx context.Context, tx *sql.Tx, sessionID string, c memory.OpenCall) error {
	var calls []byte
	err := tx.QueryRowContext(ctx, "SELECT tool_calls FROM messages WHERE id = ? AND session_id = ? AND tool_calls IS NOT NULL",
		c.MessageID, sessionID).Scan(&calls)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitestore: save call %q of %q: no message %d with calls in the session", c.CallID, sessionID, c.MessageID)
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: save call %q of %q: %w", c.CallID, sessionID, err)
	}
	edited, err := storecol.SetArguments(calls, c.CallID, c.Arguments)
	if err != nil {
		return fmt.Errorf("sqlitestore: save call %q of %q: message %d: %w", c.CallID, sessionID, c.MessageID, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE messages SET tool_calls = ? WHERE id = ?", edited, c.MessageID); err != nil {
		return fmt.Errorf("sqlitestore: save call %q of %q: %w", c.CallID, sessionID, err)
	}
	return nil
}

// saveCall inserts or replaces the record c of an existing session in tx.
func saveCall(ctx context.Context, tx *sql.Tx, sessionID string, c memory.OpenCall) error {
	// seq is taken on insert and kept on replace: the first-saved order.
	_, err := tx.ExecContext(ctx, `INSERT INTO open_calls
		(session_id, message_id, call_id, seq, round, approval_id, executing, partial, updated_at, state)
		VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(seq), 0) + 1 FROM open_calls WHERE session_id = ?1), ?4, ?5, ?6, ?7, ?8, ?9)
		ON CONFLICT (session_id, message_id, call_id) DO UPDATE SET
			round = excluded.round, approval_id = excluded.approval_id, executing = excluded.executing,
			partial = excluded.partial, updated_at = excluded.updated_at, state = excluded.state`,
		sessionID, c.MessageID, c.CallID, c.Round, c.ApprovalID, c.Executing, c.Partial, storecol.Now().UnixNano(), []byte(c.State))
	if err != nil {
		return fmt.Errorf("sqlitestore: save call %q of %q: %w", c.CallID, sessionID, err)
	}
	return nil
}

// OpenCalls implements [memory.CallLog.OpenCalls].
func (st *Store) OpenCalls(ctx context.Context, sessionID string) ([]memory.OpenCall, error) {
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open calls of %q: %w", sessionID, err)
	}
	defer tx.Rollback()
	if err := exists(ctx, tx, "open calls of", sessionID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT message_id, call_id, round, approval_id, executing, partial, updated_at, state
		FROM open_calls WHERE session_id = ? ORDER BY message_id, seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open calls of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.OpenCall{}
	for rows.Next() {
		var c memory.OpenCall
		var updated int64
		var state []byte
		if err := rows.Scan(&c.MessageID, &c.CallID, &c.Round, &c.ApprovalID, &c.Executing, &c.Partial, &updated, &state); err != nil {
			return nil, fmt.Errorf("sqlitestore: open calls of %q: %w", sessionID, err)
		}
		c.State = string(state)
		c.UpdatedAt = storecol.FromNanos(updated)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: open calls of %q: %w", sessionID, err)
	}
	return out, nil
}

// OpenSessions implements [memory.CallLog.OpenSessions].
func (st *Store) OpenSessions(ctx context.Context) ([]string, error) {
	rows, err := st.r.QueryContext(ctx, "SELECT DISTINCT session_id FROM open_calls")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open sessions: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlitestore: open sessions: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: open sessions: %w", err)
	}
	return out, nil
}

// approvalCols are the columns scanApproval reads, in its order.
const approvalCols = `id, session_id, call_id, tool, arguments, round, created_at, kind, call_key, digest,
	decided, approved, reason, cause, decision_arguments, scope, decided_at, principal, channel`

// scanApproval reads one row of approvalCols.
func scanApproval(row interface{ Scan(...any) error }) (memory.Approval, error) {
	var (
		a                memory.Approval
		created          int64
		decidedAt        sql.NullInt64
		args, returnArgs []byte
	)
	err := row.Scan(&a.ID, &a.SessionID, &a.CallID, &a.Tool, &args, &a.Round, &created, &a.Kind, &a.Key, &a.Digest,
		&a.Decided, &a.Decision.Approved, &a.Decision.Reason, &a.Decision.Cause, &returnArgs, &a.Decision.Scope, &decidedAt,
		&a.Decision.Principal, &a.Decision.Channel)
	if err != nil {
		return memory.Approval{}, err
	}
	a.CreatedAt = storecol.FromNanos(created)
	if len(args) > 0 {
		a.Arguments = args
	}
	if len(returnArgs) > 0 {
		a.Decision.Arguments = returnArgs
	}
	if decidedAt.Valid {
		a.DecidedAt = storecol.FromNanos(decidedAt.Int64)
	}
	return a, nil
}

// scanApprovals reads the rows of approvalCols.
func scanApprovals(rows *sql.Rows) ([]memory.Approval, error) {
	defer rows.Close()
	out := []memory.Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// blob returns b as a column value: NULL when empty.
func blob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// isUnique reports whether err is SQLite's SQLITE_CONSTRAINT_UNIQUE: a row
// that a unique index already has.
func isUnique(err error) bool {
	var coder interface{ Code() int }
	return errors.As(err, &coder) && coder.Code() == 2067
}

// CreateApproval implements [memory.ApprovalStore.CreateApproval]. The
// unique index approvals_key refuses a second record of a session's key.
func (st *Store) CreateApproval(ctx context.Context, a memory.Approval) error {
	if err := memory.ValidateApproval(a); err != nil {
		return fmt.Errorf("sqlitestore: create approval: %w", err)
	}
	t := storecol.Now()
	a.CreatedAt = storecol.NormTime(a.CreatedAt, t)
	var decidedAt any // NULL while pending
	if a.Decided {
		decidedAt = storecol.NormTime(a.DecidedAt, t).UnixNano()
	} else {
		a.Decision = memory.ApprovalDecision{}
	}
	d := a.Decision
	err := st.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, session_id, call_id, tool, arguments, round, created_at,
				kind, call_key, digest, decided, approved, reason, cause, decision_arguments, scope, decided_at, principal, channel)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			a.ID, a.SessionID, a.CallID, a.Tool, blob(a.Arguments), a.Round, a.CreatedAt.UnixNano(),
			a.Kind, a.Key, a.Digest, a.Decided, d.Approved, d.Reason, d.Cause, blob(d.Arguments), d.Scope, decidedAt, d.Principal, d.Channel)
		if isUnique(err) {
			return fmt.Errorf("session %q has key %q already: %w", a.SessionID, a.Key, memory.ErrExists)
		}
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
		return fmt.Errorf("sqlitestore: create approval %q: %w", a.ID, err)
	}
	return nil
}

// DecideApproval implements [memory.ApprovalStore.DecideApproval]. The
// decision is one UPDATE of a pending row in a write transaction, which
// SQLite runs one at a time across the processes on the file: of
// concurrent deciders, one finds the row pending.
func (st *Store) DecideApproval(ctx context.Context, sessionID, id string, d memory.ApprovalDecision) (memory.Approval, error) {
	var a memory.Approval
	err := st.write(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = scanApproval(tx.QueryRowContext(ctx, `UPDATE approvals SET decided = 1, approved = ?, reason = ?, cause = ?,
				decision_arguments = ?, scope = ?, decided_at = ?, principal = ?, channel = ?
			WHERE id = ? AND session_id = ? AND decided = 0
			RETURNING `+approvalCols,
			d.Approved, d.Reason, d.Cause, blob(d.Arguments), d.Scope, storecol.Now().UnixNano(), d.Principal, d.Channel, id, sessionID))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Nothing updated: say why.
		a, err = scanApproval(tx.QueryRowContext(ctx, "SELECT "+approvalCols+" FROM approvals WHERE id = ?", id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return memory.ErrNotFound
		case err != nil:
			return err
		case a.SessionID != sessionID:
			a = memory.Approval{}
			return memory.ErrWrongSession
		default:
			return memory.ErrDecided
		}
	})
	if err != nil {
		return a, fmt.Errorf("sqlitestore: decide approval %q: %w", id, err)
	}
	return a, nil
}

// GetApproval implements [memory.ApprovalStore.GetApproval].
func (st *Store) GetApproval(ctx context.Context, id string) (memory.Approval, error) {
	a, err := scanApproval(st.r.QueryRowContext(ctx, "SELECT "+approvalCols+" FROM approvals WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		err = memory.ErrNotFound
	}
	if err != nil {
		return memory.Approval{}, fmt.Errorf("sqlitestore: approval %q: %w", id, err)
	}
	return a, nil
}

// approvalByKeySQL selects the approval of a session and key. Its test
// that call_key is not empty lets SQLite use the partial index
// approvals_key, and makes an empty key find nothing.
const approvalByKeySQL = "SELECT " + approvalCols + " FROM approvals WHERE session_id = ? AND call_key = ? AND call_key <> ''"

// ApprovalByKey implements [memory.ApprovalStore.ApprovalByKey], through
// the index approvals_key.
func (st *Store) ApprovalByKey(ctx context.Context, sessionID, key string) (memory.Approval, error) {
	a, err := scanApproval(st.r.QueryRowContext(ctx, approvalByKeySQL, sessionID, key))
	if errors.Is(err, sql.ErrNoRows) {
		err = memory.ErrNotFound
	}
	if err != nil {
		return memory.Approval{}, fmt.Errorf("sqlitestore: approval of %q with key %q: %w", sessionID, key, err)
	}
	return a, nil
}

// PendingApprovals implements [memory.ApprovalStore.PendingApprovals].
func (st *Store) PendingApprovals(ctx context.Context, sessionID string) ([]memory.Approval, error) {
	q, args := "SELECT "+approvalCols+" FROM approvals WHERE decided = 0 ORDER BY created_at, id", []any(nil)
	if sessionID != "" {
		q = "SELECT " + approvalCols + " FROM approvals WHERE decided = 0 AND session_id = ? ORDER BY created_at, id"
		args = append(args, sessionID)
	}
	rows, err := st.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: pending approvals of %q: %w", sessionID, err)
	}
	out, err := scanApprovals(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: pending approvals of %q: %w", sessionID, err)
	}
	return out, nil
}

// decisionsSQL returns the query of Decisions for q and its arguments. It
// reads the partial index of decided rows in order, approvals_decided or,
// for one session, approvals_session_decided: it starts at q's first row
// and stops after Limit rows, without a sort.
func decisionsSQL(q memory.DecisionQuery) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString("SELECT " + approvalCols + " FROM approvals WHERE decided = 1")
	if q.SessionID != "" {
		b.WriteString(" AND session_id = ?")
		args = append(args, q.SessionID)
	}
	switch q.Kind {
	case "":
	case memory.KindApproval:
		b.WriteString(" AND kind IN ('', ?)")
		args = append(args, q.Kind)
	default:
		b.WriteString(" AND kind = ?")
		args = append(args, q.Kind)
	}
	switch {
	case q.Since.IsZero():
	case q.AfterID != "":
		b.WriteString(" AND (decided_at, id) > (?, ?)")
		args = append(args, storecol.Bound(q.Since), q.AfterID)
	default:
		b.WriteString(" AND decided_at >= ?")
		args = append(args, storecol.Bound(q.Since))
	}
	if !q.Until.IsZero() {
		b.WriteString(" AND decided_at < ?")
		args = append(args, storecol.Bound(q.Until))
	}
	b.WriteString(" ORDER BY decided_at, id")
	if q.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, q.Limit)
	}
	return b.String(), args
}

// Decisions implements [memory.ApprovalStore.Decisions].
func (st *Store) Decisions(ctx context.Context, q memory.DecisionQuery) ([]memory.Approval, error) {
	query, args := decisionsSQL(q)
	rows, err := st.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: decisions: %w", err)
	}
	out, err := scanApprovals(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: decisions: %w", err)
	}
	return out, nil
}

// maxLease bounds a lease's ttl, so that its expiry fits in Unix
// nanoseconds.
const maxLease = 100 * 365 * 24 * time.Hour

// AcquireLease implements [memory.Leaser.AcquireLease]. Expiry is measured
// with this machine's clock, which the processes that share the file share.
func (st *Store) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl <= 0 {
		return false, fmt.Errorf("sqlitestore: acquire lease of %q: want a holder and a positive ttl, got holder %q and ttl %s", sessionID, holder, ttl)
	}
	var got bool
	err := st.write(ctx, func(tx *sql.Tx) error {
		t := time.Now().UnixNano()
		var h string
		err := tx.QueryRowContext(ctx, `INSERT INTO leases (session_id, holder, expires_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
				WHERE leases.holder = excluded.holder OR leases.expires_at <= ?4
			RETURNING holder`, sessionID, holder, t+min(ttl, maxLease).Nanoseconds(), t).Scan(&h)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // another holder's lease stands
		}
		got = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: acquire lease of %q for %q: %w", sessionID, holder, err)
	}
	return got, nil
}

// ReleaseLease implements [memory.Leaser.ReleaseLease].
func (st *Store) ReleaseLease(ctx context.Context, sessionID, holder string) error {
	err := st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM leases WHERE session_id = ? AND holder = ?", sessionID, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: release lease of %q by %q: %w", sessionID, holder, err)
	}
	return nil
}

var (
	_ memory.CallLog       = (*Store)(nil)
	_ memory.ApprovalStore = (*Store)(nil)
	_ memory.Leaser        = (*Store)(nil)
	_ memory.Notifier      = (*Store)(nil)
)
