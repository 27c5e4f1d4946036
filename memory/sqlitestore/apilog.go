package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planround/planround/memory"
)

// SetAPILogLimits sets the bounds of the store's [memory.APILog] (zero:
// the defaults), applied from the next append on by this handle.
func (st *Store) SetAPILogLimits(l memory.APILogLimits) { st.apiLimits.Store(&l) }

func (st *Store) apiLogLimits() memory.APILogLimits {
	if l := st.apiLimits.Load(); l != nil {
		return *l
	}
	return memory.APILogLimits{}
}

// apiCallColumns are the columns scanAPICall reads, in its order.
const apiCallColumns = `id, session_id, round, model, purpose, request, reply, finish_reason,
	input_tokens, output_tokens, status, error, first_token, latency, started`

// AppendAPICall implements [memory.APILog.AppendAPICall]. In the same
// write transaction it drops the records beyond the bounds: by id for the
// row bound (ids grow, so the rows kept are those above the new id less
// MaxRows: at most MaxRows) and by the started index for the age bound;
// both deletes read the index range they remove, nothing more.
func (st *Store) AppendAPICall(ctx context.Context, c memory.APICall) (int64, error) {
	if err := memory.ValidateAPICall(c); err != nil {
		return 0, fmt.Errorf("sqlitestore: append api call: %w", err)
	}
	var reply any
	if c.Reply != nil {
		b, err := json.Marshal(c.Reply)
		if err != nil {
			return 0, fmt.Errorf("sqlitestore: append api call: %w", err)
		}
		reply = string(b)
	}
	var request any
	if len(c.Request) > 0 {
		request = []byte(c.Request)
	}
	now := time.Now()
	started := now.UnixNano()
	if !c.Started.IsZero() {
		started = c.Started.UnixNano()
	}
	lim := st.apiLogLimits()
	var id int64
	err := st.write(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `INSERT INTO api_calls (session_id, round, model, purpose, request, reply, finish_reason,
			input_tokens, output_tokens, status, error, first_token, latency, started)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			c.SessionID, c.Round, c.Model, string(c.Purpose), request, reply, c.FinishReason,
			c.Usage.InputTokens, c.Usage.OutputTokens, string(c.Status), c.Error,
			int64(c.FirstToken), int64(c.Latency), started).Scan(&id)
		if err != nil {
			return err
		}
		if n := lim.Rows(); n > 0 && id > int64(n) {
			if _, err := tx.ExecContext(ctx, "DELETE FROM api_calls WHERE id <= ?", id-int64(n)); err != nil {
				return err
			}
		}
		if age := lim.Age(); age > 0 {
			if _, err := tx.ExecContext(ctx, "DELETE FROM api_calls WHERE started < ?", now.Add(-age).UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: append api call: %w", err)
	}
	return id, nil
}

// apiCallWhere returns the WHERE clause of q ("" when it selects every
// record) and its arguments.
func apiCallWhere(q memory.APICallQuery) (string, []any) {
	var conds []string
	var args []any
	if len(q.SessionIDs) > 0 {
		conds = append(conds, "session_id IN (?"+strings.Repeat(", ?", len(q.SessionIDs)-1)+")")
		for _, s := range q.SessionIDs {
			args = append(args, s)
		}
	}
	if !q.Since.IsZero() {
		conds = append(conds, "started >= ?")
		args = append(args, q.Since.UnixNano())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// APICalls implements [memory.APILog.APICalls].
func (st *Store) APICalls(ctx context.Context, q memory.APICallQuery) ([]memory.APICall, error) {
	where, args := apiCallWhere(q)
	query := "SELECT " + apiCallColumns + " FROM api_calls" + where + " ORDER BY id DESC"
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := st.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: api calls: %w", err)
	}
	defer rows.Close()
	out := []memory.APICall{}
	for rows.Next() {
		c, err := scanAPICall(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: api calls: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: api calls: %w", err)
	}
	return out, nil
}

// APICall implements [memory.APILog.APICall].
func (st *Store) APICall(ctx context.Context, id int64) (memory.APICall, error) {
	c, err := scanAPICall(st.r.QueryRowContext(ctx, "SELECT "+apiCallColumns+" FROM api_calls WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return memory.APICall{}, fmt.Errorf("sqlitestore: api call %d: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.APICall{}, fmt.Errorf("sqlitestore: api call %d: %w", id, err)
	}
	return c, nil
}

// DeleteAPICalls implements [memory.APILog.DeleteAPICalls].
func (st *Store) DeleteAPICalls(ctx context.Context, q memory.APICallQuery) error {
	where, args := apiCallWhere(q)
	err := st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM api_calls"+where, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: delete api calls: %w", err)
	}
	return nil
}

// scanAPICall reads a row of apiCallColumns.
func scanAPICall(row interface{ Scan(...any) error }) (memory.APICall, error) {
	var (
		c                          memory.APICall
		purpose, status            string
		request                    []byte
		reply                      sql.NullString
		firstToken, latency, start int64
	)
	err := row.Scan(&c.ID, &c.SessionID, &c.Round, &c.Model, &purpose, &request, &reply, &c.FinishReason,
		&c.Usage.InputTokens, &c.Usage.OutputTokens, &status, &c.Error, &firstToken, &latency, &start)
	if err != nil {
		return c, err
	}
	c.Purpose, c.Status = memory.APICallPurpose(purpose), memory.APICallStatus(status)
	if len(request) > 0 {
		c.Request = request
	}
	if reply.Valid {
		c.Reply = new(memory.APIReply)
		if err := json.Unmarshal([]byte(reply.String), c.Reply); err != nil {
			return c, fmt.Errorf("api call %d: reply: %w", c.ID, err)
		}
	}
	c.FirstToken, c.Latency = time.Duration(firstToken), time.Duration(latency)
	c.Started = time.Unix(0, start).UTC()
	return c, nil
}

var _ memory.APILog = (*Store)(nil)
