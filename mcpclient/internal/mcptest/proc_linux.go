package mcptest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// dieWithParent has the kernel kill the process when the test process dies,
// so that not even a crashed test leaves a server behind. (The signal comes
// when the thread that started the process ends; Go keeps its threads unless
// a goroutine exits while locked to one.)
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// zombie reports whether pid has ended and waits to be reaped, reading the
// state in /proc/<pid>/stat (the field after the parenthesised name).
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err) // gone between the signal and the read
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}
