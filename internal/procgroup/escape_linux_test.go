package procgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// escapeEnv makes TestEscapesDieWithHost the host ("host") or, in a
// command of the host, a process that moves to a process group of its own
// and becomes sleep ("setpgid").
const escapeEnv = "PLANROUND_TEST_PROCGROUP_ESCAPE"

// escapes are the commands of the escape tests: each starts a sleep that
// leaves the command's process group, and prints its pid. The sleep keeps
// the command's standard streams, as a careless daemon does.
var escapes = []struct{ name, script string }{
	{"setsid", `setsid sleep 1000 & echo $!`},
	// A double fork: the sleep's parent, in a session of its own, exits,
	// so that the sleep is reparented.
	{"double fork", `sh -c 'setsid sh -c "sleep 1000 & echo \$!; exit" & exit'`},
	// $0 is this test binary: with escapeEnv=setpgid it calls setpgid(0, 0)
	// and becomes sleep.
	{"setpgid", `"$0" -test.run=^TestEscapesDieWithHost$ & echo $!`},
	// With escapeEnv=nested, this test binary is a host in the command:
	// it starts the setsid command through Start, prints the pid of its
	// sleep and waits, so that its cgroup is in the command's.
	{"nested host", `"$0" -test.run=^TestEscapesDieWithHost$`},
}

// startEscapes starts the commands of escapes and returns their groups
// and the pids of the sleeps they started, once each has left its group.
// The caller kills the groups.
func startEscapes(t *testing.T) (groups []*Group, cmds []*exec.Cmd, sleeps []int) {
	t.Helper()
	for _, e := range escapes {
		cmd := exec.Command("sh", "-c", e.script, os.Args[0])
		mode := "setpgid"
		if e.name == "nested host" {
			mode = "nested"
		}
		cmd.Env = append(os.Environ(), escapeEnv+"="+mode)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		g, err := Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			g.Kill()
			_ = cmd.Wait()
		})
		groups, cmds = append(groups, g), append(cmds, cmd)
		line, err := bufio.NewReader(out).ReadString('\n')
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || pid <= 0 {
			t.Fatalf("%s: no pid (%q, %v)", e.name, line, err)
		}
		watch(t, []int{pid}, nil) // a failure leaks nothing
		sleeps = append(sleeps, pid)
		waitLeft(t, e.name, pid, g.pgid)
	}
	return groups, cmds, sleeps
}

