package procgroup

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// guardScript is the guard: it waits on the pipe (file descriptor 3),
// which nobody writes to, so that the read returns only when the last
// write end is closed, when the process that started it has ended; then it
// kills its group.
const guardScript = `trap '' TERM HUP INT QUIT; read x <&3; kill -s KILL 0`

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

// startGuard starts a guard leading a new process group; nil when it
// cannot.
func startGuard() *exec.Cmd {
	r := lifelineReader()
	if r == nil {
		return nil
	}
	g := exec.Command(shell, "-c", guardScript)
	g.Env = []string{}
	g.ExtraFiles = []*os.File{r}
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.Start(); err != nil {
		return nil
	}
	return g
}

// start starts the guard, then cmd in the guard's group. The guard is
// started first so that no moment passes with cmd running unguarded: if
// this process dies before cmd starts, the guard's read ends at once.
func start(cmd *exec.Cmd) (*Group, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0 // a new group, led by cmd, without a guard
	var guard *exec.Cmd
	if cmd.Err == nil { // cmd.Start fails at once otherwise
		guard = startGuard()
	}
	if guard != nil {
		// The guard's group exists once its Start returned, and lives
		// as long as the guard.
		cmd.SysProcAttr.Pgid = guard.Process.Pid
	}
	if err := cmd.Start(); err != nil {
		if guard != nil {
			_ = guard.Process.Kill()
			_ = guard.Wait()
		}
		return nil, err
	}
	if guard == nil {
		return &Group{cmd: cmd, pgid: cmd.Process.Pid}, nil
	}
	return &Group{cmd: cmd, pgid: guard.Process.Pid, guard: guard}, nil
}
