package memory_test

import (
	"testing"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/memory/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store { return new(memory.MemStore) })
}

// openSQLite opens a store that is closed when the test ends. The tests of
// package memory that compare both stores use it; the SQLite store's own
// tests are in memory/sqlitestore.
func openSQLite(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("sqlitestore.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

func TestMemStoreKV(t *testing.T) {
	storetest.RunKV(t, func(*testing.T) memory.KV { return new(memory.MemStore) })
}

func TestMemStoreAPILog(t *testing.T) {
	storetest.RunAPILog(t, func(_ *testing.T, l memory.APILogLimits) memory.APILog {
		st := new(memory.MemStore)
		st.SetAPILogLimits(l)
		return st
	})
}
