package procgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// hostEnv makes TestGroupDiesWithHost the host, which starts a command.
const hostEnv = "PLANROUND_TEST_PROCGROUP_HOST"

// A process killed with SIGKILL takes the groups it started with it: the
// command, a child it left in the background and a child it waits for,
// and the guard. The host is this test binary run again.
func TestGroupDiesWithHost(t *testing.T) {
	if os.Getenv(hostEnv) == "1" {
		runHost(t)
		return
	}
	leaktest.Check(t)
	host := exec.Command(os.Args[0], "-test.run=^TestGroupDiesWithHost$", "-test.count=1")
	host.Env = append(os.Environ(), hostEnv+"=1")
	stdin, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	host.Stderr = &stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	stuck := time.AfterFunc(time.Minute, func() { _ = host.Process.Kill() })
	defer stuck.Stop()
	line, err := bufio.NewReader(out).ReadString('\n')
	pgid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pgid ")))
	if err != nil || pgid <= 0 {
		_ = host.Process.Kill()
		_ = host.Wait()
		t.Fatalf("the host gave no group (%q, %v); stderr:\n%s", line, err, stderr.String())
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }) // a failure leaks nothing
	waitMembers(t, pgid, func(n int) bool { return n >= 3 }, "the command and its children run")

	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	waitMembers(t, pgid, func(n int) bool { return n == 0 }, "the group is gone")
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

// Kill ends the whole group, the guard included, and reaps the guard.
func TestKillEndsGroup(t *testing.T) {
	leaktest.Check(t)
	cmd := exec.Command("sh", "-c", "sleep 300 & sleep 301; echo never")
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Kill()
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
	g.Kill() // again: nothing
	g.Terminate()
}

// A command that cannot start leaves no guard behind.
func TestFailedStartLeavesNoGuard(t *testing.T) {
	leaktest.Check(t)
	if _, err := Start(exec.Command("/nonexistent/planround-server")); err == nil {
		t.Fatal("Start succeeded")
	}
	if n := children(); n != 0 {
		t.Errorf("%d children of this process left, zombies included", n)
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

// BenchmarkStart: starting a command and waiting for it, under the guard
// and, as the baseline, leading its group without one.
func BenchmarkStart(b *testing.B) {
	b.Run("guarded", func(b *testing.B) {
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
