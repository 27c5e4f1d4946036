package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// A shared stdio server that crashed is started again by the next call.
func TestSharedReconnectsAfterCrash(t *testing.T) {
	leaktest.Check(t)
	c := newClient(t, Options{}, stdioConfig(t, "test"))
	pid0 := c.Servers()[0].PID
	if pid0 == 0 {
		t.Fatalf("status = %+v, want the pid", c.Servers()[0])
	}

	if _, err := run(t, tool(t, c, "crash"), `{}`, nil); !errors.Is(err, errLost) {
		t.Fatalf("crash: err = %v, want a lost connection", err)
	}
	got, err := run(t, tool(t, c, "pid"), `{}`, nil)
	if err != nil {
		t.Fatalf("the call after the crash: %v", err)
	}
	st := c.Servers()[0]
	if st.State != StateConnected || st.PID == pid0 || got == "" || !strings.Contains(got, itoa(st.PID)) {
		t.Errorf("after the crash: status %+v, pid tool %q; want connected to a new process (old pid %d)", st, got, pid0)
	}
	waitFor(t, "the crashed process is gone", func() bool { return processGone(pid0) })
}

// A shared server that cannot be started again fails calls at once, without
// trying again before the pause is over.
func TestSharedDeadServerFailsFast(t *testing.T) {
	leaktest.Check(t)
	// The server works when New starts it; started again, it exits.
	cfg := stdioConfig(t, "test", "-mode=exit", "-first-normal="+filepath.Join(t.TempDir(), "started"))
	c := newClient(t, Options{}, cfg)

	if _, err := run(t, tool(t, c, "crash"), `{}`, nil); !errors.Is(err, errLost) {
		t.Fatalf("crash: err = %v, want a lost connection", err)
	}
	// The first call after the loss tries again at once, and fails.
	_, err := run(t, tool(t, c, "echo"), `{"text":"x"}`, nil)
	if err == nil || !strings.Contains(err.Error(), "the server exited (exit status 3): stdioserver: exiting at start (-mode=exit)") {
		t.Fatalf("first call after the crash: err = %v, want the failed start with the server's last words", err)
	}
	// The next ones fail without starting anything.
	for range 3 {
		_, err = run(t, tool(t, c, "echo"), `{"text":"x"}`, nil)
		if err == nil || !strings.Contains(err.Error(), "the server is down") || !strings.Contains(err.Error(), "next attempt") {
			t.Fatalf("err = %v, want the server down", err)
		}
	}
	if st := c.Servers()[0]; st.State != StateDown || !strings.Contains(st.Error, "exiting at start") {
		t.Errorf("status = %+v, want down with the reason", st)
	}
}

// A shared HTTP server that went away fails the call at once, then the
// calls during the pause.
func TestSharedHTTPServerGone(t *testing.T) {
	leaktest.Check(t)
	f := newFixture(t, TransportHTTP)
	c := newClient(t, Options{}, f.cfg)
	if _, err := run(t, tool(t, c, "echo"), `{"text":"x"}`, nil); err != nil {
		t.Fatal(err)
	}
	f.stop()

	start := time.Now()
	for i := range 3 {
		_, err := run(t, tool(t, c, "echo"), `{"text":"x"}`, nil)
		if err == nil {
			t.Fatalf("call %d on a stopped server succeeded", i)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("three calls on a stopped server took %v", d)
	}
	if st := c.Servers()[0]; st.State != StateDown {
		t.Errorf("status = %+v, want down", st)
	}
}

// A shared server that adds a tool says so, and the client reads the list
// again.
func TestSharedToolListChanged(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			f := newFixture(t, tr)
			c := newClient(t, Options{}, f.cfg)
			// A registry filled by Register follows the change: the host's
			// own tool stays, the server's tools are replaced.
			own := agent.FuncTool{Def: agent.ToolDefinition{Name: "own"}, Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "", nil }}
			reg, err := agent.NewToolRegistry(own)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(reg); err != nil {
				t.Fatal(err)
			}
			before := len(reg.Names())
			if _, _, ok := reg.Lookup("late"); ok {
				t.Fatal("late registered before the server added it")
			}
			if _, err := run(t, tool(t, c, "add_tool"), `{}`, nil); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the new tool is listed", func() bool {
				return slices.Contains(c.Servers()[0].Tools, "late")
			})
			waitFor(t, "the registry offers the new tool", func() bool {
				_, _, ok := reg.Lookup("late")
				return ok
			})
			if n := len(reg.Names()); n != before+1 {
				t.Errorf("the registry holds %d tools after one was added to %d: %v", n, before, reg.Names())
			}
			if _, _, ok := reg.Lookup("own"); !ok {
				t.Error("the host's own tool left the registry")
			}
			got, err := run(t, tool(t, c, "late"), `{}`, nil)
			if err != nil || got != "late" {
				t.Errorf("late = %q, %v", got, err)
			}
		})
	}
}

// Calls on a closed client fail; Close twice is fine.
func TestClosedClient(t *testing.T) {
	leaktest.Check(t)
	f := newFixture(t, TransportHTTP)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ctx, []ServerConfig{f.cfg}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	echo := tool(t, c, "echo")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, echo, `{"text":"x"}`, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("err = %v, want closed", err)
	}
	if st := c.Servers()[0]; st.State != StateClosed {
		t.Errorf("state = %q, want closed", st.State)
	}
}

// A stdio server that writes a message beyond the bound in the middle of a
// call fails the call; the next call gets a fresh process.
func TestStdioFloodMidCall(t *testing.T) {
	leaktest.Check(t)
	c := newClient(t, Options{}, stdioConfig(t, "test"))
	pid0 := c.Servers()[0].PID
	_, err := run(t, tool(t, c, "flood"), `{}`, nil)
	if !errors.Is(err, errLost) || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Fatalf("err = %v, want the connection lost to a message too large", err)
	}
	if got, err := run(t, tool(t, c, "echo"), `{"text":"again"}`, nil); err != nil || got != "again" {
		t.Errorf("echo after the flood = %q, %v", got, err)
	}
	waitFor(t, "the flooding process is gone", func() bool { return processGone(pid0) })
}
