package skills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// FileName is the name of the file that makes a folder a skill.
const FileName = "SKILL.md"

// MaxFileSize is the largest file, in bytes, that a skill may hold and
// get_skill returns: a SKILL.md above it is skipped, another file above it
// is refused. What get_skill returns stays whole in every later request, so
// it is kept to what a context window can carry (about 64k tokens).
const MaxFileSize = 256 << 10

// maxFiles bounds Skill.Files.
const maxFiles = 100

// Skill is one skill: a folder holding a SKILL.md.
type Skill struct {
	// Name is the front matter's name, unique in its Set: ASCII letters,
	// digits, '-', '_' and '.', starting with a letter or digit, at most
	// MaxNameLen. Unlike the open skill format, Load does not require it to
	// match the folder's name.
	Name string
	// Description says what the skill is for and when to use it; the
	// model reads it in the skills block of every request.
	Description string
	// Meta holds the front matter's other keys as YAML decoded them
	// (license, allowed-tools, metadata, ...), every mapping as a
	// map[string]any; nil when there are none. Meta and Files are shared
	// by the copies a Set returns: do not change them.
	Meta map[string]any
	// Body is SKILL.md after its front matter: the skill's instructions,
	// which get_skill returns. It is read once, by Load.
	Body string
	// Dir is the skill's folder, a path in the file system given to Load
	// ("." when the root itself holds the SKILL.md).
	Dir string
	// Files are the other files of the folder, relative to Dir and
	// sorted, that get_skill can return: at most 100, not counting
	// SKILL.md, hidden files and folders (whose name starts with a dot),
	// and symbolic links that leave the folder.
	Files []string
}

// Skipped is a folder that Load left out, and why: a skill folder whose
// SKILL.md is unreadable, too large, has malformed front matter, a missing
// or invalid name or description, or a name already taken; or a folder
// that could not be searched.
type Skipped struct {
	// Dir is the folder, a path in the file system given to Load.
	Dir string
	// Err says why.
	Err error
}

// Set is the skills Load found. It does not change once loaded and is safe
// for concurrent use.
type Set struct {
	skills  []Skill // sorted by name
	skipped []Skipped
	// open gives the file system the skills were loaded from and a
	// function that releases it; get_skill reads the skills' other files
	// through it, on request.
	open     func() (fs.FS, func() error, error)
	selector func(ctx context.Context, sessionID string) []string
}

// An Option changes how Load works.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	selector func(ctx context.Context, sessionID string) []string
}

// WithLogger sets the logger that receives one warning per skipped skill;
// by default they are discarded (Set.Skipped keeps them anyway).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithSelector sets how the Set finds the skills enabled for a run when its
// context carries none (see WithEnabled): f gets the run's context and
// session id and returns the names of the enabled skills (nil enables
// none; names the Set does not hold are ignored). A host that keeps the
// choice per session uses it; to enable every skill for a session with no
// choice yet, return Set.Names.
//
// f is called by the layer once per run and by get_skill once per call,
// possibly from several goroutines at once.
func WithSelector(f func(ctx context.Context, sessionID string) []string) Option {
	return func(o *options) { o.selector = f }
}

// Load finds the skills in fsys: every folder, at any depth, that holds a
// file named SKILL.md is one skill, and is not searched further for others.
// Folders whose name starts with a dot (.git) are not searched, nor are
// symbolic links to folders.
//
// SKILL.md starts with YAML front matter between two lines "---", holding
// at least name and description (see Skill), then the skill's instructions
// in Markdown. A SKILL.md that cannot be read, is larger than MaxFileSize,
// has malformed front matter or a missing or invalid name or description,
// or names a skill found before it (folders are searched in lexical order)
// leaves its skill out: the reason is logged (WithLogger) and kept in
// Set.Skipped, and the other skills load.
//
// A symbolic link in a skill's folder is followed only when its target,
// read with fs.ReadLink, is a relative path that stays inside the folder;
// a file system that does not implement fs.ReadLinkFS is trusted to hold
// no link that leaves it. get_skill reads the skills' other files from
// fsys when the model asks for them, so fsys must stay usable as long as
// the Set is.
//
// Load returns an error only when fsys's root cannot be read (LoadDir: when
// the folder cannot be opened). With no skill found, the Set is empty.
func Load(fsys fs.FS, opts ...Option) (*Set, error) {
	return load(func() (fs.FS, func() error, error) { return fsys, nopClose, nil }, opts)
}