// waitLeft waits, a few seconds at most, until process pid is sleep, out
// of group pgid: the escape happened.
func waitLeft(t *testing.T, what string, pid, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := procStat(pid)
		if ok && st.comm == "sleep" && st.pgrp != pgid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: process %d did not become sleep out of group %d: %+v", what, pid, pgid, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A command that leaves its process group (setsid, a double fork into
// another session, setpgid, a host of its own) dies with the host all the
// same: the guard kills the command's cgroup, with cgroup.kill or, as on
// a kernel without it, by freezing it and killing its processes one by
// one; then it removes the cgroup. The host is this test binary run again;
// it is killed with SIGKILL.
func TestEscapesDieWithHost(t *testing.T) {
	switch mode := os.Getenv(escapeEnv); mode {
	case "host kill", "host freeze":
		freezeOnly = mode == "host freeze"
		runEscapeHost(t)
		return
	case "setpgid":
		becomeSleep(t)
		return
	case "nested":
		runNestedHost(t)
		return
	}
	needCgroups(t)
	for _, method := range []string{"kill", "freeze"} {
		t.Run(method, func(t *testing.T) {
			leaktest.Check(t)
			escapesDieWithHost(t, method)
		})
	}
}

func escapesDieWithHost(t *testing.T, method string) {
	host, line := startHost(t, "TestEscapesDieWithHost", escapeEnv+"=host "+method)
	// "guards G... sleeps S...": the guards of the host's groups and the
	// sleeps that left them.
	guards, sleeps, ok := parseHostLine(line)
	if !ok {
		_ = host.Process.Kill()
		_ = host.Wait()
		t.Fatalf("the host gave no pids: %q", line)
	}
	dirs := cgroupDirs(t, sleeps)
	procs := watch(t, append(guards, sleeps...), dirs)

	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitGone(t, procs, dirs)
}

// runEscapeHost starts the commands of escapes, writes the line read by
// TestEscapesDieWithHost and waits for its standard input to end (the
// test kills it before).
func runEscapeHost(t *testing.T) {
	groups, cmds, sleeps := startEscapes(t)
	var guards []string
	for _, g := range groups {
		if g.guard == nil {
			t.Fatal("no guard")
		}
		guards = append(guards, strconv.Itoa(g.guard.Process.Pid))
	}
	fmt.Printf("guards %s sleeps %s\n", strings.Join(guards, " "), strings.Trim(fmt.Sprint(sleeps), "[]"))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for i, g := range groups {
		g.Kill()
		_ = cmds[i].Wait()
	}
}

func parseHostLine(line string) (guards, sleeps []int, ok bool) {
	f := strings.Fields(line)
	if len(f) != 2+2*len(escapes) || f[0] != "guards" || f[1+len(escapes)] != "sleeps" {
		return nil, nil, false
	}
	for i, s := range f[1:] {
		if i == len(escapes) {
			continue
		}
		pid, err := strconv.Atoi(s)
		if err != nil || pid <= 0 {
			return nil, nil, false
		}
		if i < len(escapes) {
			guards = append(guards, pid)
		} else {
			sleeps = append(sleeps, pid)
		}
	}
	return guards, sleeps, true
}

// runNestedHost is a host in a command of escapes: it starts the first
// command of escapes, prints the pid of its sleep and waits to be killed.
func runNestedHost(t *testing.T) {
	cmd := exec.Command("sh", "-c", escapes[0].script)
	cmd.Stdout = os.Stdout
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Kill()
	time.Sleep(time.Hour)
}

// becomeSleep is a process started by a command of escapes: it moves to a
// process group of its own and becomes sleep.
func becomeSleep(t *testing.T) {
	if err := syscall.Setpgid(0, 0); err != nil {
		t.Fatal(err)
	}
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(syscall.Exec(path, []string{"sleep", "1000"}, os.Environ()))
}

// Group.Kill ends what left the process group too, with cgroup.kill or
// by freezing the cgroup and killing its processes one by one, and
// removes the command's cgroup and those made in it.
func TestKillEndsEscapes(t *testing.T) {
	needCgroups(t)
	for _, method := range []string{"kill", "freeze"} {
		t.Run(method, func(t *testing.T) {
			leaktest.Check(t)
			freezeOnly = method == "freeze"
			defer func() { freezeOnly = false }()
			groups, cmds, sleeps := startEscapes(t)
			var guards []int
			for _, g := range groups {
				guards = append(guards, g.guard.Process.Pid)
			}
			dirs := cgroupDirs(t, sleeps)
			procs := watch(t, append(guards, sleeps...), dirs)
			for i, g := range groups {
				g.Kill()
				_ = cmds[i].Wait()
			}
			for _, d := range dirs {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("Kill returned before it removed %s (%v)", d, err)
				}
			}
			waitGone(t, procs, dirs)
			if n := children(); n != 0 {
				t.Errorf("%d children of this process left, zombies included", n)
			}
		})
	}
}

