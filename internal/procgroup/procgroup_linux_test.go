package procgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// hostEnv makes TestGroupDiesWithHost the host, which starts a command.
const hostEnv = "PLANROUND_TEST_PROCGROUP_HOST"

// A process killed with SIGKILL takes the groups it started with it: the
// command, a child it left in the background and a child it waits for,
// and the guard; with a cgroup for the command and without. The host is
// this test binary run again.
func TestGroupDiesWithHost(t *testing.T) {
	if mode := os.Getenv(hostEnv); mode != "" {
		if mode == "no cgroup" {
			withoutCgroups(t)
		}
		runHost(t)
		return
	}
	for _, mode := range []string{"cgroup", "no cgroup"} {
		t.Run(mode, func(t *testing.T) {
			leaktest.Check(t)
			groupDiesWithHost(t, mode)
		})
	}
}

// startHost runs this test binary again as a host: test (a test name)
// with env set, its standard input open until t ends and a minute at most.
// It returns the host and the first line it wrote; a host that writes none
// fails t.
func startHost(t *testing.T, test, env string) (*exec.Cmd, string) {
	t.Helper()
	host := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	host.Env = append(os.Environ(), env)
	stdin, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(strings.Builder)
	host.Stderr = stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	stuck := time.AfterFunc(time.Minute, func() { _ = host.Process.Kill() })
	t.Cleanup(func() { stuck.Stop() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = host.Process.Kill()
		_ = host.Wait()
		t.Fatalf("the host wrote nothing (%q, %v); stderr:\n%s", line, err, stderr.String())
	}
	return host, line
}

func groupDiesWithHost(t *testing.T, mode string) {
	host, line := startHost(t, "TestGroupDiesWithHost", hostEnv+"="+mode)
	pgid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pgid ")))
	if pgid <= 0 {
		_ = host.Process.Kill()
		_ = host.Wait()
		t.Fatalf("the host gave no group: %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }) // a failure leaks nothing
	waitMembers(t, pgid, func(n int) bool { return n >= 3 }, "the command and its children run")

	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitMembers(t, pgid, func(n int) bool { return n == 0 }, "the group is gone")
}

// withoutCgroups makes Start put no command in a cgroup until t ends.
func withoutCgroups(t *testing.T) {
	cgroupParent() // found before it is turned off, and so not again
	was := cgroups.off.Swap(true)
	t.Cleanup(func() { cgroups.off.Store(was) })
}

// runHost starts a command whose group holds three processes and the
// guard, writes "pgid N" and waits for its standard input to end.
func runHost(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & sleep 301; echo never")
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("pgid %d\n", g.pgid)
	_, _ = io.Copy(io.Discard, os.Stdin)
	g.Kill()
	_ = cmd.Wait()
}

// Kill ends the whole group, the guard included, and reaps the guard;
// with a cgroup for the command and without.
func TestKillEndsGroup(t *testing.T) {
	for _, mode := range []string{"cgroup", "no cgroup"} {
		t.Run(mode, func(t *testing.T) {
			leaktest.Check(t)
			if mode == "no cgroup" {
				withoutCgroups(t)
			}
			cmd := exec.Command("sh", "-c", "sleep 300 & sleep 301; echo never")
			g, err := Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Kill()
			if mode == "no cgroup" && g.cgroup != "" {
				t.Errorf("the command has cgroup %s", g.cgroup)
			}
			// The guard, the command and its two children.
			waitMembers(t, g.pgid, func(n int) bool { return n == 4 }, "the group has 4 processes")
			if g.pgid == cmd.Process.Pid {
				t.Errorf("the command leads the group, not the guard")
			}
			g.Kill()
			_ = cmd.Wait()
			waitMembers(t, g.pgid, func(n int) bool { return n == 0 }, "the group is gone")
			if n := children(); n != 0 {
				t.Errorf("%d children of this process left, zombies included", n)
			}
			if g.cgroup != "" {
				if _, err := os.Stat(g.cgroup); !os.IsNotExist(err) {
					t.Errorf("the cgroup %s is left (%v)", g.cgroup, err)
				}
			}
			g.Kill() // again: nothing
			g.Terminate()
		})
	}
}

// A command that cannot start leaves no guard and no cgroup behind.
func TestFailedStartLeavesNoGuard(t *testing.T) {
	leaktest.Check(t)
	if _, err := Start(exec.Command("/nonexistent/planround-server")); err == nil {
		t.Fatal("Start succeeded")
	}
	if n := children(); n != 0 {
		t.Errorf("%d children of this process left, zombies included", n)
	}
	if left := ownCgroups(); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// ownCgroups returns the cgroups this process made for its commands and
// has not removed.
func ownCgroups() []string {
	parent := cgroupParent()
	if parent == "" {
		return nil
	}
	m, _ := filepath.Glob(filepath.Join(parent, fmt.Sprintf("planround-%d-*", os.Getpid())))
	return m
}

// When this process cannot put a process into a cgroup of its own after
// all (the probe fails: here the "cgroup" is a plain directory), or cannot
// make a cgroup, the command runs under the guard without one, and
// cgroups are off.
func TestStartWithoutCgroupAfterAll(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent string
		probed bool
	}{
		{"probe fails", t.TempDir(), false},
		{"mkdir fails", filepath.Join(t.TempDir(), "gone"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			cgroupParent()
			parent, probed, off := cgroups.parent, cgroups.probed.Load(), cgroups.off.Load()
			t.Cleanup(func() {
				cgroups.parent = parent
				cgroups.probed.Store(probed)
				cgroups.off.Store(off)
			})
			cgroups.parent = tc.parent
			cgroups.probed.Store(tc.probed)
			cgroups.off.Store(false)

			cmd := exec.Command("sh", "-c", "echo hi")
			var out strings.Builder
			cmd.Stdout = &out
			g, err := Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if g.guard == nil || g.cgroup != "" || !cgroups.off.Load() {
				t.Errorf("guard %v, cgroup %q, off %v: want a guard, no cgroup, off", g.guard, g.cgroup, cgroups.off.Load())
			}
			if err := cmd.Wait(); err != nil || out.String() != "hi\n" {
				t.Errorf("Wait: %v, output %q", err, out.String())
			}
			g.Kill()
			if n := children(); n != 0 {
				t.Errorf("%d children of this process left, zombies included", n)
			}
			if ents, _ := os.ReadDir(tc.parent); len(ents) > 0 {
				t.Errorf("%s holds %v", tc.parent, ents)
			}
		})
	}
}

// cgroup2Dir finds the directory of a cgroup under the cgroup2 mount that
// shows it, whatever the part of the tree mounted.
func TestCgroup2Dir(t *testing.T) {
	const info = `22 1 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime shared:9 - cgroup cgroup rw,name=systemd
`
	for _, tc := range []struct{ mounts, path, want string }{
		{info + "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/", "/sys/fs/cgroup/unified"},
		{info + "40 30 0:37 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/user.slice/a b.scope", "/sys/fs/cgroup/user.slice/a b.scope"},
		// A container's mount of its part of the tree.
		{"50 40 0:37 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n", "/docker/abc/sub", "/sys/fs/cgroup/sub"},
		{"50 40 0:37 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n", "/docker/abcd", ""},
		{"50 40 0:37 / /mnt/cgroup\\040two rw - cgroup2 none rw\n", "/x", "/mnt/cgroup two/x"},
		{info, "/", ""},
		{"garbage\n\n1 2 3\n", "/", ""},
	} {
		if got := cgroup2Dir([]byte(tc.mounts), tc.path); got != tc.want {
			t.Errorf("cgroup2Dir(%q, %q) = %q, want %q", tc.mounts, tc.path, got, tc.want)
		}
	}
}

// children counts the processes whose parent is this one, zombies
// included, from /proc.
func children() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	me := strconv.Itoa(os.Getpid())
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 2 && f[1] == me {
			n++
		}
	}
	return n
}

// waitMembers waits, a few seconds at most, until the number of live
// processes in group pgid satisfies ok.
func waitMembers(t *testing.T, pgid int, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := members(pgid)
		if ok(len(m)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s: members %v", what, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// members returns the live processes of group pgid (zombies left for a
// reaper do not count), from /proc.
func members(pgid int) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, e.Name()+" "+s[strings.IndexByte(s, '('):i+1])
		}
	}
	return out
}

