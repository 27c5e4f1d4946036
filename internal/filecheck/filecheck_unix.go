//go:build unix

package filecheck

import (
	"io/fs"
	"syscall"
)

// NonBlock is the flag that, with os.O_RDONLY, opens a named pipe without
// waiting for a writer (O_NONBLOCK), so that a caller can Stat the open
// file and refuse it. It changes nothing for a regular file.
const NonBlock = syscall.O_NONBLOCK

func fileID(fi fs.FileInfo) (id, bool) {
	if fi == nil {
		return id{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return id{}, false
	}
	return id{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}

func links(fi fs.FileInfo) (uint64, bool) {
	if fi == nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return 0, false
	}
	return uint64(st.Nlink), true
}
