//go:build unix

package demo

import (
	"os/exec"
	"syscall"
)

// killProcessGroup kills every process of the command's group. The group
// id is the shell's pid; the group cannot be reused while any member of
// it lives, and an empty group gives ESRCH, which is ignored.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
