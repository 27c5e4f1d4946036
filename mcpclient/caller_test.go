package mcpclient

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// goroutineID is the id of the calling goroutine, read from its stack's
// header ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// Calls in quick succession run on one caller, which ends on its own
// after callerIdle without a call while the connection stays open.
func TestCallerReusedThenEnds(t *testing.T) {
	leaktest.Check(t)
	cl := inProcessClient(t, testserver.New(testserver.Options{}), ServerConfig{Name: "inprocess"})
	c := cl.entries[0].shared.conn
	got := make(chan string, 1)
	record := func() { got <- goroutineID() }
	c.runCall(record)
	first := <-got
	// The caller reaches its wait for the next call a moment after the
	// first call's function returns, so hand it the second call the way
	// runCall does once it is there, rather than racing it.
	select {
	case c.next <- record:
	case <-time.After(5 * time.Second):
		t.Fatal("no caller waited for a second call within 5s of the first")
	}
	second := <-got
	if first != second {
		t.Errorf("two calls in succession ran on goroutines %s and %s, want one caller", first, second)
	}
	if self := goroutineID(); first == self {
		t.Errorf("the call ran on the calling goroutine %s", self)
	}

	ended := make(chan struct{})
	go func() {
		c.callers.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(callerIdle + 5*time.Second):
		t.Fatalf("the caller did not end within %s of its last call", callerIdle+5*time.Second)
	}
	if c.isLost() {
		t.Fatal("the connection was lost")
	}
	if out, err := benchTool(t, cl, "echo").Execute(t.Context(), benchArgs, nil); err != nil || out != "hello" {
		t.Fatalf("a call after the caller ended: %q, %v", out, err)
	}
}
