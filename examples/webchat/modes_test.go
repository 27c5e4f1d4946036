//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/planround/planround/internal/leaktest"
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

// TestDataFilesArePrivate: under the usual umask 022 the -db file of the
// running server, the -wal and -shm files beside it and the -trace file
// are its user's only (0600), not readable by every user of the machine
// (0644).
func TestDataFilesArePrivate(t *testing.T) {
	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "WEBCHAT_TOKEN"} {
		t.Setenv(k, "")
	}
	umask022(t)
	dir := t.TempDir()
	db, tr := filepath.Join(dir, "chat.db"), filepath.Join(dir, "trace.jsonl")
	p := startProgram(t, "-db", db, "-trace", tr)
	assertMode(t, 0o600, db, db+"-wal", db+"-shm", tr)
	assert.Equal(t, 0, p.stop(t), "stderr: %s", p.stderr.String())
	assertMode(t, 0o600, db, tr)
}
