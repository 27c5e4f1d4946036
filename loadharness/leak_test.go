package main

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// checkLeaks fails t when goroutines started during the test are still
// alive when it ends (after the cleanups registered later, which run
// first), giving those on their way out up to three seconds. Call it first
// in a test. The harness is a module of its own and cannot use the SDK's
// internal/leaktest, so it has this small copy of the idea.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := goroutineStacks()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			var leaked []string
			for id, stack := range goroutineStacks() {
				if _, old := before[id]; !old && !testingGoroutine(stack) {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutine(s) outlived the test:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// testingGoroutine reports a goroutine of the testing package or the
// runtime rather than of the code under test, by the top of its stack.
func testingGoroutine(stack string) bool {
	top := stack[:min(len(stack), 600)]
	for _, s := range []string{"testing.(*T).Run", "testing.tRunner.func1", "os/signal.signal_recv", "runtime.goexit0"} {
		if strings.Contains(top, s) {
			return true
		}
	}
	return false
}

// goroutineStacks returns every goroutine's stack but the caller's, keyed
// by goroutine id.
func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := make(map[string]string)
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller's own
			continue
		}
		// Each stack starts "goroutine 42 [chan receive]:".
		if f := strings.Fields(g); len(f) >= 2 {
			stacks[f[1]] = g
		}
	}
	return stacks
}
