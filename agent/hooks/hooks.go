// Package hooks loads prompt hooks for package agent from a folder: a
// hooks.json file lists them, and Markdown files beside it hold their text.
//
// A hooks.json looks like this:
//
//	{
//	  "hooks": [
//	    {"name": "house-rules", "at": "before_planning", "file": "rules.md"},
//	    {"at": "after_tool_results", "role": "user", "text": "Say which tools you used."},
//	    {"at": "before_final_answer", "persistent": true, "file": "style/answer.md"}
//	  ]
//	}
//
// Each entry is one injection at one checkpoint:
//
//   - "at" (required) is the checkpoint's name: before_planning,
//     after_planning, before_tool_round, after_tool_results or
//     before_final_answer (see [agent.Checkpoint] for when each is asked);
//   - "role" is "system" (the default) or "user";
//   - "persistent" keeps the injection in the conversation (see
//     [agent.Injection]); the default sends it in the next request only;
//   - "file" names a file of the folder that holds the text, a path
//     with "/" between its elements that stays inside the folder (no "..",
//     no leading "/", no backslash; a symbolic link may point to another
//     file of the folder, never out of it), of at most [MaxBody] bytes of
//     UTF-8 text, with one hard link (see below); "text" gives the text
//     inline instead. Exactly one of the two. Leading and trailing white
//     space is trimmed; what remains must not be empty;
//   - "name" is optional: errors name the entry with it.
//
// Unknown keys are refused, so that a misspelt one ("persistant") is an
// error rather than a hook that silently does something else. The files
// are read once, by [Load]: a change needs a new Load (and a new Agent).
//
// # Links
//
// A file with more than one hard link, hooks.json included, is refused: a
// hard link is the file itself under a second name, and nothing in the
// folder tells a file of its own from a file elsewhere linked into it. A
// folder of hooks is a few files written by hand or checked out with git,
// which makes no hard links; copy files instead of linking them (a package
// manager that links from its store, such as pnpm, can be told to copy).
// The link count comes from the operating system on Unix; elsewhere
// (Windows) it is not checked, and a hard link to a file outside the
// folder is read like any other file: only paths are checked there, and
// they show no hard link.
//
// The checks that decide what is read (a regular file, its size, its
// links) are made on the open file, which must be the file whose path was
// checked (where the system gives inode numbers): a link swapped between
// the check and the read is an error, not another file read. [LoadDir]
// also has the operating system refuse, at the moment of the read, any
// link that leaves the folder.
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/filecheck"
	"github.com/planround/planround/memory"
)

// FileName is the name of the file that lists the hooks of a folder.
const FileName = "hooks.json"

// MaxBody is the size limit, in bytes, of the text of one hook's file.
// Every injection goes into a request, so a hook is a prompt, not a
// document.
const MaxBody = 64 << 10

// maxIndex is the size limit of hooks.json.
const maxIndex = 1 << 20

// maxLinks bounds the symbolic links followed to find one file.
const maxLinks = 32

// Entry is one hook of a hooks.json: it injects its Injection at its
// checkpoint, and nothing at the others. [Load] returns the entries as
// [agent.Hook] values of this type.
type Entry struct {
	// Name is the entry's "name"; it may be empty.
	Name string
	// At is the checkpoint where the entry injects.
	At agent.Checkpoint
	// Injection is what it injects, its Content read from File or given
	// inline.
	Injection agent.Injection
	// File is the path of the file that held the text in the folder, or
	// empty for an inline text.
	File string
}

// Inject returns e's injection at e.At, and nothing at the other
// checkpoints.
func (e Entry) Inject(_ context.Context, at agent.Checkpoint, _ agent.HookState) ([]agent.Injection, error) {
	if at != e.At {
		return nil, nil
	}
	return []agent.Injection{e.Injection}, nil
}

