//go:build unix

package skills_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/skills"
)

// writeTwoSkills writes the skills a and b under top/skills, each with the
// files docs/ref.md and ref.md that say whose they are, and returns the
// skills folder.
func writeTwoSkills(t *testing.T, top string) string {
	t.Helper()
	dir := filepath.Join(top, "skills")
	for _, name := range []string{"a", "b"} {
		write(t, dir, name+"/SKILL.md", "---\nname: "+name+"\ndescription: d\n---\nbody of "+name)
		write(t, dir, name+"/docs/ref.md", "docs of "+name)
		write(t, dir, name+"/ref.md", "ref of "+name)
	}
	return dir
}

// twoSkills writes the skills of writeTwoSkills and loads them with
// LoadDir.
func twoSkills(t *testing.T, top string) (string, *skills.Set) {
	t.Helper()
	dir := writeTwoSkills(t, top)
	s, err := skills.LoadDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, s.Names())
	return dir, s
}

// A skill's folder replaced after LoadDir (here by a symbolic link to
// another skill's folder, or by a new folder) is not the folder the skill
// was loaded from: get_skill says so and returns none of its files, while
// the instructions, read by LoadDir, stay those of the skill.
func TestGetSkillFolderReplaced(t *testing.T) {
	top := t.TempDir()
	dir, s := twoSkills(t, top)
	ctx := context.Background()
	a := filepath.Join(dir, "a")

	require.NoError(t, os.Rename(a, filepath.Join(top, "a-aside")))
	symlink(t, dir, "a", "b")
	for _, file := range []string{"ref.md", "docs/ref.md"} {
		got, err := getSkill(ctx, s, "a", file)
		assert.Empty(t, got, file)
		if assert.Error(t, err, file) {
			assert.Contains(t, err.Error(), `the folder of the skill "a" is no longer the one its skills were loaded from`, file)
			assert.NotContains(t, err.Error(), "of b", file)
		}
	}
	got, err := getSkill(ctx, s, "a", "")
	require.NoError(t, err)
	assert.Contains(t, got, "body of a")

	// A new folder in its place is not it either.
	require.NoError(t, os.Remove(a))
	write(t, dir, "a/ref.md", "ref of a new a")
	_, err = getSkill(ctx, s, "a", "ref.md")
	assert.ErrorContains(t, err, "no longer the one")

	// The folder itself back in place is.
	require.NoError(t, os.RemoveAll(a))
	require.NoError(t, os.Rename(filepath.Join(top, "a-aside"), a))
	got, err = getSkill(ctx, s, "a", "ref.md")
	require.NoError(t, err)
	assert.Equal(t, "ref of a", got)
}

// While another goroutine swaps a folder and a file of skill a for
// symbolic links to skill b's (links that stay inside the skills folder,
// and that get_skill refuses when it sees them), every get_skill of a's
// files returns a's text or an error, never b's: the file read is the one
// checked, from the skill's folder. (Over a plain fs.FS such as os.DirFS,
// get_skill can check only paths, and a folder swapped between two of
// them still misleads it: see Load's doc.)
//
// The loop ends when a wrong answer is seen, or after 40,000 calls or 4
// seconds; before the fix, the wrong answer came within 2,500 calls here.
func TestGetSkillSymlinkRace(t *testing.T) {
	top := t.TempDir()
	dir, s := twoSkills(t, top)
	a := filepath.Join(dir, "a")
	aside := filepath.Join(top, "aside")
	require.NoError(t, os.Mkdir(aside, 0o755))
	symlink(t, aside, "probe", "x") // skips where links cannot be made

	const (
		maxCalls = 40_000
		maxTime  = 4 * time.Second
		callers  = 2
	)
	var (
		calls, errs atomic.Int64
		wrong       atomic.Value // string: the first wrong answer
		stop        = make(chan struct{})
		wg          sync.WaitGroup
		mu          sync.Mutex
		errTexts    = map[string]int{} // guarded by mu
	)
	deadline := time.Now().Add(maxTime)
	done := func() bool {
		return wrong.Load() != nil || calls.Load() >= maxCalls || time.Now().After(deadline)
	}

	// The swapper: a's docs folder and a's ref.md, each in turn replaced by
	// a link to b's and put back.
	swapErr := make(chan error, 1)
	go func() {
		swapErr <- func() error {
			swap := func(name, target string) error {
				p := filepath.Join(a, name)
				if err := os.Rename(p, filepath.Join(aside, name)); err != nil {
					return err
				}
				if err := os.Symlink(target, p); err != nil {
					return err
				}
				if err := os.Remove(p); err != nil {
					return err
				}
				return os.Rename(filepath.Join(aside, name), p)
			}
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				if err := swap("docs", "../b/docs"); err != nil {
					return err
				}
				if err := swap("ref.md", "../b/ref.md"); err != nil {
					return err
				}
			}
		}()
	}()

	ctx := context.Background()
	for i := range callers {
		wg.Go(func() {
			file, want := "docs/ref.md", "docs of a"
			if i%2 == 1 {
				file, want = "ref.md", "ref of a"
			}
			for !done() {
				calls.Add(1)
				got, err := getSkill(ctx, s, "a", file)
				switch {
				case err != nil:
					errs.Add(1)
					mu.Lock()
					errTexts[err.Error()]++
					mu.Unlock()
					if strings.Contains(err.Error(), "of b") {
						wrong.CompareAndSwap(nil, fmt.Sprintf("%s: error %q", file, err))
					}
				case got != want:
					wrong.CompareAndSwap(nil, fmt.Sprintf("%s: %q, want %q", file, got, want))
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-swapErr)
	t.Logf("%d calls, %d errors", calls.Load(), errs.Load())
	for text, n := range errTexts {
		t.Logf("%6d × %s", n, text)
	}
	if w := wrong.Load(); w != nil {
		t.Fatalf("get_skill of skill a returned another skill's file (after %d calls): %s", calls.Load(), w)
	}
	assert.Less(t, errs.Load(), calls.Load(), "some calls read a's file")
}

// swapFS is os.DirFS with links, that runs beforeOpen before each Open.
type swapFS struct {
	fs.ReadLinkFS
	beforeOpen func(name string)
}

func (f swapFS) Open(name string) (fs.File, error) {
	f.beforeOpen(name)
	return f.ReadLinkFS.Open(name)
}

// The file get_skill opens must be the file it checked: one swapped for a
// link to another skill's file between the check and the open is refused,
// over any fs.FS whose files have inode numbers.
func TestGetSkillFileSwappedBeforeOpen(t *testing.T) {
	top := t.TempDir()
	dir := writeTwoSkills(t, top)
	symlink(t, top, "probe", "x") // skips where links cannot be made
	swap := false
	fsys := swapFS{ReadLinkFS: os.DirFS(dir).(fs.ReadLinkFS), beforeOpen: func(name string) {
		if !swap || name != "a/ref.md" {
			return
		}
		p := filepath.Join(dir, "a", "ref.md")
		require.NoError(t, os.Rename(p, filepath.Join(top, "ref.md")))
		require.NoError(t, os.Symlink("../b/ref.md", p))
	}}
	s, err := skills.Load(fsys)
	require.NoError(t, err)

	got, err := getSkill(context.Background(), s, "a", "ref.md")
	require.NoError(t, err)
	assert.Equal(t, "ref of a", got)

	swap = true
	got, err = getSkill(context.Background(), s, "a", "ref.md")
	assert.Empty(t, got)
	assert.EqualError(t, err, `cannot read file "ref.md" of the skill "a": ref.md changed while it was being read (a link or folder on its path was replaced); ask again`)
}
