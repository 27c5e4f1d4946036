package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/storecol"
)

// AppendEvents implements [memory.EventLog.AppendEvents]: in one write
// transaction, the session's row moves from the number before evs to the
// last of them, when it holds the first, and the events are inserted.
// Writers in other processes wait for the file's write lock, then find the
// number moved.
func (st *Store) AppendEvents(ctx context.Context, sessionID string, evs ...memory.Event) error {
	if err := memory.ValidateEvents(evs); err != nil {
		return fmt.Errorf("sqlitestore: append events to %q: %w", sessionID, err)
	}
	t := storecol.Now()
	return st.write(ctx, func(tx *sql.Tx) error {
		if len(evs) == 0 {
			return exists(ctx, tx, "append events to", sessionID)
		}
		res, err := tx.ExecContext(ctx, "UPDATE sessions SET last_event = ? WHERE id = ? AND last_event = ?",
			evs[len(evs)-1].Seq, sessionID, evs[0].Seq-1)
		if err != nil {
			return fmt.Errorf("sqlitestore: append events to %q: %w", sessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlitestore: append events to %q: %w", sessionID, err)
		} else if n == 0 {
			return st.outOfSequence(ctx, tx, sessionID, evs[0].Seq)
		}
		// Up to 32 rows per statement (192 variables, under SQLite's
		// smallest limit of 999): a third of the allocations of a
		// statement per row, for a batch of 128.
		const perStmt = 32
		args := make([]any, 0, 6*min(len(evs), perStmt))
		for rest := evs; len(rest) > 0; {
			chunk := rest[:min(len(rest), perStmt)]
			rest = rest[len(chunk):]
			args = args[:0]
			for _, ev := range chunk {
				var data any // NULL when empty
				if len(ev.Data) > 0 {
					data = ev.Data
				}
				args = append(args, sessionID, ev.Seq, ev.Turn, ev.Kind, data, storecol.NormTime(ev.CreatedAt, t).UnixNano())
			}
			q := "INSERT INTO events (session_id, seq, turn, kind, data, created_at) VALUES " +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("sqlitestore: append events to %q: events from %d: %w", sessionID, chunk[0].Seq, err)
			}
		}
		return nil
	})
}

// outOfSequence returns the error of an append from seq that did not move
// the session's number: the session is missing, or its log is elsewhere.
func (st *Store) outOfSequence(ctx context.Context, tx *sql.Tx, sessionID string, seq int64) error {
	var last int64
	err := tx.QueryRowContext(ctx, "SELECT last_event FROM sessions WHERE id = ?", sessionID).Scan(&last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlitestore: append events to %q: %w", sessionID, memory.ErrNotFound)
	case err != nil:
		return fmt.Errorf("sqlitestore: append events to %q: %w", sessionID, err)
	}
	return fmt.Errorf("sqlitestore: append events to %q: seq %d, the log is at %d: %w", sessionID, seq, last, memory.ErrEventSeq)
}

// Events implements [memory.EventLog.Events], in one read transaction: the
// number and the events are of one moment.
func (st *Store) Events(ctx context.Context, sessionID string, after int64, limit int) ([]memory.Event, int64, error) {
	if after < 0 {
		return nil, 0, fmt.Errorf("sqlitestore: events of %q: after %d, want 0 or more", sessionID, after)
	}
	if limit <= 0 {
		limit = -1 // SQLite's "no limit"
	}
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, err)
	}
	defer tx.Rollback()
	last, err := lastEvent(ctx, tx, sessionID)
	if err != nil {
		return nil, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, turn, kind, data, created_at FROM events
		WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sessionID, after, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []memory.Event{}
	for rows.Next() {
		var (
			ev      memory.Event
			created int64
		)
		if err := rows.Scan(&ev.Seq, &ev.Turn, &ev.Kind, &ev.Data, &created); err != nil {
			return nil, 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, err)
		}
		ev.CreatedAt = storecol.FromNanos(created)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, err)
	}
	return out, last, nil
}

// LastEvent implements [memory.EventLog.LastEvent].
func (st *Store) LastEvent(ctx context.Context, sessionID string) (int64, error) {
	return lastEvent(ctx, st.r, sessionID)
}

// lastEvent reads the number of the session's last event.
func lastEvent(ctx context.Context, q querier, sessionID string) (int64, error) {
	var last int64
	err := q.QueryRowContext(ctx, "SELECT last_event FROM sessions WHERE id = ?", sessionID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, memory.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: events of %q: %w", sessionID, err)
	}
	return last, nil
}

// TrimEvents implements [memory.EventLog.TrimEvents].
func (st *Store) TrimEvents(ctx context.Context, sessionID string, through int64) error {
	return st.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "trim events of", sessionID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM events WHERE session_id = ? AND seq <= ?", sessionID, through); err != nil {
			return fmt.Errorf("sqlitestore: trim events of %q: %w", sessionID, err)
		}
		return nil
	})
}

var _ memory.EventLog = (*Store)(nil)
