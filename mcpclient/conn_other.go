//go:build !unix

package mcpclient

import "os/exec"

// On systems without Unix process groups only the server's own process is
// ended: a wrapper's children may survive it.

func ownProcessGroup(cmd *exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
}
