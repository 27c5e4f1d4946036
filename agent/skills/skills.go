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

	"github.com/planround/planround/internal/filecheck"
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
	// symbolic links that leave the folder, and files with more than one
	// hard link (see WithHardLinks).
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
	// folders holds, by skill name, what the skill's folder was when Load
	// read it; get_skill reads a skill's files only from that folder.
	folders map[string]fs.FileInfo
	// open opens the file system the skills were loaded from; get_skill
	// reads the skills' other files through it, on request.
	open      func() (tree, error)
	hardLinks bool
	selector  func(ctx context.Context, sessionID string) []string
}

// An Option changes how Load works.
type Option func(*options)

type options struct {
	logger    *slog.Logger
	hardLinks bool
	selector  func(ctx context.Context, sessionID string) []string
}

// WithLogger sets the logger that receives one warning per skipped skill;
// by default they are discarded (Set.Skipped keeps them anyway).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithHardLinks has the Set read files that have more than one hard link,
// which it refuses by default (see "Links and changes" in the package doc).
//
// A hard link is the file itself under a second name: nothing in the
// folder tells a file of the folder from a file elsewhere linked into it,
// so a folder that others can write to could bring in any file of the same
// file system that the host can read. Use WithHardLinks only for a folder
// whose links are known to be its own, such as one a package manager
// installed from its store (pnpm, a Nix store with optimise-store), where
// every file may have several links.
func WithHardLinks() Option {
	return func(o *options) { o.hardLinks = true }
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
// no link that leaves it. A file with more than one hard link is refused
// unless WithHardLinks says otherwise: a SKILL.md leaves its skill out, and
// another file is not listed in Skill.Files (a warning is logged) and
// get_skill does not return it. get_skill reads the skills' other files from
// fsys when the model asks for them, so fsys must stay usable as long as
// the Set is.
//
// Over a plain fs.FS, get_skill can check only paths: a folder or link
// swapped on a file's path while a call reads it can still lead the call to
// another file of fsys, and with os.DirFS even to a file outside it. LoadDir
// reads through handles instead; see "Links and changes" in the package
// doc.
//
// Load returns an error only when fsys's root cannot be read (LoadDir: when
// the folder cannot be opened). With no skill found, the Set is empty.
func Load(fsys fs.FS, opts ...Option) (*Set, error) {
	return load(func() (tree, error) { return tree{fsys: fsys}, nil }, opts)
}

// LoadDir loads the skills of the folder dir, as Load does, reading every
// file through handles of the operating system rather than paths: dir is
// opened with os.OpenRoot each time it is read (by LoadDir, and by get_skill
// for a skill's other files), and each skill's folder with os.Root.OpenRoot
// from it, so that nothing read for a skill comes from outside its folder,
// whatever the links in it say or become during the read, and nothing stays
// open between calls; on Unix, get_skill reads a skill's files only from
// the folder LoadDir loaded it from (see "Links and changes" in the package
// doc). A relative dir is taken from the working directory at the time of
// LoadDir.
func LoadDir(dir string, opts ...Option) (*Set, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	return load(func() (tree, error) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return tree{}, fmt.Errorf("skills: %w", err)
		}
		return tree{fsys: root.FS(), root: root}, nil
	}, opts)
}

// tree is the file system a Set reads, opened for one Load or one get_skill
// call.
type tree struct {
	fsys fs.FS
	root *os.Root // LoadDir's folder, whose FS fsys is; nil for Load
}

func (t tree) close() {
	if t.root != nil {
		t.root.Close()
	}
}

// folder opens the skill folder dir of t. Under LoadDir it is a root of its
// own, opened from t's handle, so that what is read in it stays in it and
// its paths no longer depend on dir's name; over another fs.FS it is the
// path dir.
func (t tree) folder(dir string) (folder, error) {
	if t.root == nil {
		return folder{fsys: t.fsys, dir: dir}, nil
	}
	if dir == "." {
		return folder{fsys: t.fsys, dir: ".", root: t.root}, nil
	}
	r, err := t.root.OpenRoot(dir)
	if err != nil {
		return folder{}, err
	}
	return folder{fsys: r.FS(), dir: ".", root: r, own: true}, nil
}

// folder is one skill's folder, open for reading its files.
type folder struct {
	fsys fs.FS
	dir  string   // the folder in fsys: "." when fsys is the folder's root
	root *os.Root // the folder's root (LoadDir), whose FS fsys is, or nil
	own  bool     // root was opened for the folder: close closes it
}

func (f folder) close() {
	if f.own {
		f.root.Close()
	}
}

// stat describes the folder: under LoadDir the folder held open, whatever
// its path names now.
func (f folder) stat() (fs.FileInfo, error) {
	if f.root != nil {
		return f.root.Stat(".")
	}
	return fs.Stat(f.fsys, f.dir)
}

