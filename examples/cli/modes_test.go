//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// umask022 sets the process's umask to the usual 022 until t ends. The
// umask is the whole process's: a test that calls it must not run in
// parallel with tests that create files.
func umask022(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

// assertMode checks the permission bits of the file at path.
func assertMode(t *testing.T, want fs.FileMode, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if assert.NoError(t, err) {
		assert.Equal(t, want.String(), fi.Mode().Perm().String(), "mode of %s", filepath.Base(path))
	}
}

// TestDataFilesArePrivate: under the usual umask 022 the -db and -trace
// files the CLI creates are its user's only (0600), not readable by every
// user of the machine (0644); a -trace file that exists keeps its mode.
func TestDataFilesArePrivate(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	umask022(t)
	dir := t.TempDir()
	db, tr := filepath.Join(dir, "chat.db"), filepath.Join(dir, "trace.jsonl")
	r := runCLI(t, "", "-db", db, "-trace", tr, helloPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assertMode(t, 0o600, db)
	assertMode(t, 0o600, tr)

	shared := filepath.Join(dir, "shared.jsonl")
	require.NoError(t, os.WriteFile(shared, []byte("old spans\n"), 0o640))
	r = runCLI(t, "", "-trace", shared, helloPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assertMode(t, 0o640, shared)
	data, err := os.ReadFile(shared)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "old spans", "the file was emptied first")
}