// Load reads hooks.json at the root of fsys and the files its entries
// name, and returns one hook per entry, in the file's order, ready for
// agent.Config.Hooks. Any problem is an error that names the entry (its
// position, counting from 1, and its name) and what is wrong with it, and
// no hook is returned: a folder of hooks loads whole or not at all. A
// folder without hooks.json is an error that wraps fs.ErrNotExist.
//
// Over an fs.FS that implements fs.ReadLinkFS (os.DirFS, an os.Root's FS,
// fstest.MapFS) symbolic links are followed only while they stay inside
// fsys; [LoadDir] has the operating system enforce it too. A file with more
// than one hard link is refused (see "Links" in the package doc).
func Load(fsys fs.FS) ([]agent.Hook, error) {
	return load(folder{fsys: fsys}, FileName)
}

// LoadDir is Load on the folder dir, opened with os.OpenRoot: no file
// outside dir is read, whatever the links in it say or become during the
// read.
func LoadDir(dir string) ([]agent.Hook, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	defer root.Close()
	return load(folder{fsys: root.FS(), root: root}, filepath.Join(dir, FileName))
}

// folder is the folder of hooks being loaded.
type folder struct {
	fsys fs.FS
	root *os.Root // LoadDir's folder, whose FS fsys is; nil for Load
}

// open opens the file at the path p of fsys for reading; under LoadDir
// without waiting on a named pipe, so that readFile can Stat it and refuse
// it.
func (d folder) open(p string) (fs.File, error) {
	if d.root != nil {
		return d.root.OpenFile(p, os.O_RDONLY|filecheck.NonBlock, 0)
	}
	return d.fsys.Open(p)
}

// entry is an entry of hooks.json as written.
type entry struct {
	Name       string  `json:"name"`
	At         string  `json:"at"`
	Role       string  `json:"role"`
	Persistent bool    `json:"persistent"`
	File       string  `json:"file"`
	Text       *string `json:"text"`
}

func load(dir folder, index string) ([]agent.Hook, error) {
	b, err := readFile(dir, FileName, maxIndex)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("hooks: %s not found (a folder of hooks lists them in %s): %w", index, FileName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("hooks: %s: %w", index, err)
	}
	var doc struct {
		Hooks []json.RawMessage `json:"hooks"`
	}
	if err := strictJSON(b, &doc); err != nil {
		return nil, fmt.Errorf("hooks: %s: %w", index, err)
	}
	if doc.Hooks == nil {
		return nil, fmt.Errorf("hooks: %s: no \"hooks\" list", index)
	}
	out := make([]agent.Hook, 0, len(doc.Hooks))
	for i, raw := range doc.Hooks {
		var e entry
		err := strictJSON(raw, &e)
		if err == nil {
			var h Entry
			h, err = e.hook(dir)
			out = append(out, h)
		}
		if err != nil {
			what := fmt.Sprintf("entry %d", i+1)
			if e.Name != "" {
				what += fmt.Sprintf(" (%q)", e.Name)
			}
			return nil, fmt.Errorf("hooks: %s: %s: %w", index, what, err)
		}
	}
	return out, nil
}

// strictJSON decodes b, one JSON value, into v, refusing unknown keys.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: more after the first value")
	}
	return nil
}

// checkpoints are the names "at" accepts.
var checkpoints = []agent.Checkpoint{agent.BeforePlanning, agent.AfterPlanning, agent.BeforeToolRound, agent.AfterToolResults, agent.BeforeFinalAnswer}

