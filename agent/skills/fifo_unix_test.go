//go:build unix

package skills_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/skills"
)

// A named pipe in a skill's folder is neither listed nor opened: opening
// it would block until someone writes to it.
func TestNamedPipeRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a/SKILL.md", "---\nname: a\ndescription: d\n---\nbody")
	if err := syscall.Mkfifo(filepath.Join(dir, "a", "pipe"), 0o644); err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatalf("mkfifo: %v", err)
		}
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	write(t, dir, "b/pipe.md", "")
	require.NoError(t, os.Remove(filepath.Join(dir, "b", "pipe.md")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "b", "SKILL.md"), 0o644))

	s, err := skills.LoadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, s.Names())
	require.Len(t, s.Skipped(), 1)
	assert.ErrorContains(t, s.Skipped()[0].Err, "SKILL.md is not a regular file")
	a, _ := s.Lookup("a")
	assert.Empty(t, a.Files)
	_, err = getSkill(context.Background(), s, "a", "pipe")
	assert.ErrorContains(t, err, `cannot read file "pipe" of the skill "a": pipe is not a regular file`)
}
