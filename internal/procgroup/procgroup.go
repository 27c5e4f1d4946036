// Package procgroup runs a command in a process group of its own, so that
// the command and everything it starts (the real program behind a wrapper
// such as sh, npx or uvx) can be ended together, and, on Linux, so that
// what it starts dies with the process that started it, however that
// process ends: even killed with SIGKILL, when no clean-up code runs.
//
// On Linux the group's leader is a guard: a small /bin/sh script, a child
// of this process started just before the command, which then joins the
// guard's group (so the group's id is the guard's pid, not the command's).
// The command itself is started as [exec.Cmd.Start] would start it (same
// pid, arguments, environment, streams, exit status and errors). The guard
// holds the read end of a pipe whose write end only this process holds (one
// pipe for all groups, made for the first). When this process ends, the
// kernel closes that end, the guard reads the end of the pipe and kills what
// it guards with SIGKILL. Unlike a parent-death signal, which the kernel
// sends when the thread that started the child ends, this does not depend
// on which Go thread started the guard. The guard ignores SIGTERM, SIGHUP
// and SIGINT, holds none of the command's files, and is ended and waited
// for by [Group.Kill]. On a system without /bin/sh the command leads its
// group without a guard.
//
// # Cgroups
//
// A process can leave its process group: setsid(1) or a daemon's double
// fork moves it to a session of its own, setpgid to another group. Killing
// the group misses it. So on Linux, where this process may (see
// [UsesCgroups]), the command is also started in a cgroup v2 of its own,
// made in this process's own cgroup (the one /proc/self/cgroup names, under
// the cgroup2 mount) and named planround-PID-N. The command is born there
// (clone3 with CLONE_INTO_CGROUP), and so is everything it starts,
// whatever session or group they move to. [Group.Kill] and the guard kill
// the whole cgroup, and the cgroups made below it, with cgroup.kill (Linux
// 5.14; before, by freezing it and killing its processes one by one), wait
// for its processes to be gone and remove it, so that neither a cgroup nor
// a guard is left (a process that SIGKILL does not end within five
// seconds, stuck in the kernel, keeps its cgroup); the guard itself stays
// in this process's cgroup. This needs a cgroup v2 (a hybrid hierarchy's unified
// mount will do), a kernel that starts processes into a cgroup (Linux 5.7,
// with no seccomp filter refusing clone3: the first guard started is the
// probe) and write access to this process's cgroup directory and its
// cgroup.procs: root has it, a user has it in a cgroup delegated to them
// (systemd's Delegate=yes; systemd does not expect cgroups in a unit that
// did not ask for delegation). A cgroup whose type is not "domain" (a
// threaded subtree) is not used. Elsewhere the command runs under the
// guard without a cgroup.
//
// The guard and Kill reach the command's process group and, with a
// cgroup, everything in the command's cgroup, whatever its session or
// group. They do not reach:
//
//   - without a cgroup, a process that left the group;
//   - with one, a process that moves itself to another cgroup by writing
//     its pid to that cgroup's cgroup.procs. That takes write access there
//     and in the common ancestor, which a process of the same user as this
//     one has to this process's cgroup (the access that lets this process
//     make cgroups lets its commands leave them); root has it everywhere;
//   - a process that something outside the cgroup starts for the command
//     (a service manager, at, cron);
//   - anything once the guard itself is gone: a command may kill its guard
//     (same user), and then nothing kills it, or what it started in
//     whatever session, when this process dies ([Group.Kill] still does,
//     with a cgroup).
//
// [Group.Terminate] reaches the process group only.
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
	// cgroup is the directory of the command's cgroup (Linux); "" without.
	cgroup string

	killOnce sync.Once
	killed   atomic.Bool // set before the group is killed
}

// Start starts cmd, made by [exec.Command], in a new process group (and,
// on Linux, in a cgroup of its own where it can), and returns the group.
// It sets cmd.SysProcAttr's process group fields and, with a cgroup, its
// UseCgroupFD and CgroupFD (a cmd whose UseCgroupFD is set already keeps
// its cgroup and gets none of its own). It fails as cmd.Start does. Call
// [Group.Kill] when done with the command, even after it exited: that ends
// what it left running, and the guard, and removes the cgroup.
func Start(cmd *exec.Cmd) (*Group, error) {
	return start(cmd)
}

// UsesCgroups reports whether [Start] puts each command into a cgroup of
// its own in this process: on Linux, when this process has a cgroup v2 in
// which it may make cgroups and start processes, and /bin/sh for the
// guard. It may turn false after a call to Start, when the kernel refuses
// to start a process into a cgroup (before Linux 5.7, or under a seccomp
// filter that refuses clone3).
func UsesCgroups() bool {
	return usesCgroups()
}
