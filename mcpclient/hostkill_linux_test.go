package mcpclient

import (
	"bufio"
	"encoding/json"
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
	"github.com/planround/planround/internal/procgroup"
)

// hostEnv, when set, makes TestHostKilledLeavesNoServer the host: it holds
// the JSON of the ServerConfig to start.
const hostEnv = "PLANROUND_TEST_MCP_HOST"

// A host killed with SIGKILL runs no clean-up, yet its stdio servers, and
// what they started, die with it. The host is this test binary run again;
// its server is the stdio test server behind a wrapper shell (as npx or sh
// put it), ignoring SIGTERM and the end of its input, with a child of its
// own.
func TestHostKilledLeavesNoServer(t *testing.T) {
	if spec := os.Getenv(hostEnv); spec != "" {
		runHost(t, spec)
		return
	}
	leaktest.Check(t)
	hostKilled(t, "")
}

// A server's child that left the server's process group (setsid, as a
// daemon does) dies with the host too: it is in the server's cgroup.
func TestHostKilledLeavesNoDaemon(t *testing.T) {
	leaktest.Check(t)
	missing := ""
	if _, err := exec.LookPath("setsid"); err != nil {
		missing = "setsid in PATH"
	} else if !procgroup.UsesCgroups() {
		missing = "a cgroup v2 this process may make cgroups in (see package procgroup)"
	}
	if missing != "" {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("needs " + missing + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
		}
		t.Skip("needs " + missing)
	}
	hostKilled(t, filepath.Join(t.TempDir(), "daemon.pid"))
}

// hostKilled runs the host, kills it with SIGKILL and checks that its
// server's processes are gone. With a daemon file, the wrapper also starts
// a sleep in a session of its own and writes its pid there.
func hostKilled(t *testing.T, daemon string) {
	cfg := stdioConfig(t, "wrapped", "-stubborn")
	// Not exec: sh stays the server's parent, as a wrapper does.
	script := `"$0" "$@"; echo "server ended" >&2`
	if daemon != "" {
		script = `setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >"$DAEMON_PID"; ` + script
		cfg.Env = map[string]string{"DAEMON_PID": daemon}
	}
	cfg.Command, cfg.Args = "sh", append([]string{"-c", script, cfg.Command}, cfg.Args...)
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}

	host := exec.Command(os.Args[0], "-test.run=^TestHostKilledLeavesNoServer$", "-test.count=1", "-test.v")
	host.Env = append(os.Environ(), hostEnv+"="+string(spec))
	stdin, err := host.StdinPipe() // the host waits for its end
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
	// Whatever happens, the host ends, and so does whatever it started,
	// so that a failure leaks nothing.
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	stuck := time.AfterFunc(time.Minute, func() { _ = host.Process.Kill() })
	defer stuck.Stop()

	var line string
	r := bufio.NewReader(out)
	for {
		l, err := r.ReadString('\n')
		if s, ok := strings.CutPrefix(l, "pids "); ok {
			line = s
			break
		}
		if err != nil {
			_ = host.Process.Kill()
			_ = host.Wait()
			t.Fatalf("the host gave no pids (%v); stderr:\n%s", err, stderr.String())
		}
	}
	for f := range strings.FieldsSeq(line) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			t.Fatalf("bad pids line %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("pids %v, want the wrapper's, the server's and its child's", pids)
	}
	what := []string{"the wrapper", "the server", "the server's child"}
	if daemon != "" {
		b, err := os.ReadFile(daemon) // written before the server started
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			t.Fatalf("no daemon pid (%q, %v)", b, err)
		}
		pids = append(pids, pid)
		what = append(what, "the daemon")
	}
	for _, pid := range pids {
		if processGone(pid) {
			t.Fatalf("process %d is gone before the host was killed", pid)
		}
	}
	pgid, err := syscall.Getpgid(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	if err := host.Process.Kill(); err != nil { // SIGKILL: no clean-up runs
		t.Fatal(err)
	}
	_ = host.Wait()
	go io.Copy(io.Discard, out) //nolint:errcheck // ends with the pipe, closed by Wait

	// SIGKILL takes a moment to land; a few seconds is plenty.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var alive []string
		for i, what := range what {
			if !processGone(pids[i]) {
				alive = append(alive, fmt.Sprintf("%s (pid %d)", what, pids[i]))
			}
		}
		for _, pid := range groupMembers(pgid) {
			alive = append(alive, fmt.Sprintf("a member of the process group (pid %d)", pid))
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alive 5s after the host was killed: %s", strings.Join(alive, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runHost is the host: it starts the server of spec, writes
// "pids <wrapper> <server> <child>" and waits for its standard input to end
// (the test kills it before).
func runHost(t *testing.T, spec string) {
	var cfg ServerConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{}, cfg)
	wrapper := c.Servers()[0].PID
	srv := mustRun(t, tool(t, c, "pid"), `{}`)
	child := mustRun(t, tool(t, c, "spawn"), `{}`)
	fmt.Printf("pids %d %s %s\n", wrapper, srv, child)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// groupMembers returns the live processes of process group pgid (zombies
// left for a reaper do not count), from /proc.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}
