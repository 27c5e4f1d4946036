package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/planround/planround/memory"
)

// GetValue implements [memory.KV.GetValue].
func (st *Store) GetValue(ctx context.Context, namespace, key string) ([]byte, error) {
	if err := memory.ValidateKV(namespace, key, nil); err != nil {
		return nil, fmt.Errorf("sqlitestore: get value: %w", err)
	}
	var v []byte
	err := st.r.QueryRowContext(ctx, "SELECT value FROM kv WHERE namespace = ? AND key = ?", namespace, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: %s %q: %w", namespace, key, memory.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get %s %q: %w", namespace, key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// PutValue implements [memory.KV.PutValue].
func (st *Store) PutValue(ctx context.Context, namespace, key string, value []byte) error {
	if err := memory.ValidateKV(namespace, key, value); err != nil {
		return fmt.Errorf("sqlitestore: put value: %w", err)
	}
	err := st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO kv (namespace, key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			namespace, key, nonNil(value), time.Now().UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: put %s %q: %w", namespace, key, err)
	}
	return nil
}

// SwapValue implements [memory.KV.SwapValue]: the comparison and the write
// are one write transaction, so of processes that swap from the same old
// value exactly one succeeds.
func (st *Store) SwapValue(ctx context.Context, namespace, key string, old, value []byte) (bool, error) {
	if err := memory.ValidateKV(namespace, key, value); err != nil {
		return false, fmt.Errorf("sqlitestore: swap value: %w", err)
	}
	var swapped bool
	err := st.write(ctx, func(tx *sql.Tx) error {
		var cur []byte
		err := tx.QueryRowContext(ctx, "SELECT value FROM kv WHERE namespace = ? AND key = ?", namespace, key).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if old != nil {
				return nil
			}
		case err != nil:
			return err
		case old == nil || !bytes.Equal(cur, old):
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO kv (namespace, key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			namespace, key, nonNil(value), time.Now().UnixNano())
		swapped = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: swap %s %q: %w", namespace, key, err)
	}
	return swapped, nil
}

// DeleteValue implements [memory.KV.DeleteValue].
func (st *Store) DeleteValue(ctx context.Context, namespace, key string) error {
	if err := memory.ValidateKV(namespace, key, nil); err != nil {
		return fmt.Errorf("sqlitestore: delete value: %w", err)
	}
	err := st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM kv WHERE namespace = ? AND key = ?", namespace, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: delete %s %q: %w", namespace, key, err)
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
