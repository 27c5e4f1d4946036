//go:build unix

package hooks_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/hooks"
)

// swapFS is os.DirFS with links, that runs beforeOpen before each Open.
type swapFS struct {
	fs.ReadLinkFS
	beforeOpen func(name string)
}

func (f swapFS) Open(name string) (fs.File, error) {
	f.beforeOpen(name)
	return f.ReadLinkFS.Open(name)
}

// The file Load reads must be the file whose path it checked: one swapped
// for a link to another file between the check and the open is refused.
func TestFileSwappedBeforeOpen(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "hooks")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(`{"hooks": [{"at": "before_planning", "file": "rules.md"}]}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.md"), []byte("Be brief."), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(top, "secret.md"), []byte("TOP SECRET"), 0o600))
	swap := false
	fsys := swapFS{ReadLinkFS: os.DirFS(dir).(fs.ReadLinkFS), beforeOpen: func(name string) {
		if !swap || name != "rules.md" {
			return
		}
		p := filepath.Join(dir, "rules.md")
		require.NoError(t, os.Rename(p, filepath.Join(top, "rules.md")))
		if err := os.Symlink("../secret.md", p); err != nil {
			if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
				t.Fatalf("symbolic links: %v", err)
			}
			t.Skipf("symbolic links not available: %v", err)
		}
	}}

	hs, err := hooks.Load(fsys)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	assert.Equal(t, "Be brief.", hs[0].(hooks.Entry).Injection.Content)

	swap = true
	hs, err = hooks.Load(fsys)
	assert.Nil(t, hs)
	assert.EqualError(t, err, `hooks: hooks.json: entry 1: file "rules.md": it changed while it was being read (a link or folder on its path was replaced)`)
}
