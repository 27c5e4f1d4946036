package datadir

import (
	"os"
	"path/filepath"
	"testing"
)

// With $XDG_DATA_HOME set, the folder is the app's in it, made 0700.
func TestDirXDG(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_DATA_HOME", base)
	dir, err := Dir("planround-test")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "planround-test"); dir != want {
		t.Fatalf("Dir = %q, want %q", dir, want)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want a folder with 0700", dir, fi.Mode())
	}
}
