//go:build unix

package hooks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/hooks"
)

// A file with more than one hard link may be a file from outside the
// folder, which no check of paths can see: Load and LoadDir refuse it, as
// hooks.json or as a hook's file, and name it; normal files load.
func TestHardLinksRefused(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	secret := filepath.Join(outside, "secret.md")
	require.NoError(t, os.WriteFile(secret, []byte("TOP SECRET"), 0o600))
	outIndex := filepath.Join(outside, "hooks.json")
	require.NoError(t, os.WriteFile(outIndex, []byte(`{"hooks": [{"at": "before_planning", "text": "TOP SECRET"}]}`), 0o600))
	dir := filepath.Join(top, "hooks")
	require.NoError(t, os.Mkdir(dir, 0o755))
	write := func(name, s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600))
	}
	link := func(target, name string) {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
		if err := os.Link(target, filepath.Join(dir, name)); err != nil {
			if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
				t.Fatalf("hard links: %v", err)
			}
			t.Skipf("hard links not available: %v", err)
		}
	}
	write("hooks.json", `{"hooks": [{"at": "before_planning", "file": "rules.md"}, {"name": "out", "at": "after_planning", "file": "out.md"}]}`)
	write("rules.md", "Be brief.")
	write("out.md", "Say less.")

	load := map[string]func() ([]agent.Hook, error){
		"LoadDir": func() ([]agent.Hook, error) { return hooks.LoadDir(dir) },
		"Load":    func() ([]agent.Hook, error) { return hooks.Load(os.DirFS(dir)) },
	}
	for name, load := range load {
		hs, err := load()
		require.NoError(t, err, name)
		require.Len(t, hs, 2, name)
		assert.Equal(t, "Say less.", hs[1].(hooks.Entry).Injection.Content, name)
	}

	link(secret, "out.md")
	for name, load := range load {
		hs, err := load()
		assert.Nil(t, hs, name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), `hooks.json: entry 2 ("out"): file "out.md": out.md is refused: it has 2 hard links, and a file with more than one may be a file from outside the folder (copy it instead of linking it)`, name)
		assert.NotContains(t, err.Error(), "TOP SECRET", name)
	}

	write("out.md", "Say less.")
	link(outIndex, "hooks.json")
	for name, load := range load {
		hs, err := load()
		assert.Nil(t, hs, name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), `hooks.json: hooks.json is refused: it has 2 hard links`, name)
	}
}
