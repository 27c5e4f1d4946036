//go:build !unix

package procgroup

import "os/exec"

// start starts cmd: there are no process groups here.
func start(cmd *exec.Cmd) (*Group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Group{cmd: cmd}, nil
}

// Terminate does nothing: there is no SIGTERM here.
func (g *Group) Terminate() {}

// Kill kills the command's own process: what it started may survive it.
// Only the first call does anything.
func (g *Group) Kill() {
	g.killOnce.Do(func() {
		g.killed.Store(true)
		_ = g.cmd.Process.Kill()
	})
}

// usesCgroups reports false: there are no cgroups here.
func usesCgroups() bool { return false }
