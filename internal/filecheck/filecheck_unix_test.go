//go:build unix

package filecheck_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/filecheck"
)

func TestSameAndLinks(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("a"), 0o600))
	require.NoError(t, os.WriteFile(b, []byte("b"), 0o600))
	ia, err := os.Stat(a)
	require.NoError(t, err)
	ib, err := os.Stat(b)
	require.NoError(t, err)
	f, err := os.Open(a)
	require.NoError(t, err)
	defer f.Close()
	ifa, err := f.Stat()
	require.NoError(t, err)
	mapInfo, err := fs.Stat(fstest.MapFS{"a": {Data: []byte("a")}}, "a")
	require.NoError(t, err)

	for _, tt := range []struct {
		name        string
		x, y        fs.FileInfo
		same, known bool
	}{
		{"a path and its open file", ia, ifa, true, true},
		{"two files", ia, ib, false, true},
		{"no system info", ia, mapInfo, false, false},
		{"nil", nil, ia, false, false},
	} {
		same, known := filecheck.Same(tt.x, tt.y)
		assert.Equal(t, tt.same, same, tt.name)
		assert.Equal(t, tt.known, known, tt.name)
	}

	n, ok := filecheck.Links(ia)
	assert.True(t, ok)
	assert.EqualValues(t, 1, n)
	assert.NoError(t, filecheck.HardLinked("a", ia))
	_, ok = filecheck.Links(mapInfo)
	assert.False(t, ok)
	assert.NoError(t, filecheck.HardLinked("a", mapInfo), "unknown is not refused")

	if err := os.Link(a, filepath.Join(dir, "c")); err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatalf("link: %v", err)
		}
		t.Skipf("cannot create hard links here: %v", err)
	}
	ia, err = f.Stat()
	require.NoError(t, err)
	n, ok = filecheck.Links(ia)
	assert.True(t, ok)
	assert.EqualValues(t, 2, n)
	assert.EqualError(t, filecheck.HardLinked("x/a.md", ia), "x/a.md is refused: it has 2 hard links, and a file with more than one may be a file from outside the folder (copy it instead of linking it)")
}

// A named pipe opened with NonBlock does not wait for a writer.
func TestNonBlockOpensNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatalf("mkfifo: %v", err)
		}
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|filecheck.NonBlock, 0)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	assert.Equal(t, fs.ModeNamedPipe, fi.Mode().Type())
}
