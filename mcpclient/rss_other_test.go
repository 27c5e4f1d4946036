//go:build !linux

package mcpclient

// processRSS cannot read a process's resident set size on this system.
func processRSS(pid int) (int64, bool) { return 0, false }