func (e entry) hook(dir folder) (Entry, error) {
	h := Entry{Name: e.Name, At: agent.Checkpoint(e.At), File: e.File}
	known := false
	for _, cp := range checkpoints {
		known = known || cp == h.At
	}
	if !known {
		names := make([]string, len(checkpoints))
		for i, cp := range checkpoints {
			names[i] = string(cp)
		}
		return h, fmt.Errorf("unknown checkpoint \"at\": %q (want one of %s)", e.At, strings.Join(names, ", "))
	}
	switch e.Role {
	case "", string(memory.RoleSystem):
		h.Injection.Role = memory.RoleSystem
	case string(memory.RoleUser):
		h.Injection.Role = memory.RoleUser
	default:
		return h, fmt.Errorf("unknown \"role\": %q (want \"system\" or \"user\")", e.Role)
	}
	h.Injection.Persistent = e.Persistent
	var text string
	switch {
	case e.File != "" && e.Text != nil:
		return h, errors.New("both \"file\" and \"text\": give one")
	case e.File != "":
		b, err := readFile(dir, e.File, MaxBody)
		if err != nil {
			return h, fmt.Errorf("file %q: %w", e.File, err)
		}
		text = string(b)
	case e.Text != nil:
		text = *e.Text
	default:
		return h, errors.New("no \"file\" or \"text\": give one")
	}
	if !utf8.ValidString(text) {
		return h, errors.New("the text is not UTF-8")
	}
	h.Injection.Content = strings.TrimSpace(text)
	if h.Injection.Content == "" {
		return h, errors.New("the text is empty")
	}
	return h, nil
}

// readFile reads the regular file name of the folder dir, of at most
// limit bytes and with one hard link, after checking that name, and every
// symbolic link on the way to it, stays inside the folder. The checks that
// decide what is read are made on the open file, which must be the file
// resolve found (where the system says).
func readFile(dir folder, name string, limit int64) ([]byte, error) {
	if !fs.ValidPath(name) || name == "." || strings.Contains(name, `\`) {
		return nil, errors.New(`not a path inside the folder (elements separated by "/", no "..", no leading "/", no backslash)`)
	}
	real, fi, err := resolve(dir.fsys, name)
	if err != nil {
		return nil, err
	}
	// A first look before Open, which would block on a named pipe over an
	// fs.FS (LoadDir's folder opens without waiting).
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	f, err := dir.open(real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if same, known := filecheck.Same(fi, opened); known && !same {
		return nil, errors.New("it changed while it was being read (a link or folder on its path was replaced)")
	}
	if !opened.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", opened.Mode().Type())
	}
	if err := filecheck.HardLinked(name, opened); err != nil {
		return nil, err
	}
	if opened.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d", opened.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew since Stat
		return nil, fmt.Errorf("more than the limit of %d bytes", limit)
	}
	return b, nil
}

// resolve returns name with the symbolic links along it followed, when
// fsys can read links, and what fs.Lstat (fs.Stat when fsys cannot read
// links) said of the result; a link whose target is absolute or leaves fsys
// is an error.
func resolve(fsys fs.FS, name string) (string, fs.FileInfo, error) {
	if _, ok := fsys.(fs.ReadLinkFS); !ok {
		fi, err := fs.Stat(fsys, name)
		if err != nil {
			return "", nil, err
		}
		return name, fi, nil
	}
	done, rest := "", strings.Split(name, "/")
	var info fs.FileInfo // fs.Lstat of done, when known
	links := 0
	for len(rest) > 0 {
		p := path.Join(done, rest[0])
		rest = rest[1:]
		fi, err := fs.Lstat(fsys, p)
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done, info = p, fi
			continue
		}
		if links++; links > maxLinks {
			return "", nil, fmt.Errorf("more than %d symbolic links", maxLinks)
		}
		target, err := fs.ReadLink(fsys, p)
		if err != nil {
			return "", nil, err
		}
		t := path.Join(done, target) // relative to the link's folder
		if path.IsAbs(target) || strings.Contains(target, `\`) || t == ".." || strings.HasPrefix(t, "../") {
			return "", nil, fmt.Errorf("%s is a symbolic link to %q, outside the folder", p, target)
		}
		done, info = "", nil
		if t != "." {
			rest = append(strings.Split(t, "/"), rest...)
		}
	}
	if done == "" {
		done = "." // a link to the folder itself
	}
	if info == nil {
		fi, err := fs.Lstat(fsys, done)
		if err != nil {
			return "", nil, err
		}
		info = fi
	}
	return done, info, nil
}