// LoadDir loads the skills of the folder dir, as Load does. The folder is
// opened with os.OpenRoot each time it is read (by LoadDir, and by get_skill
// for a skill's other files), so nothing stays open between calls and
// symbolic links that leave dir are refused by the operating system too.
// A relative dir is taken from the working directory at the time of
// LoadDir.
func LoadDir(dir string, opts ...Option) (*Set, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	return load(func() (fs.FS, func() error, error) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("skills: %w", err)
		}
		return root.FS(), root.Close, nil
	}, opts)
}

func nopClose() error { return nil }

func load(open func() (fs.FS, func() error, error), opts []Option) (*Set, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fsys, done, err := open()
	if err != nil {
		return nil, err
	}
	defer done()

	s := &Set{open: open, selector: o.selector}
	byName := make(map[string]string) // name -> dir
	skip := func(dir string, err error) {
		s.skipped = append(s.skipped, Skipped{Dir: dir, Err: err})
		logger.Warn("skill skipped", slog.String("dir", dir), slog.String("reason", err.Error()))
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			skip(p, fmt.Errorf("cannot read the folder: %w", err))
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if _, err := fs.Lstat(fsys, path.Join(p, FileName)); err != nil {
			return nil // not a skill folder; search inside
		}
		sk, err := loadSkill(fsys, p)
		switch {
		case err != nil:
			skip(p, err)
		case byName[sk.Name] != "":
			skip(p, fmt.Errorf("the name %q is taken by the skill in %s", sk.Name, byName[sk.Name]))
		default:
			byName[sk.Name] = p
			s.skills = append(s.skills, sk)
		}
		return fs.SkipDir
	})
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	slices.SortFunc(s.skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// loadSkill reads the skill in dir.
func loadSkill(fsys fs.FS, dir string) (Skill, error) {
	data, err := readFile(fsys, dir, FileName)
	if err != nil {
		return Skill{}, err
	}
	fm, err := parseSkillFile(data)
	if err != nil {
		return Skill{}, err
	}
	return Skill{
		Name:        fm.name,
		Description: fm.description,
		Meta:        fm.meta,
		Body:        fm.body,
		Dir:         dir,
		Files:       listFiles(fsys, dir),
	}, nil
}

// listFiles returns the files of the skill in dir that get_skill can
// return, relative to dir: at most maxFiles.
func listFiles(fsys fs.FS, dir string) []string {
	var files []string
	fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return fs.SkipDir
		case len(files) == maxFiles:
			return fs.SkipAll
		case p == dir:
			return nil
		case strings.HasPrefix(d.Name(), "."):
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case d.IsDir():
			return nil
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if dir == "." {
			rel = p
		}
		if rel == FileName {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Listed only when it leads to a file inside the folder.
			real, err := resolve(fsys, dir, rel)
			if err != nil {
				return nil
			}
			if info, err := fs.Stat(fsys, real); err != nil || !info.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, rel)
		return nil
	})
	slices.Sort(files)
	return files
}

// Skills returns the skills, sorted by name.
func (s *Set) Skills() []Skill {
	return slices.Clone(s.skills)
}

// Names returns the skills' names, sorted.
func (s *Set) Names() []string {
	names := make([]string, len(s.skills))
	for i, sk := range s.skills {
		names[i] = sk.Name
	}
	return names
}

// Lookup returns the skill with that name.
func (s *Set) Lookup(name string) (Skill, bool) {
	i, ok := slices.BinarySearchFunc(s.skills, name, func(sk Skill, name string) int { return strings.Compare(sk.Name, name) })
	if !ok {
		return Skill{}, false
	}
	return s.skills[i], true
}

// Skipped returns the folders that Load left out, and why, in the order
// they were found.
func (s *Set) Skipped() []Skipped {
	return slices.Clone(s.skipped)
}

// Errors of readFile that get_skill tells apart.
var (
	errTooLarge = errors.New("file too large")
	errIsDir    = errors.New("is a folder")
)

// readFile reads the file name of the skill in dir, following symbolic
// links only inside dir, and refuses what is not a regular file or is
// larger than MaxFileSize.
func readFile(fsys fs.FS, dir, name string) ([]byte, error) {
	real, err := resolve(fsys, dir, name)
	if err != nil {
		return nil, err
	}
	// real holds no symbolic link, so Stat describes the file itself; it
	// comes before Open, which would block on a named pipe.
	info, err := fs.Stat(fsys, real)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s: %w", name, errIsDir)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than the limit of %d", errTooLarge, name, info.Size(), MaxFileSize)
	}
	f, err := fsys.Open(real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s has more than the limit of %d bytes", errTooLarge, name, MaxFileSize)
	}
	return data, nil
}
