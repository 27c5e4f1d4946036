package pgstore

import "github.com/planround/planround/memory"

// Exported for the tests of package pgstore_test.
var (
	PgChannel     = pgChannel
	ListenAppName = listenAppName
)

// DecisionsSQL is st.decisionsSQL, for the tests of package pgstore_test.
func DecisionsSQL(st *Store, q memory.DecisionQuery) (string, []any) { return st.decisionsSQL(q) }
