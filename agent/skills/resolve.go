package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// errOutside is wrapped by the errors of paths that leave a skill's folder.
var errOutside = errors.New("leaves the skill folder")

// maxLinks bounds the symbolic links followed for one path, as an
// operating system bounds them (a loop of links never ends otherwise).
const maxLinks = 40

// checkPath checks a file name given to get_skill: a relative path inside
// the skill's folder with '/' separators, no element "." or "..", and no
// hidden element (a name starting with a dot, such as .env).
func checkPath(name string) error {
	switch {
	case strings.Contains(name, `\`):
		return fmt.Errorf("file %q has a backslash; separate folders with '/'", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("file %q is an absolute path; give a path inside the skill folder: %w", name, errOutside)
	case len(name) >= 2 && name[1] == ':':
		return fmt.Errorf("file %q starts with a drive letter; give a path inside the skill folder: %w", name, errOutside)
	}
	for el := range strings.SplitSeq(name, "/") {
		if el == ".." {
			return fmt.Errorf("file %q has a \"..\" element: %w", name, errOutside)
		}
	}
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("file %q is not a file path: use names separated by single '/', without \".\" elements or a trailing '/'", name)
	}
	for el := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(el, ".") {
			return fmt.Errorf("file %q is hidden (%q starts with a dot); hidden files are not part of a skill", name, el)
		}
	}
	return nil
}

// resolve returns the path in fsys of the file name inside the folder dir
// (both valid fs paths), with every symbolic link on the way replaced by
// its target, so that the result holds none, and what fs.Lstat said of it.
// A link whose target is absolute, or leads out of dir, is refused
// (errOutside), and so is one that leads to a hidden file or folder; a
// missing element is fs.Lstat's error.
//
// A file system without fs.ReadLinkFS reports no links (fs.Lstat is
// fs.Stat there), and its paths are taken as they are.
//
// The answer holds for the moment of each fs.Lstat: a caller that opens the
// path then checks that it opened the file described (filecheck.Same).
func resolve(fsys fs.FS, dir, name string) (string, fs.FileInfo, error) {
	cur := dir           // resolved so far: dir or a path inside it, without links
	var info fs.FileInfo // fs.Lstat of cur, when known
	rest := strings.Split(name, "/")
	links := 0
	for len(rest) > 0 {
		el := rest[0]
		rest = rest[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			if cur == dir {
				return "", nil, fmt.Errorf("%s: a symbolic link %w", name, errOutside)
			}
			cur, info = path.Dir(cur), nil
			continue
		}
		if strings.HasPrefix(el, ".") {
			// Only a link's target can bring it: checkPath refuses it in
			// a name.
			return "", nil, fmt.Errorf("%s: a symbolic link leads to the hidden %q; hidden files are not part of a skill", name, el)
		}
		next := path.Join(cur, el)
		fi, err := fs.Lstat(fsys, next)
		if err != nil {
			return "", nil, err // missing or unreadable
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur, info = next, fi
			continue
		}
		if links++; links > maxLinks {
			return "", nil, fmt.Errorf("%s: more than %d symbolic links", name, maxLinks)
		}
		target, err := fs.ReadLink(fsys, next)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
		if strings.HasPrefix(target, "/") || strings.Contains(target, `\`) || len(target) >= 2 && target[1] == ':' {
			return "", nil, fmt.Errorf("%s: a symbolic link to %q %w", name, target, errOutside)
		}
		// The target is relative to the link's folder, cur.
		rest = append(strings.Split(target, "/"), rest...)
	}
	if info == nil { // a folder reached through ".." or a link to "."
		fi, err := fs.Lstat(fsys, cur)
		if err != nil {
			return "", nil, err
		}
		info = fi
	}
	return cur, info, nil
}
