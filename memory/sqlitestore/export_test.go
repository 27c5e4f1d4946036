package sqlitestore

// ArchiveSQL is archiveSQL, for the tests of package sqlitestore_test.
const ArchiveSQL = archiveSQL
