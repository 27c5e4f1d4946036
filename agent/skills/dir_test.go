package skills_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/skills"
)

// write creates the file name under dir with its folders.
func write(t testing.TB, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

// symlink creates the link name under dir pointing to target.
func symlink(t *testing.T, dir, name, target string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	if err := os.Symlink(target, p); err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatalf("symlink: %v", err)
		}
		t.Skipf("cannot create symbolic links here: %v", err)
	}
}

// A real folder on disk, with symbolic links inside the skill, out of it,
// absolute, and a linked skill folder: LoadDir follows only those that stay
// inside the skill's folder.
func TestLoadDirSymlinks(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "skills")
	outside := filepath.Join(top, "outside")
	write(t, outside, "secret.txt", "TOP SECRET")
	write(t, outside, "SKILL.md", "---\nname: outside\ndescription: Lives outside the skills folder.\n---\nTOP SECRET")

	write(t, dir, "pdf/SKILL.md", "---\nname: pdf\ndescription: Read PDFs.\n---\nUse pdftotext.")
	write(t, dir, "pdf/reference.md", "the reference")
	write(t, dir, "pdf/docs/notes.md", "notes")
	write(t, dir, "other/SKILL.md", "---\nname: other\ndescription: Another skill.\n---\nOther body.")
	symlink(t, dir, "pdf/link-in.md", "docs/notes.md")
	symlink(t, dir, "pdf/docs/up.md", "../reference.md")
	symlink(t, dir, "pdf/link-sibling.md", "../other/SKILL.md") // inside the skills folder, outside the skill's
	symlink(t, dir, "pdf/link-out.md", "../../outside/secret.txt")
	symlink(t, dir, "pdf/link-abs.md", filepath.Join(outside, "secret.txt"))
	symlink(t, dir, "pdf/link-abs-in.md", filepath.Join(dir, "pdf", "reference.md"))
	symlink(t, dir, "pdf/link-dir", "../../outside")
	symlink(t, dir, "evil/SKILL.md", "../../outside/SKILL.md")
	symlink(t, dir, "linked", "../outside")

	s, err := skills.LoadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"other", "pdf"}, s.Names(), "a linked folder is not searched")
	require.Len(t, s.Skipped(), 1)
	assert.Equal(t, "evil", s.Skipped()[0].Dir)
	assert.ErrorContains(t, s.Skipped()[0].Err, "leaves the skill folder")
	pdf, _ := s.Lookup("pdf")
	assert.Equal(t, []string{"docs/notes.md", "docs/up.md", "link-in.md", "reference.md"}, pdf.Files)

	ctx := context.Background()
	for file, want := range map[string]string{
		"reference.md":  "the reference",
		"link-in.md":    "notes",
		"docs/up.md":    "the reference",
		"docs/notes.md": "notes",
	} {
		got, err := getSkill(ctx, s, "pdf", file)
		if assert.NoError(t, err, file) {
			assert.Equal(t, want, got, file)
		}
	}
	for file, wantErr := range map[string]string{
		"link-sibling.md":           "a symbolic link leaves the skill folder",
		"link-out.md":               "a symbolic link leaves the skill folder",
		"link-abs.md":               "leaves the skill folder",
		"link-abs-in.md":            "leaves the skill folder", // absolute targets are refused, wherever they point
		"link-dir/secret.txt":       "a symbolic link leaves the skill folder",
		"../outside/secret.txt":     "leaves the skill folder",
		"../../outside/secret.txt":  "leaves the skill folder",
		filepath.Join(outside, "x"): "is an absolute path",
		"docs":                      "is a folder",
	} {
		got, err := getSkill(ctx, s, "pdf", file)
		if assert.Error(t, err, file) {
			assert.Contains(t, err.Error(), wantErr, file)
			assert.NotContains(t, err.Error(), "TOP SECRET", file)
		}
		assert.Empty(t, got, file)
	}
}

// The instructions are read once by LoadDir; the other files are read when
// get_skill asks for them, through a root opened for the call.
func TestLoadDirReadsFilesOnRequest(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a/SKILL.md", "---\nname: a\ndescription: d\n---\nfirst body")
	write(t, dir, "a/ref.md", "first ref")
	s, err := skills.LoadDir(dir)
	require.NoError(t, err)

	write(t, dir, "a/SKILL.md", "---\nname: a\ndescription: d\n---\nsecond body")
	write(t, dir, "a/ref.md", "second ref")
	got, err := getSkill(context.Background(), s, "a", "")
	require.NoError(t, err)
	assert.Contains(t, got, "first body")
	got, err = getSkill(context.Background(), s, "a", "ref.md")
	require.NoError(t, err)
	assert.Equal(t, "second ref", got)

	require.NoError(t, os.RemoveAll(dir))
	_, err = getSkill(context.Background(), s, "a", "ref.md")
	assert.ErrorContains(t, err, "cannot open the skills folder")
}
