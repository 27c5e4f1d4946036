package sqlitestore_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/planround/planround/memory/sqlitestore"
)

// With $XDG_DATA_HOME set, the file is in the app's folder there, and the
// folder is made 0700.
func TestUserDataPathXDG(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_DATA_HOME", base)
	path, err := sqlitestore.UserDataPath("planround-test", "chat.db")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "planround-test", "chat.db"); path != want {
		t.Fatalf("UserDataPath = %q, want %q", path, want)
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want a folder with 0700", filepath.Dir(path), fi.Mode())
	}
}

// Without it, on Linux, the folder is under ~/.local/share.
func TestUserDataPathHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", home)
	path, err := sqlitestore.UserDataPath("planround-test", "chat.db")
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the per-user folder on %s is the system's, not checked here", runtime.GOOS)
	}
	if want := filepath.Join(home, ".local", "share", "planround-test", "chat.db"); path != want {
		t.Fatalf("UserDataPath = %q, want %q", path, want)
	}
}
