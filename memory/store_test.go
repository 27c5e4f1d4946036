package memory_test

import (
	"path/filepath"
	"testing"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store { return new(memory.MemStore) })
}

func TestSQLiteStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "db.sqlite")) })
}

// openSQLite opens a store that is closed when the test ends.
func openSQLite(t testing.TB, path string) *memory.SQLiteStore {
	t.Helper()
	st, err := memory.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}
