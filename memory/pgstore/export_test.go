package pgstore

// Exported for the tests of package pgstore_test.
var (
	PgChannel     = pgChannel
	ListenAppName = listenAppName
)
