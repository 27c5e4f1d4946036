package memory

import (
	"bytes"
	"context"
	"fmt"
)

// KV is a small key-value store, in namespaces, for state that a package
// keeps beside the conversations: per user or per server, not per message
// (mcpclient keeps a user's OAuth tokens and the tool definitions it pinned
// here). Values are opaque bytes: a package that keeps a secret encrypts it
// first. [MemStore] implements KV, and so do the SQLite and PostgreSQL
// stores; there a value is visible to every process that opens the store.
//
// Namespaces and keys are valid UTF-8 without NUL bytes, a namespace of 1
// to [MaxKVNamespace] bytes and a key of 1 to [MaxKVKey]; a value holds at
// most [MaxKVValue] bytes. Methods that get something else fail without
// touching the store.
type KV interface {
	// GetValue returns the value of key in namespace, or an error wrapping
	// [ErrNotFound] when there is none.
	GetValue(ctx context.Context, namespace, key string) ([]byte, error)
	// PutValue sets the value of key in namespace, whatever it was.
	PutValue(ctx context.Context, namespace, key string, value []byte) error
	// SwapValue sets the value of key in namespace to value only when it
	// is old, or, with old nil, only when the key has no value, and
	// reports whether it did: the first of two processes that update a
	// value from the same old one wins, and the other reads it again.
	SwapValue(ctx context.Context, namespace, key string, old, value []byte) (bool, error)
	// DeleteValue removes key from namespace; a key without a value is no
	// error.
	DeleteValue(ctx context.Context, namespace, key string) error
}

// Bounds of [KV] namespaces, keys and values.
const (
	MaxKVNamespace = 64
	MaxKVKey       = 512
	MaxKVValue     = 1 << 20
)

// kvKey names a value of a MemStore.
type kvKey struct{ namespace, key string }

// GetValue implements [KV].
func (s *MemStore) GetValue(ctx context.Context, namespace, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateKV(namespace, key, nil); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.kv[kvKey{namespace, key}]
	if !ok {
		return nil, fmt.Errorf("memory: %s %q: %w", namespace, key, ErrNotFound)
	}
	return bytes.Clone(v), nil
}

// PutValue implements [KV].
func (s *MemStore) PutValue(ctx context.Context, namespace, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateKV(namespace, key, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv == nil {
		s.kv = make(map[kvKey][]byte)
	}
	s.kv[kvKey{namespace, key}] = append([]byte{}, value...)
	return nil
}

// SwapValue implements [KV].
func (s *MemStore) SwapValue(ctx context.Context, namespace, key string, old, value []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := ValidateKV(namespace, key, value); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := kvKey{namespace, key}
	cur, ok := s.kv[k]
	if old == nil && ok || old != nil && (!ok || !bytes.Equal(cur, old)) {
		return false, nil
	}
	if s.kv == nil {
		s.kv = make(map[kvKey][]byte)
	}
	s.kv[k] = append([]byte{}, value...)
	return true, nil
}

// DeleteValue implements [KV].
func (s *MemStore) DeleteValue(ctx context.Context, namespace, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateKV(namespace, key, nil); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kv, kvKey{namespace, key})
	return nil
}