// needCgroups skips t, or fails it under PLANROUND_REQUIRE_ALL=1, unless
// this process may make cgroups in its own cgroup v2 and the commands of
// escapes can run.
func needCgroups(t *testing.T) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := "needs " + what
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal(msg + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	for _, name := range []string{"setsid", "sleep"} {
		if _, err := exec.LookPath(name); err != nil {
			missing(name + " in PATH")
		}
	}
	if _, err := os.Stat(shell); err != nil {
		missing(shell + " (for the guard)")
	}
	dir, err := cgroupDir("self")
	if err != nil {
		missing("cgroup v2 (" + err.Error() + ")")
	}
	probe := filepath.Join(dir, fmt.Sprintf("planround-test-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		missing("a cgroup v2 this process may make cgroups in (" + err.Error() + ")")
	}
	if err := os.Remove(probe); err != nil {
		t.Fatal(err)
	}
}

// cgroupDir returns the directory of the cgroup v2 of process pid ("self"
// for this one), from /proc.
func cgroupDir(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", err
	}
	var path string
	found := false
	for l := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 in /proc/" + pid + "/cgroup")
	}
	m, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for l := range strings.SplitSeq(string(m), "\n") {
		f := strings.Fields(l)
		// id parent dev root mountpoint options [optional...] - type source options
		for i := 6; i+1 < len(f); i++ {
			if f[i] == "-" {
				if f[i+1] == "cgroup2" && f[3] == "/" {
					return filepath.Join(f[4], path), nil
				}
				break
			}
		}
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

// cgroupDirs returns the cgroup directories of pids, and those above
// them up to this process's cgroup: the cgroups made for them. A pid
// must not be in this process's cgroup.
func cgroupDirs(t *testing.T, pids []int) []string {
	t.Helper()
	self, err := cgroupDir("self")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	seen := map[string]bool{}
	for _, pid := range pids {
		d, err := cgroupDir(strconv.Itoa(pid))
		if err != nil {
			t.Fatal(err)
		}
		if d == self || !strings.HasPrefix(d, self+"/") && self != "/" {
			t.Errorf("process %d is in cgroup %s, not in one made below %s", pid, d, self)
			continue
		}
		// Deepest first, so that a clean-up removes them in order.
		for ; d != self && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// stat is what the escape tests read of a process in /proc/PID/stat.
type stat struct {
	comm  string
	state string
	pgrp  int
	start string // start time, in clock ticks after boot
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return stat{}, false
	}
	// After the comm: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// threads itrealvalue starttime.
	f := strings.Fields(s[j+1:])
	if len(f) < 20 {
		return stat{}, false
	}
	pgrp, _ := strconv.Atoi(f[2])
	return stat{comm: s[i+1 : j], state: f[0], pgrp: pgrp, start: f[19]}, true
}

// proc is a process watched by an escape test: its pid and start time,
// so that a pid reused by another process does not count as it.
type proc struct {
	pid   int
	start string
}

// watch returns procs for pids, and kills them when t ends, so that a
// failure leaks nothing; then it kills what is left in dirs, the cgroups
// they were in, and removes them.
func watch(t *testing.T, pids []int, dirs []string) []proc {
	t.Helper()
	var procs []proc
	for _, pid := range pids {
		st, ok := procStat(pid)
		if !ok || st.state == "Z" {
			t.Fatalf("process %d is gone too soon", pid)
		}
		procs = append(procs, proc{pid, st.start})
	}
	t.Cleanup(func() {
		for _, p := range procs {
			if alive(p) {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		for _, d := range dirs {
			// What else the commands left there (a nested host and its
			// guard); thawed, if a kill by freezing failed halfway.
			_ = os.WriteFile(d+"/cgroup.kill", []byte("1"), 0)
			_ = os.WriteFile(d+"/cgroup.freeze", []byte("0"), 0)
		}
		for _, d := range dirs {
			for i := 0; i < 100 && os.Remove(d) != nil; i++ {
				if _, err := os.Stat(d); err != nil {
					break
				}
				time.Sleep(10 * time.Millisecond) // until the killed are gone
			}
		}
	})
	return procs
}

// alive reports whether p runs (a zombie does not).
func alive(p proc) bool {
	st, ok := procStat(p.pid)
	return ok && st.start == p.start && st.state != "Z"
}

// waitGone waits, a few seconds at most, until none of procs runs and
// none of dirs exists.
func waitGone(t *testing.T, procs []proc, dirs []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, p := range procs {
			if alive(p) {
				st, _ := procStat(p.pid)
				left = append(left, fmt.Sprintf("process %d (%s)", p.pid, st.comm))
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "cgroup "+d)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left 5s later: %s", strings.Join(left, ", "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
