//go:build unix && !linux

package procgroup

import (
	"os/exec"
	"syscall"
)

// start starts cmd as the leader of a new process group, without a guard.
func start(cmd *exec.Cmd) (*Group, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Group{cmd: cmd, pgid: cmd.Process.Pid}, nil
}

// killCgroupOf does nothing: there are no cgroups here.
func (g *Group) killCgroupOf() bool { return true }

// removeCgroupOf does nothing: there are no cgroups here.
func (g *Group) removeCgroupOf(bool) {}

// usesCgroups reports false: there are no cgroups here.
func usesCgroups() bool { return false }
