//go:build linux

package mcpclient

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// processRSS is the resident set size of process pid in bytes, read from
// the VmRSS line of /proc/<pid>/status; ok is false when it cannot be read.
func processRSS(pid int) (rss int64, ok bool) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		// VmRSS:	    7424 kB
		if rest, found := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); found {
			f := bytes.Fields(rest)
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
