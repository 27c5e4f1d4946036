//go:build unix && !linux

package demo

import (
	"os/exec"
	"syscall"
)

// shellCommand returns the command that runs command with sh -c as the
// leader of a new process group, so its children can be killed together.
// Without a parent-death signal on this system, the group outlives a
// process that dies without cleaning up (SIGKILL).
func shellCommand(command string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
