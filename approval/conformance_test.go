package approval_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/approval/approvaltest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
)

// TestManagerConformance runs the conformance suite of the waiting core
// with every kind of Store a Manager keeps its approvals in: none (its own
// MemStore), a MemStore, a SQLite file and PostgreSQL (skipped without a
// server, a failure under PLANROUND_REQUIRE_ALL=1).
func TestManagerConformance(t *testing.T) {
	manager := func(t *testing.T, cfg approval.ManagerConfig) *approval.Manager {
		t.Helper()
		cfg.Timeout = approvaltest.ManagerTimeout
		return replica(t, cfg)
	}
	t.Run("no Store", func(t *testing.T) {
		approvaltest.RunManager(t, func(t *testing.T) *approval.Manager {
			return manager(t, approval.ManagerConfig{})
		})
	})
	t.Run("MemStore", func(t *testing.T) {
		approvaltest.RunManager(t, func(t *testing.T) *approval.Manager {
			st := &memory.MemStore{}
			return manager(t, approval.ManagerConfig{Store: st, Notifier: st})
		})
	})
	t.Run("SQLite", func(t *testing.T) {
		approvaltest.RunManager(t, func(t *testing.T) *approval.Manager {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "approvals.db"))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
			return manager(t, approval.ManagerConfig{Store: st})
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := pgtest.URL(t)
		approvaltest.RunManager(t, func(t *testing.T) *approval.Manager {
			st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(pgtest.Schema(t, url, "planround_approvaltest_")))
			require.NoError(t, err)
			t.Cleanup(st.Close)
			return manager(t, approval.ManagerConfig{Store: st, Notifier: st})
		})
	})
}
