//go:build unix

package mcptest

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a new process group, so that killGroup
// also ends whatever it starts.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// killGroup kills the process group that the process pid leads.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// Alive reports whether the process pid exists and has not ended: a zombie
// (ended, not yet reaped by its parent) counts as gone.
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	return !zombie(pid)
}
