package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planround/planround/memory"
)

// GetValue implements [memory.KV.GetValue].
func (st *Store) GetValue(ctx context.Context, namespace, key string) ([]byte, error) {
	if err := memory.ValidateKV(namespace, key, nil); err != nil {
		return nil, fmt.Errorf("pgstore: get value: %w", err)
	}
	var v []byte
	err := st.pool.QueryRow(ctx, "SELECT value FROM "+st.kv+" WHERE namespace = $1 AND key = $2", namespace, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: %s %q: %w", namespace, key, memory.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get %s %q: %w", namespace, key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// PutValue implements [memory.KV.PutValue].
func (st *Store) PutValue(ctx context.Context, namespace, key string, value []byte) error {
	if err := memory.ValidateKV(namespace, key, value); err != nil {
		return fmt.Errorf("pgstore: put value: %w", err)
	}
	_, err := st.pool.Exec(ctx, `INSERT INTO `+st.kv+` (namespace, key, value, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		namespace, key, nonNil(value), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("pgstore: put %s %q: %w", namespace, key, err)
	}
	return nil
}

// SwapValue implements [memory.KV.SwapValue] in one statement: an update
// whose condition is the old value, or, with old nil, an insert that does
// nothing on a conflict; of processes that swap from the same old value
// exactly one changes a row.
func (st *Store) SwapValue(ctx context.Context, namespace, key string, old, value []byte) (bool, error) {
	if err := memory.ValidateKV(namespace, key, value); err != nil {
		return false, fmt.Errorf("pgstore: swap value: %w", err)
	}
	var q string
	args := []any{namespace, key, nonNil(value), time.Now().UnixNano()}
	if old == nil {
		q = `INSERT INTO ` + st.kv + ` (namespace, key, value, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (namespace, key) DO NOTHING`
	} else {
		q = `UPDATE ` + st.kv + ` SET value = $3, updated_at = $4 WHERE namespace = $1 AND key = $2 AND value = $5`
		args = append(args, old)
	}
	tag, err := st.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("pgstore: swap %s %q: %w", namespace, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteValue implements [memory.KV.DeleteValue].
func (st *Store) DeleteValue(ctx context.Context, namespace, key string) error {
	if err := memory.ValidateKV(namespace, key, nil); err != nil {
		return fmt.Errorf("pgstore: delete value: %w", err)
	}
	if _, err := st.pool.Exec(ctx, "DELETE FROM "+st.kv+" WHERE namespace = $1 AND key = $2", namespace, key); err != nil {
		return fmt.Errorf("pgstore: delete %s %q: %w", namespace, key, err)
	}
	return nil
}

// nonNil returns b, or an empty slice for nil: the value column is NOT
// NULL, and an empty value is a value.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

var _ memory.KV = (*Store)(nil)