// open opens the file at the path p of fsys for reading; under LoadDir
// without waiting on a named pipe, so that readFile can Stat it and refuse
// it.
func (f folder) open(p string) (fs.File, error) {
	if f.root != nil {
		return f.root.OpenFile(p, os.O_RDONLY|filecheck.NonBlock, 0)
	}
	return f.fsys.Open(p)
}

func load(open func() (tree, error), opts []Option) (*Set, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t, err := open()
	if err != nil {
		return nil, err
	}
	defer t.close()
	fsys := t.fsys

	s := &Set{open: open, hardLinks: o.hardLinks, selector: o.selector, folders: make(map[string]fs.FileInfo)}
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
		sk, info, err := loadSkill(t, p, o.hardLinks, logger)
		switch {
		case err != nil:
			skip(p, err)
		case byName[sk.Name] != "":
			skip(p, fmt.Errorf("the name %q is taken by the skill in %s", sk.Name, byName[sk.Name]))
		default:
			byName[sk.Name] = p
			s.skills = append(s.skills, sk)
			s.folders[sk.Name] = info
		}
		return fs.SkipDir
	})
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	slices.SortFunc(s.skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// loadSkill reads the skill in the folder dir of t, and returns it with
// what its folder is (folder.stat), for get_skill to find it again.
func loadSkill(t tree, dir string, hardLinks bool, logger *slog.Logger) (Skill, fs.FileInfo, error) {
	f, err := t.folder(dir)
	if err != nil {
		return Skill{}, nil, fmt.Errorf("cannot open the folder: %w", err)
	}
	defer f.close()
	info, err := f.stat()
	if err != nil {
		return Skill{}, nil, fmt.Errorf("cannot read the folder: %w", err)
	}
	data, err := readFile(f, FileName, hardLinks)
	if err != nil {
		return Skill{}, nil, err
	}
	fm, err := parseSkillFile(data)
	if err != nil {
		return Skill{}, nil, err
	}
	files := listFiles(f, hardLinks, func(name string, err error) {
		logger.Warn("skill file left out", slog.String("dir", dir), slog.String("file", name), slog.String("reason", err.Error()))
	})
	return Skill{
		Name:        fm.name,
		Description: fm.description,
		Meta:        fm.meta,
		Body:        fm.body,
		Dir:         dir,
		Files:       files,
	}, info, nil
}

// listFiles returns the files of the skill folder f that get_skill can
// return, relative to it: at most maxFiles. A file that get_skill would
// refuse for its hard links is left out and told to leftOut.
func listFiles(f folder, hardLinks bool, leftOut func(name string, err error)) []string {
	fsys, dir := f.fsys, f.dir
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
		var info fs.FileInfo
		if d.Type()&fs.ModeSymlink != 0 {
			// Listed only when it leads to a file inside the folder.
			_, info, err = resolve(fsys, dir, rel)
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		if !hardLinks {
			if info == nil {
				if info, err = d.Info(); err != nil {
					return nil
				}
			}
			if err := filecheck.HardLinked(rel, info); err != nil {
				leftOut(rel, err)
				return nil
			}
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

// readFile reads the file name of the skill folder f, following symbolic
// links only inside it, and refuses what is not a regular file, has more
// than one hard link (unless hardLinks) or is larger than MaxFileSize.
//
// The checks that decide what is read are made on the open file, and the
// file opened must be the one resolve found (where the system says), so
// that a link or folder swapped between the two is an error, not another
// file read.
func readFile(f folder, name string, hardLinks bool) ([]byte, error) {
	real, info, err := resolve(f.fsys, f.dir, name)
	if err != nil {
		return nil, err
	}
	// A first look before Open, which would block on a named pipe over an
	// fs.FS (LoadDir's folders open without waiting).
	if err := checkMode(name, info); err != nil {
		return nil, err
	}
	file, err := f.open(real)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	opened, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if same, known := filecheck.Same(info, opened); known && !same {
		return nil, fmt.Errorf("%s changed while it was being read (a link or folder on its path was replaced); ask again", name)
	}
	if err := checkMode(name, opened); err != nil {
		return nil, err
	}
	if !hardLinks {
		if err := filecheck.HardLinked(name, opened); err != nil {
			return nil, err
		}
	}
	if opened.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than the limit of %d", errTooLarge, name, opened.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(file, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s has more than the limit of %d bytes", errTooLarge, name, MaxFileSize)
	}
	return data, nil
}

// checkMode refuses a folder and what else is not a regular file.
func checkMode(name string, info fs.FileInfo) error {
	switch {
	case info.IsDir():
		return fmt.Errorf("%s: %w", name, errIsDir)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", name)
	}
	return nil
}
