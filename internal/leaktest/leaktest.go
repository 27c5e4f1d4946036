// Package leaktest checks that a test leaves no goroutine behind.
//
// It compares the goroutines alive when the test ends with those alive when
// it began, waiting a little for goroutines that are already on their way
// out. It is a small stand-in for go.uber.org/goleak, enough for this module.
package leaktest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Check records the goroutines alive now and, when t ends (after the
// cleanups registered after Check, which run first), fails t if others are
// still alive after a grace period, printing their stacks. Call it first in a
// test, before anything that registers cleanups.
//
// The settle functions, when given, are called before each look at the
// goroutines during the grace period. They end goroutines that belong to a
// cache rather than to a leak, such as the idle keep-alive connections of an
// http.Transport, which may enter the pool a moment after the call that used
// them returned.
func Check(t testing.TB, settle ...func()) {
	t.Helper()
	before := goroutines()
	t.Cleanup(func() {
		var leaked []string
		deadline := time.Now().Add(3 * time.Second)
		for {
			for _, f := range settle {
				f()
			}
			leaked = leaked[:0]
			for id, stack := range goroutines() {
				if _, ok := before[id]; !ok && !ignorable(stack) {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(leaked) > 0 {
			t.Errorf("leaktest: %d goroutine(s) outlived the test:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

// ignorable reports goroutines that belong to the runtime or the testing
// package, not to the code under test.
func ignorable(stack string) bool {
	for _, s := range []string{
		"testing.(*T).Run",
		"testing.tRunner.func1",
		"testing.(*F).Fuzz",
		"runtime.goexit0",
		"os/signal.signal_recv",
		"runtime/trace",
	} {
		if strings.Contains(firstFrames(stack), s) {
			return true
		}
	}
	return false
}

func firstFrames(stack string) string {
	if len(stack) > 600 {
		return stack[:600]
	}
	return stack
}

// goroutines returns the stacks of all goroutines but the caller's, by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := make(map[string]string)
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		// "goroutine 42 [chan receive]:"
		f := strings.Fields(head)
		if len(f) < 2 {
			continue
		}
		out[f[1]] = g
	}
	return out
}
