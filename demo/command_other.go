//go:build !unix

package demo

import "os/exec"

// shellCommand returns the command that runs command with sh -c. Without
// process groups here, only the shell itself can be killed.
func shellCommand(command string) *exec.Cmd {
	return exec.Command("sh", "-c", command)
}

// killProcessGroup kills the command's own process only.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
