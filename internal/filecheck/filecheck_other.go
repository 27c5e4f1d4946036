//go:build !unix

package filecheck

import "io/fs"

// NonBlock is 0 where named pipes are not files of a folder.
const NonBlock = 0

// fileID and links know nothing here: the FileInfo of these systems
// carries neither an inode number nor a link count.
func fileID(fs.FileInfo) (id, bool)    { return id{}, false }
func links(fs.FileInfo) (uint64, bool) { return 0, false }
