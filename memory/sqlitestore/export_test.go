package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/planround/planround/memory"
)

// ArchiveSQL is archiveSQL, for the tests of package sqlitestore_test.
const ArchiveSQL = archiveSQL

// ApprovalByKeySQL is approvalByKeySQL, for the tests of package
// sqlitestore_test.
const ApprovalByKeySQL = approvalByKeySQL

// DecisionsSQL is decisionsSQL, for the tests of package sqlitestore_test.
func DecisionsSQL(q memory.DecisionQuery) (string, []any) { return decisionsSQL(q) }

// MigrateTo brings the schema of the empty database db to version n with
// the migrations that Open runs, as a database that an older version of the
// store left, for the tests of package sqlitestore_test.
func MigrateTo(ctx context.Context, db *sql.DB, n int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i, m := range migrations[:n] {
		if m.sql != "" {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if m.fn != nil {
			if err := m.fn(ctx, tx); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", n, sqliteAppID)); err != nil {
		return err
	}
	return tx.Commit()
}
