package demo

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/procgroup"
)

// progress is an agent.Progress that records writes and signals each one.
type progress struct {
	mu    sync.Mutex
	buf   strings.Builder
	wrote chan struct{}
}

func newProgress() *progress { return &progress{wrote: make(chan struct{}, 1)} }

func (p *progress) Write(b []byte) (int, error) { return p.WriteString(string(b)) }

func (p *progress) WriteString(s string) (int, error) {
	p.mu.Lock()
	p.buf.WriteString(s)
	p.mu.Unlock()
	select {
	case p.wrote <- struct{}{}:
	default:
	}
	return len(s), nil
}

func (p *progress) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// waitFor blocks until the progress holds s.
func (p *progress) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !strings.Contains(p.String(), s) {
		select {
		case <-p.wrote:
		case <-timeout:
			t.Fatalf("progress never showed %q; got %q", s, p.String())
		}
	}
}

func call(t *testing.T, tool agent.Tool, args string) (string, error) {
	t.Helper()
	return tool.Execute(context.Background(), json.RawMessage(args), newProgress())
}

func TestDefinitions(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range Tools() {
		d := tool.Definition()
		if seen[d.Name] || d.Description == "" {
			t.Errorf("tool %q duplicated or without description", d.Name)
		}
		seen[d.Name] = true
		props, _ := d.Parameters["properties"].(map[string]any)
		req, _ := d.Parameters["required"].([]string)
		if d.Parameters["type"] != "object" || len(props) == 0 || len(req) == 0 {
			t.Errorf("%s: schema %v", d.Name, d.Parameters)
		}
		for _, r := range req {
			if props[r] == nil {
				t.Errorf("%s: required %q is not a property", d.Name, r)
			}
		}
		if _, err := json.Marshal(d.Parameters); err != nil {
			t.Errorf("%s: schema does not marshal: %v", d.Name, err)
		}
		if want := d.Name == "show_card"; d.SkipApproval != want {
			t.Errorf("%s: SkipApproval %v, want %v", d.Name, d.SkipApproval, want)
		}
		// Bad arguments are an error, never a panic.
		if _, err := call(t, tool, `{"oops`); err == nil {
			t.Errorf("%s: invalid JSON gave no error", d.Name)
		}
		if _, err := call(t, tool, `[1,2]`); err == nil {
			t.Errorf("%s: an array gave no error", d.Name)
		}
	}
	if len(seen) != 4 {
		t.Errorf("%d tools, want 4", len(seen))
	}
}

func TestGetWeather(t *testing.T) {
	w := GetWeather()
	paris1, err1 := call(t, w, `{"city":"Paris"}`)
	paris2, err2 := call(t, w, `{"city":"paris"}`)
	oslo, err3 := call(t, w, `{"city":"Oslo"}`)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	if !strings.HasPrefix(paris1, "Paris: ") || !strings.Contains(paris1, "°C") {
		t.Errorf("result %q", paris1)
	}
	if strings.TrimPrefix(paris1, "Paris") != strings.TrimPrefix(paris2, "paris") {
		t.Errorf("not deterministic: %q vs %q", paris1, paris2)
	}
	if strings.TrimPrefix(paris1, "Paris") == strings.TrimPrefix(oslo, "Oslo") {
		t.Errorf("Paris and Oslo have the same weather: %q", paris1)
	}
	if _, err := call(t, w, `{"city":"  "}`); err == nil {
		t.Error("empty city: no error")
	}
	if _, err := call(t, w, ``); err == nil {
		t.Error("no arguments: no error")
	}
}

func TestGetTime(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	tool := getTime(now)
	tests := []struct{ args, want string }{
		{`{"timezone":"Europe/Paris"}`, "04:04 on Friday, 2 January 2026 in Europe/Paris (CET, UTC+01:00)"},
		{`{"timezone":"Asia/Tokyo"}`, "12:04 on Friday, 2 January 2026 in Asia/Tokyo (JST, UTC+09:00)"},
		{`{"timezone":""}`, "03:04 on Friday, 2 January 2026 in UTC (UTC, UTC+00:00)"},
		{`{}`, "03:04 on Friday, 2 January 2026 in UTC (UTC, UTC+00:00)"},
	}
	for _, tt := range tests {
		got, err := call(t, tool, tt.args)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.args, got, err, tt.want)
		}
	}
	for _, bad := range []string{`{"timezone":"Mars/Olympus_Mons"}`, `{"timezone":"../../etc/passwd"}`} {
		if _, err := call(t, tool, bad); err == nil || !strings.Contains(err.Error(), "unknown time zone") {
			t.Errorf("%s: err = %v, want unknown time zone", bad, err)
		}
	}
	// The real clock: the tool answers with today's date in UTC.
	got, err := call(t, GetTime(), `{"timezone":"UTC"}`)
	if err != nil || !strings.Contains(got, time.Now().UTC().Format("2006")) {
		t.Errorf("real clock: %q, %v", got, err)
	}
}

