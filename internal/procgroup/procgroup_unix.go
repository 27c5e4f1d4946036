//go:build unix

package procgroup

import "syscall"

// Terminate sends SIGTERM to every process of the group (a guard ignores
// it). A process that left the group (setsid) gets nothing, even in the
// command's cgroup. After Kill it does nothing.
func (g *Group) Terminate() {
	if !g.killed.Load() {
		_ = syscall.Kill(-g.pgid, syscall.SIGTERM)
	}
}

// Kill sends SIGKILL to every process of the group and, on Linux, of the
// command's cgroup, and waits for its guard to end. The group outlives the
// command while a member lives, so this also reaches what the command
// started after it exited. With a cgroup, Kill waits for its processes to
// be gone, five seconds at most, and removes it. Only the first call does
// anything: with the guard gone, the group's id may be reused.
func (g *Group) Kill() {
	g.killOnce.Do(func() {
		g.killed.Store(true)
		// The cgroup first, and its removal, while the guard lives to
		// remove it should this process die meanwhile.
		g.removeCgroupOf(g.killCgroupOf())
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		if g.guard != nil {
			_ = g.guard.Wait()
		}
	})
}