// BenchmarkStart: starting a command and waiting for it, then killing its
// group: under the guard, in a cgroup of its own where this process may
// make one and without, and, as the baseline, leading its group without a
// guard.
func BenchmarkStart(b *testing.B) {
	guarded := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmd := exec.Command("true")
			g, err := Start(cmd)
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			g.Kill()
		}
	}
	b.Run("guarded", guarded)
	b.Run("guarded, no cgroup", func(b *testing.B) {
		cgroupParent()
		was := cgroups.off.Swap(true)
		defer cgroups.off.Store(was)
		guarded(b)
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmd := exec.Command("true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
}

// Groups started and killed at once leave nothing behind.
func TestConcurrentStarts(t *testing.T) {
	leaktest.Check(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid in PATH")
	}
	// A duration of its own marks the sleeps of this test.
	sleep := fmt.Sprintf("1000.%d", os.Getpid())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 5 {
				cmd := exec.Command("sh", "-c", "setsid sleep "+sleep+" & exit 0")
				g, err := Start(cmd)
				if err != nil {
					errs <- err
					return
				}
				_ = cmd.Wait()
				g.Kill()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := children(); n != 0 {
		t.Errorf("%d children of this process left, zombies included", n)
	}
	if left := ownCgroups(); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	deadline := time.Now().Add(5 * time.Second)
	if !UsesCgroups() {
		deadline = time.Now() // the sleeps that left their group survive
	}
	for {
		left := running("sleep\x00" + sleep + "\x00") // or setsid, about to run it
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if UsesCgroups() {
				t.Fatalf("sleeps left: %v", left)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running returns the live processes whose command line ends with
// cmdline (arguments ended by NUL), from /proc.
func running(cmdline string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.HasSuffix(string(b), cmdline) {
			pids = append(pids, pid)
		}
	}
	return pids
}
