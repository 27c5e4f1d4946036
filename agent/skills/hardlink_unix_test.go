//go:build unix

package skills_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/skills"
)

// hardlink creates name under dir as a hard link to target.
func hardlink(t *testing.T, dir, name, target string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	if err := os.Link(target, p); err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatalf("link: %v", err)
		}
		t.Skipf("cannot create hard links here: %v", err)
	}
}

// A file with more than one hard link may be a file from outside the
// folder, which no check of paths can see: it is not read, as a SKILL.md
// (the skill is skipped) or as another file (not listed, and get_skill
// refuses it), whether through LoadDir or Load over os.DirFS. The normal
// files of the same skill are read.
func TestHardLinksRefused(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "skills")
	outside := filepath.Join(top, "outside")
	write(t, outside, "secret.txt", "TOP SECRET")
	write(t, outside, "SKILL.md", "---\nname: outside\ndescription: Lives outside the skills folder.\n---\nTOP SECRET")
	write(t, dir, "a/SKILL.md", "---\nname: a\ndescription: d\n---\nbody of a")
	write(t, dir, "a/ref.md", "ref of a")
	hardlink(t, dir, "a/secret.md", filepath.Join(outside, "secret.txt"))
	hardlink(t, dir, "b/SKILL.md", filepath.Join(outside, "SKILL.md"))

	for name, load := range map[string]func(...skills.Option) (*skills.Set, error){
		"LoadDir": func(opts ...skills.Option) (*skills.Set, error) { return skills.LoadDir(dir, opts...) },
		"Load":    func(opts ...skills.Option) (*skills.Set, error) { return skills.Load(os.DirFS(dir), opts...) },
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			s, err := load(skills.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, s.Names())
			require.Len(t, s.Skipped(), 1)
			assert.Equal(t, "b", s.Skipped()[0].Dir)
			assert.EqualError(t, s.Skipped()[0].Err, "SKILL.md is refused: it has 2 hard links, and a file with more than one may be a file from outside the folder (copy it instead of linking it)")
			a, _ := s.Lookup("a")
			assert.Equal(t, []string{"ref.md"}, a.Files, "a file with hard links is not listed")
			assert.Contains(t, logs.String(), "secret.md is refused: it has 2 hard links", "and the host is told why")

			ctx := context.Background()
			got, err := getSkill(ctx, s, "a", "secret.md")
			assert.Empty(t, got)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `file "secret.md" of the skill "a": secret.md is refused: it has 2 hard links`)
			assert.NotContains(t, err.Error(), "TOP SECRET")
			got, err = getSkill(ctx, s, "a", "ref.md")
			require.NoError(t, err)
			assert.Equal(t, "ref of a", got)
		})
	}

	// WithHardLinks reads them, for a folder whose links are known to be its
	// own (a package manager's store).
	s, err := skills.LoadDir(dir, skills.WithHardLinks())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "outside"}, s.Names())
	got, err := getSkill(context.Background(), s, "a", "secret.md")
	require.NoError(t, err)
	assert.Equal(t, "TOP SECRET", got)

	// A symbolic link to a file with one link is one file, not refused.
	symlink(t, dir, "a/alias.md", "ref.md")
	s, err = skills.LoadDir(dir)
	require.NoError(t, err)
	got, err = getSkill(context.Background(), s, "a", "alias.md")
	require.NoError(t, err)
	assert.Equal(t, "ref of a", got)
}
