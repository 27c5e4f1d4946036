//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd's process the leader of a new process group,
// which everything it starts joins unless it leaves on purpose.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup asks cmd's process group to end.
func terminateGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}

// killGroup kills cmd's process group. The group outlives its leader while
// a member is alive, so this also reaches what the server started after it
// exited.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
