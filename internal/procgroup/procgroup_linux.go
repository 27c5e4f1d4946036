package procgroup

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// guardScript is the guard: it waits on the pipe (file descriptor 3),
// which nobody writes to, so that the read returns only when the last
// write end is closed, when the process that started it has ended. Then it
// kills the command's cgroup ($1, when there is one) and removes it, and
// kills its own process group, itself included.
//
// The cgroup is killed with cgroup.kill when $2 is "kill" and the kernel
// has it; otherwise the cgroup is frozen and each of its processes is
// killed, again until none is left. The cgroup is removed, and those the
// command made below it, once their processes are gone, five seconds at
// most (then a cgroup frozen is thawed). Only builtins run until then:
// rmdir and sleep are the first commands started.
const guardScript = `trap '' TERM HUP INT QUIT
read x <&3
if [ -n "$1" ] && [ -d "$1" ]; then
	PATH=/usr/sbin:/usr/bin:/sbin:/bin
	k() {
		while read p; do kill -s KILL "$p"; done <"$1/cgroup.procs"
		for c in "$1"/*/; do [ -d "$c" ] && k "${c%/}"; done
	}
	r() {
		for c in "$1"/*/; do [ -d "$c" ] && r "${c%/}"; done
		rmdir "$1" 2>/dev/null
	}
	f=
	if [ "$2" != kill ] || ! { echo 1 >"$1/cgroup.kill"; } 2>/dev/null; then
		f=1
		echo 1 >"$1/cgroup.freeze"
	fi
	i=0
	while [ -d "$1" ] && [ $i -lt 100 ]; do
		[ -z "$f" ] || k "$1"
		r "$1" || sleep 0.05 || sleep 1
		i=$((i+1))
	done
	[ -z "$f" ] || ! [ -d "$1" ] || echo 0 >"$1/cgroup.freeze"
fi
kill -s KILL 0`

// shell runs the guard.
const shell = "/bin/sh"

// lifeline is the pipe of all guards: its read end is given to each, its
// write end stays open in this process until this process ends (it is
// close-on-exec, like every file Go opens, so no child gets it). Both stay
// referenced from here, so no finalizer closes them.
var lifeline struct {
	once sync.Once
	r, w *os.File // nil when there can be no guard
}

func lifelineReader() *os.File {
	lifeline.once.Do(func() {
		if _, err := os.Stat(shell); err != nil {
			return
		}
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		lifeline.r, lifeline.w = r, w
	})
	return lifeline.r
}

// startGuard starts a guard leading a new process group, which is to kill
// and remove the cgroup at dir ("" for none) when this process ends; nil
// when it cannot.
//
// Until a guard has been started so, a guard given a cgroup is the probe
// of cgroups: it is started into this process's own cgroup with
// CLONE_INTO_CGROUP, as the command will be into its cgroup. If that
// fails, and starting the guard without it does not, cgroups are off.
func startGuard(dir string) *exec.Cmd {
	r := lifelineReader()
	if r == nil {
		return nil
	}
	method := "kill"
	if freezeOnly {
		method = "freeze"
	}
	g := exec.Command(shell, "-c", guardScript, "planround-guard", dir, method)
	g.Env = []string{}
	g.ExtraFiles = []*os.File{r}
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dir != "" && !cgroups.probed.Load() {
		fd, err := openCgroupParent()
		if err != nil {
			cgroups.off.Store(true)
			return startGuard("")
		}
		g.SysProcAttr.UseCgroupFD, g.SysProcAttr.CgroupFD = true, fd
		err = g.Start()
		_ = syscall.Close(fd)
		if err == nil {
			cgroups.probed.Store(true)
			return g
		}
		if g = startGuard(""); g != nil {
			cgroups.off.Store(true)
		}
		return g
	}
	if err := g.Start(); err != nil {
		return nil
	}
	return g
}

// start starts the guard, then cmd in the guard's group and, where this
// process may make cgroups, in a cgroup of its own. The guard is started
// first, and the cgroup made after it, so that no moment passes with cmd
// running unguarded or with a cgroup that nothing would remove: if this
// process dies before cmd starts, the guard's read ends at once and it
// removes the cgroup if it was made.
func start(cmd *exec.Cmd) (*Group, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Setpgid = true
	attr.Pgid = 0 // a new group, led by cmd, without a guard
	var guard *exec.Cmd
	cgroup, cgroupFD := "", -1
	if cmd.Err == nil { // cmd.Start fails at once otherwise
		if !attr.UseCgroupFD { // the caller's own cgroup wins
			cgroup = newCgroupPath()
		}
		guard = startGuard(cgroup)
		if guard == nil || cgroups.off.Load() {
			cgroup = ""
		}
		if cgroup != "" {
			fd, err := makeCgroup(cgroup)
			if err != nil {
				// The guard must not remove a cgroup that is not ours:
				// one without a cgroup replaces it.
				stopGuard(guard)
				guard, cgroup = startGuard(""), ""
			} else {
				cgroupFD = fd
			}
		}
	}
	if guard != nil {
		// The guard's group exists once its Start returned, and lives
		// as long as the guard.
		attr.Pgid = guard.Process.Pid
	}
	if cgroupFD >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, cgroupFD
	}
	err := cmd.Start()
	if cgroupFD >= 0 {
		_ = syscall.Close(cgroupFD)
	}
	if err != nil {
		if cgroup != "" {
			_ = syscall.Rmdir(cgroup) // empty: cmd did not start
		}
		stopGuard(guard)
		return nil, err
	}
	if guard == nil {
		return &Group{cmd: cmd, pgid: cmd.Process.Pid}, nil
	}
	return &Group{cmd: cmd, pgid: guard.Process.Pid, guard: guard, cgroup: cgroup}, nil
}

// stopGuard kills and reaps a guard that guards nothing yet.
func stopGuard(guard *exec.Cmd) {
	if guard != nil {
		_ = guard.Process.Kill()
		_ = guard.Wait()
	}
}

// killCgroupOf kills the processes of g's cgroup, if it has one: those
// that left the process group too. It reports whether they were killed
// with cgroup.kill.
func (g *Group) killCgroupOf() bool {
	return g.cgroup == "" || killCgroup(g.cgroup)
}

// removeCgroupOf waits for the processes of g's cgroup to be gone, a few
// seconds at most, and removes it.
func (g *Group) removeCgroupOf(killed bool) {
	if g.cgroup != "" {
		_ = removeCgroup(g.cgroup, killed)
	}
}

// usesCgroups: see UsesCgroups.
func usesCgroups() bool {
	return lifelineReader() != nil && cgroupParent() != ""
}
