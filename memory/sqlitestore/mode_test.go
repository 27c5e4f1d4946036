//go:build unix

package sqlitestore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// umask022 sets the process's umask to the usual 022 until t ends. The
// umask is the whole process's: a test that calls it must not run in
// parallel with tests that create files.
func umask022(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

// assertMode checks the permission bits of the files at paths.
func assertMode(t *testing.T, want fs.FileMode, paths ...string) {
	t.Helper()
	for _, p := range paths {
		fi, err := os.Stat(p)
		if assert.NoError(t, err) {
			assert.Equal(t, want.String(), fi.Mode().Perm().String(), "mode of %s", filepath.Base(p))
		}
	}
}

// TestOpenCreatesPrivateFiles: under the usual umask 022 a database that
// Open creates, and the -wal and -shm files SQLite makes beside it once it
// is written, are the owner's only (0600), not readable by every user of
// the machine (0644, the driver's own default). So is the rollback journal
// of a program that opens the file without WAL.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	umask022(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "chat.db")
	st := openSQLite(t, path)
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	_, err = st.Append(ctx, "s", userMsg("a secret"), asst("kept"))
	require.NoError(t, err)
	assertMode(t, 0o600, path, path+"-wal", path+"-shm")
	require.NoError(t, st.Close())

	// PERSIST keeps the -journal file after the transaction, to look at.
	db := rawDB(t, "file:"+path+"?_pragma=journal_mode(PERSIST)")
	_, err = db.ExecContext(ctx, "UPDATE sessions SET title = 'journaled'")
	require.NoError(t, err)
	assertMode(t, 0o600, path, path+"-journal")
}

// TestOpenKeepsModeOfExistingFile: Open does not change the mode of a file
// that exists, even an empty one (a new database to SQLite), and SQLite
// gives the -wal and -shm files that file's mode.
func TestOpenKeepsModeOfExistingFile(t *testing.T) {
	umask022(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	require.NoError(t, os.WriteFile(path, nil, 0o640))
	st := openSQLite(t, path)
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	assertMode(t, 0o640, path, path+"-wal", path+"-shm")
	require.NoError(t, st.Close())

	// A database whose owner made it private stays private.
	require.NoError(t, os.Chmod(path, 0o600))
	st, err = sqlitestore.Open(ctx, path)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Append(ctx, "s", userMsg("hi"))
	require.NoError(t, err)
	assertMode(t, 0o600, path, path+"-wal", path+"-shm")
}
