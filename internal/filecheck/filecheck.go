// Package filecheck holds the checks that the packages reading a user's
// folder (agent/skills, agent/hooks) make on a file they opened, beyond its
// path: whether it is the file whose path they checked, how many hard links
// it has, and how to open it without waiting on a named pipe.
//
// Each check needs what the operating system says of a file: the
// fs.FileInfo of os.Stat, os.File.Stat, an os.Root or os.DirFS, whose Sys
// is a *syscall.Stat_t on Unix. Where there is no such thing (another
// system, a file system such as fstest.MapFS), the check says it does not
// know, and the callers take the file on its path's word.
package filecheck

import (
	"fmt"
	"io/fs"
)

// Same reports whether a and b describe the same file: the same device and
// inode number. known is false when either does not say (see the package
// doc); then same is false too.
func Same(a, b fs.FileInfo) (same, known bool) {
	ida, oka := fileID(a)
	idb, okb := fileID(b)
	if !oka || !okb {
		return false, false
	}
	return ida == idb, true
}

// Links returns the number of hard links to the file fi describes; ok is
// false when fi does not say (see the package doc).
func Links(fi fs.FileInfo) (n uint64, ok bool) {
	return links(fi)
}

// HardLinked returns an error naming name, the file fi describes, when it
// has more than one hard link, and nil otherwise (also when fi does not
// say). A hard link is the file itself under another name: no check of a
// folder's paths can tell a file of the folder from a file elsewhere linked
// into it, so the callers refuse what may be one.
func HardLinked(name string, fi fs.FileInfo) error {
	if n, ok := links(fi); ok && n > 1 {
		return fmt.Errorf("%s is refused: it has %d hard links, and a file with more than one may be a file from outside the folder (copy it instead of linking it)", name, n)
	}
	return nil
}

// id is what tells two files apart on one system.
type id struct{ dev, ino uint64 }
