package demo

import (
	"os/exec"
	"syscall"
)

// groupGuard is the shell script that runs the user's command ($1) on
// Linux. The script leads the command's process group and is sent SIGTERM
// when the process that started it dies (the parent-death signal); its
// trap then kills the whole group, the command's children included. The
// command runs in the background under wait, because a shell runs a trap
// only after its foreground child has ended, and wait returns at once on a
// trapped signal. The script's exit status is the command's.
const groupGuard = `trap 'kill -s KILL 0' TERM; sh -c "$1" & wait $!`

// shellCommand returns the command that runs command with sh -c as the
// leader of a new process group, guarded by [groupGuard] so that the group
// dies with this process, however this process ends.
//
// The parent-death signal comes when the thread that started the child
// ends; Go keeps its threads for the life of the process unless a goroutine
// exits while locked to one, which this package never does.
func shellCommand(command string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", groupGuard, "run_command", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return cmd
}
