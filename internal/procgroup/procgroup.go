// Package procgroup runs a command in a process group of its own, so that
// the command and everything it starts (the real program behind a wrapper
// such as sh, npx or uvx) can be ended together, and, on Linux, so that the
// group dies with the process that started it, however that process ends:
// even killed with SIGKILL, when no clean-up code runs.
//
// On Linux the group's leader is a guard: a small /bin/sh script, a child
// of this process started just before the command, which then joins the
// guard's group (so the group's id is the guard's pid, not the command's).
// The command itself is started as [exec.Cmd.Start] would start it (same
// pid, arguments, environment, streams, exit status and errors). The guard
// holds the read end of a pipe whose write end only this process holds (one
// pipe for all groups, made for the first). When this process ends, the
// kernel closes that end, the guard reads the end of the pipe and kills its
// whole group with SIGKILL. Unlike a parent-death signal, which the kernel
// sends when the thread that started the child ends, this does not depend
// on which Go thread started the guard. The guard ignores SIGTERM, SIGHUP
// and SIGINT, holds none of the command's files, and is ended and waited
// for by [Group.Kill]. On a system without /bin/sh the command leads its
// group without a guard.
//
// On other Unix systems the command leads its group without a guard: a
// process that dies without clean-up leaves the group running. Elsewhere
// there are no process groups: [Group.Kill] ends the command's own process
// only.
package procgroup

import (
	"os/exec"
	"sync"
	"sync/atomic"
)

// Group is the process group of a command started by [Start]. Its methods
// are safe for concurrent use.
type Group struct {
	cmd   *exec.Cmd
	pgid  int       // the group's id; 0 without process groups
	guard *exec.Cmd // the group's leader; nil without a guard

	killOnce sync.Once
	killed   atomic.Bool // set before the group is killed
}

// Start starts cmd, made by [exec.Command], in a new process group, and
// returns the group. It sets cmd.SysProcAttr's process group fields, and
// fails as cmd.Start does. Call [Group.Kill] when done with the command,
// even after it exited: that ends what it left running, and the guard.
func Start(cmd *exec.Cmd) (*Group, error) {
	return start(cmd)
}
