package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/storecol"
)

// AppendEvents implements [memory.EventLog.AppendEvents] in one statement,
// one round trip whatever the number of events: it moves the session's
// last_event from the number before evs to the last of them, when it holds
// the first, and inserts the events (sent as arrays) only then. A
// concurrent writer of the session waits for the row's lock, then finds
// the number moved and inserts nothing.
func (st *Store) AppendEvents(ctx context.Context, sessionID string, evs ...memory.Event) error {
	if err := memory.ValidateEvents(evs); err != nil {
		return fmt.Errorf("pgstore: append events to %q: %w", sessionID, err)
	}
	if len(evs) == 0 {
		var one int
		err := st.pool.QueryRow(ctx, "SELECT 1 FROM "+st.sessions+" WHERE id = $1", sessionID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return errMissing("append events to", sessionID)
		}
		if err != nil {
			return fmt.Errorf("pgstore: append events to %q: %w", sessionID, err)
		}
		return nil
	}
	t := storecol.Now().UnixNano()
	turns, created := make([]int64, len(evs)), make([]int64, len(evs))
	kinds, data := make([]string, len(evs)), make([][]byte, len(evs))
	for i, ev := range evs {
		turns[i], kinds[i] = ev.Turn, ev.Kind
		if len(ev.Data) > 0 {
			data[i] = ev.Data // nil is NULL
		}
		created[i] = t
		if !ev.CreatedAt.IsZero() {
			created[i] = ev.CreatedAt.UnixNano()
		}
	}
	prev := evs[0].Seq - 1
	var tag pgconn.CommandTag
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// The log is a copy of what the runs published (the conversation
		// itself commits as usual): its commits do not wait for the disk,
		// so that a stream of events does not hold up the writes a run
		// waits for. A database that crashes may lose its last events;
		// their number then comes again, and a reader whose cursor is
		// beyond the log is told its events were lost.
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		var err error
		tag, err = tx.Exec(ctx, `WITH s AS (
			UPDATE `+st.sessions+` SET last_event = $3 WHERE id = $1 AND last_event = $2 RETURNING id)
		INSERT INTO `+st.events+` (session_id, seq, turn, kind, data, created_at)
		SELECT s.id, $2 + e.n, e.turn, e.kind, e.data, e.created_at
		FROM s, unnest($4::bigint[], $5::text[], $6::bytea[], $7::bigint[]) WITH ORDINALITY AS e (turn, kind, data, created_at, n)`,
			sessionID, prev, evs[len(evs)-1].Seq, turns, kinds, data, created)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: append events to %q: %w", sessionID, err)
	}
	if tag.RowsAffected() == int64(len(evs)) {
		return nil
	}
	// Nothing was written: the session is missing, or its log is elsewhere.
	var last int64
	err = st.pool.QueryRow(ctx, "SELECT last_event FROM "+st.sessions+" WHERE id = $1", sessionID).Scan(&last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return errMissing("append events to", sessionID)
	case err != nil:
		return fmt.Errorf("pgstore: append events to %q: %w", sessionID, err)
	}
	return fmt.Errorf("pgstore: append events to %q: seq %d, the log is at %d: %w", sessionID, evs[0].Seq, last, memory.ErrEventSeq)
}

// Events implements [memory.EventLog.Events] in one statement: the number
// and the events are of one snapshot.
func (st *Store) Events(ctx context.Context, sessionID string, after int64, limit int) ([]memory.Event, int64, error) {
	if after < 0 {
		return nil, 0, fmt.Errorf("pgstore: events of %q: after %d, want 0 or more", sessionID, after)
	}
	var lim *int64 // NULL: no limit
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	// A session without events after after is one row with seq 0.
	rows, err := st.pool.Query(ctx, `SELECT s.last_event, coalesce(e.seq, 0), coalesce(e.turn, 0), coalesce(e.kind, ''), e.data, coalesce(e.created_at, 0)
		FROM `+st.sessions+` s LEFT JOIN LATERAL (
			SELECT seq, turn, kind, data, created_at FROM `+st.events+`
			WHERE session_id = s.id AND seq > $2 ORDER BY seq LIMIT $3) e ON true
		WHERE s.id = $1 ORDER BY e.seq`, sessionID, after, lim)
	if err != nil {
		return nil, 0, fmt.Errorf("pgstore: events of %q: %w", sessionID, err)
	}
	defer rows.Close()
	var (
		out   = []memory.Event{}
		last  int64
		found bool
	)
	for rows.Next() {
		found = true
		var (
			ev      memory.Event
			created int64
		)
		if err := rows.Scan(&last, &ev.Seq, &ev.Turn, &ev.Kind, &ev.Data, &created); err != nil {
			return nil, 0, fmt.Errorf("pgstore: events of %q: %w", sessionID, err)
		}
		if ev.Seq == 0 {
			continue // no event
		}
		ev.CreatedAt = storecol.FromNanos(created)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("pgstore: events of %q: %w", sessionID, err)
	}
	if !found {
		return nil, 0, errMissing("events of", sessionID)
	}
	return out, last, nil
}

// LastEvent implements [memory.EventLog.LastEvent].
func (st *Store) LastEvent(ctx context.Context, sessionID string) (int64, error) {
	var last int64
	err := st.pool.QueryRow(ctx, "SELECT last_event FROM "+st.sessions+" WHERE id = $1", sessionID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errMissing("last event of", sessionID)
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: last event of %q: %w", sessionID, err)
	}
	return last, nil
}

// TrimEvents implements [memory.EventLog.TrimEvents] in one statement.
func (st *Store) TrimEvents(ctx context.Context, sessionID string, through int64) error {
	var found bool
	err := st.pool.QueryRow(ctx, `WITH d AS (DELETE FROM `+st.events+` WHERE session_id = $1 AND seq <= $2)
		SELECT EXISTS (SELECT 1 FROM `+st.sessions+` WHERE id = $1)`, sessionID, through).Scan(&found)
	if err != nil {
		return fmt.Errorf("pgstore: trim events of %q: %w", sessionID, err)
	}
	if !found {
		return errMissing("trim events of", sessionID)
	}
	return nil
}

var _ memory.EventLog = (*Store)(nil)
