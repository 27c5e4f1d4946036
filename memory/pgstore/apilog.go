package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
// transaction it drops the records beyond the bounds: by id for the row
// bound (ids grow, so the rows kept are those above the new id less
// MaxRows: at most MaxRows, fewer when ids were skipped) and by the
// started index for the age bound; both deletes read the index range they
// remove, nothing more. Its commit does not wait for the disk (the log is
// a record for people, not the conversation): a crash may lose the last
// records.
func (st *Store) AppendAPICall(ctx context.Context, c memory.APICall) (int64, error) {
	if err := memory.ValidateAPICall(c); err != nil {
		return 0, fmt.Errorf("pgstore: append api call: %w", err)
	}
	var reply []byte // nil is NULL
	if c.Reply != nil {
		b, err := json.Marshal(c.Reply)
		if err != nil {
			return 0, fmt.Errorf("pgstore: append api call: %w", err)
		}
		reply = b
	}
	var request []byte
	if len(c.Request) > 0 {
		request = c.Request
	}
	now := time.Now()
	started := now.UnixNano()
	if !c.Started.IsZero() {
		started = c.Started.UnixNano()
	}
	lim := st.apiLogLimits()
	var id int64
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO `+st.apiCalls+` (session_id, round, model, purpose, request, reply, finish_reason,
			input_tokens, output_tokens, status, error, first_token, latency, started)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
			c.SessionID, c.Round, c.Model, string(c.Purpose), request, reply, c.FinishReason,
			c.Usage.InputTokens, c.Usage.OutputTokens, string(c.Status), []byte(c.Error),
			int64(c.FirstToken), int64(c.Latency), started).Scan(&id)
		if err != nil {
			return err
		}
		if n := lim.Rows(); n > 0 && id > int64(n) {
			if _, err := tx.Exec(ctx, "DELETE FROM "+st.apiCalls+" WHERE id <= $1", id-int64(n)); err != nil {
				return err
			}
		}
		if age := lim.Age(); age > 0 {
			if _, err := tx.Exec(ctx, "DELETE FROM "+st.apiCalls+" WHERE started < $1", now.Add(-age).UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: append api call: %w", err)
	}
	return id, nil
}

// apiCallWhere returns the WHERE clause of q ("" when it selects every
// record) and its arguments.
func apiCallWhere(q memory.APICallQuery) (string, []any) {
	var conds []string
	var args []any
	if len(q.SessionIDs) > 0 {
		args = append(args, q.SessionIDs)
		conds = append(conds, fmt.Sprintf("session_id = ANY($%d)", len(args)))
	}
	if !q.Since.IsZero() {
		args = append(args, q.Since.UnixNano())
		conds = append(conds, fmt.Sprintf("started >= $%d", len(args)))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// APICalls implements [memory.APILog.APICalls].
func (st *Store) APICalls(ctx context.Context, q memory.APICallQuery) ([]memory.APICall, error) {
	where, args := apiCallWhere(q)
	query := "SELECT " + apiCallColumns + " FROM " + st.apiCalls + where + " ORDER BY id DESC"
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := st.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: api calls: %w", err)
	}
	defer rows.Close()
	out := []memory.APICall{}
	for rows.Next() {
		c, err := scanAPICall(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: api calls: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: api calls: %w", err)
	}
	return out, nil
}

// APICall implements [memory.APILog.APICall].
func (st *Store) APICall(ctx context.Context, id int64) (memory.APICall, error) {
	c, err := scanAPICall(st.pool.QueryRow(ctx, "SELECT "+apiCallColumns+" FROM "+st.apiCalls+" WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.APICall{}, fmt.Errorf("pgstore: api call %d: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.APICall{}, fmt.Errorf("pgstore: api call %d: %w", id, err)
	}
	return c, nil
}

// DeleteAPICalls implements [memory.APILog.DeleteAPICalls].
func (st *Store) DeleteAPICalls(ctx context.Context, q memory.APICallQuery) error {
	where, args := apiCallWhere(q)
	_, err := st.pool.Exec(ctx, "DELETE FROM "+st.apiCalls+where, args...)
	if err != nil {
		return fmt.Errorf("pgstore: delete api calls: %w", err)
	}
	return nil
}

// scanAPICall reads a row of apiCallColumns.
func scanAPICall(row interface{ Scan(...any) error }) (memory.APICall, error) {
	var (
		c                          memory.APICall
		purpose, status            string
		request, reply, errText    []byte
		firstToken, latency, start int64
	)
	err := row.Scan(&c.ID, &c.SessionID, &c.Round, &c.Model, &purpose, &request, &reply, &c.FinishReason,
		&c.Usage.InputTokens, &c.Usage.OutputTokens, &status, &errText, &firstToken, &latency, &start)
	if err != nil {
		return c, err
	}
	c.Purpose, c.Status = memory.APICallPurpose(purpose), memory.APICallStatus(status)
	if len(request) > 0 {
		c.Request = request
	}
	c.Error = string(errText)
	if reply != nil {
		c.Reply = new(memory.APIReply)
		if err := json.Unmarshal(reply, c.Reply); err != nil {
			return c, fmt.Errorf("api call %d: reply: %w", c.ID, err)
		}
	}
	c.FirstToken, c.Latency = time.Duration(firstToken), time.Duration(latency)
	c.Started = time.Unix(0, start).UTC()
	return c, nil
}

var _ memory.APILog = (*Store)(nil)