func TestShowCard(t *testing.T) {
	got, err := call(t, ShowCard(), `{"title":"Hi","body":"There"}`)
	if err != nil || !strings.Contains(got, `"Hi"`) {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := call(t, ShowCard(), `{"body":"no title"}`); err == nil {
		t.Error("missing title: no error")
	}
}

func TestRunCommandOutput(t *testing.T) {
	leaktest.Check(t)
	p := newProgress()
	got, err := RunCommand(0).Execute(context.Background(), json.RawMessage(`{"command":"echo one; echo two >&2; printf three"}`), p)
	if err != nil {
		t.Fatal(err)
	}
	if got != "one\ntwo\nthree" || p.String() != got {
		t.Errorf("result %q progress %q", got, p.String())
	}
	if got, err := call(t, RunCommand(0), `{"command":"echo x; exit 3"}`); err != nil || got != "x\n\n[exit status 3]" {
		t.Errorf("exit 3: %q, %v", got, err)
	}
	if got, err := call(t, RunCommand(0), `{"command":"true"}`); err != nil || got != "(no output)" {
		t.Errorf("no output: %q, %v", got, err)
	}
	if _, err := call(t, RunCommand(0), `{"command":" "}`); err == nil {
		t.Error("empty command: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunCommand(0).Execute(ctx, json.RawMessage(`{"command":"echo hi"}`), newProgress()); err != context.Canceled {
		t.Errorf("cancelled before start: err %v", err)
	}
}

// TestRunCommandLeavesNoChild runs a command that exits while its
// background child sleeps: the call returns and the child is gone.
func TestRunCommandLeavesNoChild(t *testing.T) {
	linuxOnly(t)
	leaktest.Check(t)
	got, err := call(t, RunCommand(0), `{"command":"sleep 30 & echo \"bg $!\"; echo \"pg $(cut -d' ' -f5 /proc/$$/stat)\""}`)
	if err != nil {
		t.Fatal(err)
	}
	bg, pg := pidAfter(t, got, "bg "), pidAfter(t, got, "pg ")
	waitGone(t, bg, pg)
}

// TestRunCommandEndsEscapedChild runs a command whose background child
// leaves the process group (setsid) and keeps the output open: it is in
// the command's cgroup, so it is gone when the call returns.
func TestRunCommandEndsEscapedChild(t *testing.T) {
	linuxOnly(t)
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
	// The shell exits once the child leads a session of its own: it has
	// left the group before the group is killed.
	got, err := call(t, RunCommand(0), `{"command":"setsid sleep 1000 & echo \"bg $!\"; until [ \"$(cut -d' ' -f6 /proc/$!/stat)\" = $! ]; do sleep 0.01; done"}`)
	if err != nil {
		t.Fatal(err)
	}
	bg := pidAfter(t, got, "bg ")
	t.Cleanup(func() {
		if p, err := os.FindProcess(bg); err == nil && running(bg) {
			_ = p.Kill()
		}
	})
	if state, _, ok := stat(bg); ok && state != 'Z' && state != 'X' {
		t.Errorf("the setsid child %d runs after the call returned", bg)
	}
	waitGone(t, bg)
}

func TestRunCommandCancelKillsGroup(t *testing.T) {
	linuxOnly(t)
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newProgress()
	type res struct {
		out string
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := RunCommand(0).Execute(ctx, json.RawMessage(`{"command":"sleep 30 & echo \"bg $!\"; echo \"pg $(cut -d' ' -f5 /proc/$$/stat)\"; sleep 30; echo never"}`), p)
		done <- res{out, err}
	}()
	// Output streams before the command ends.
	p.waitFor(t, "pg ")
	if pg := pidAfter(t, p.String(), "pg "); len(groupMembers(pg)) == 0 {
		t.Fatalf("process group %d has no members while the command runs", pg)
	}
	cancel()
	r := <-done
	if r.err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	if !strings.Contains(r.out, "bg ") || strings.Contains(r.out, "never") {
		t.Errorf("partial output %q", r.out)
	}
	waitGone(t, pidAfter(t, r.out, "bg "), pidAfter(t, r.out, "pg "))
}

func TestRunCommandTimeout(t *testing.T) {
	linuxOnly(t)
	leaktest.Check(t)
	got, err := call(t, RunCommand(200*time.Millisecond), `{"command":"echo \"pg $(cut -d' ' -f5 /proc/$$/stat)\"; sleep 30 & sleep 30"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "timed out after 200ms") {
		t.Errorf("result %q", got)
	}
	pg := pidAfter(t, got, "pg ")
	waitGone(t, pg)
	if alive := groupMembers(pg); len(alive) > 0 {
		t.Errorf("process group %d still has %v", pg, alive)
	}
}

// linuxOnly skips a test that reads /proc (the commands print their process
// group from /proc/$$/stat: the shell is not its group's leader, the guard is).
func linuxOnly(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads the process group from /proc")
	}
}

func pidAfter(t *testing.T, out, prefix string) int {
	t.Helper()
	for line := range strings.Lines(out) {
		if s, ok := strings.CutPrefix(line, prefix); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no %q line in %q", prefix, out)
	return 0
}

// waitGone waits until no process of the pids (or of the process groups
// they lead) is alive; zombies waiting for a reaper count as gone.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process checks read /proc")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, pid := range pids {
			if running(pid) {
				alive = append(alive, pid)
			}
			alive = append(alive, groupMembers(pid)...)
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running: %v", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stat returns the state and process group of pid from /proc.
func stat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0, false
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0][0], pgrp, true
}

func running(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != 'Z' && state != 'X'
}

// groupMembers lists the running processes of process group pg.
func groupMembers(pg int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, g, ok := stat(pid); ok && g == pg && state != 'Z' && state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}
