package waiting

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// heldWaits is how many waits BenchmarkHeapPerWait holds at once.
const heldWaits = 1000

// BenchmarkHeapPerWait measures the heap that waits for a person hold
// while they wait, heldWaits of them at once on one Core (a MemStore of
// its own), each Wait called from a goroutine of its own and parked in it:
//
//   - held-B/wait: everything, from before Open until every Wait is parked
//     (the store's record, the entry, the Wait, what Wait adds);
//   - wait-B/wait: what calling Wait adds to an open wait (its timers,
//     and the goroutine's closure, which is the same for every version);
//
// with SuspendAfter off (default) and on (suspend). The figures are heap
// after a garbage collection (HeapAlloc), divided by heldWaits; goroutine
// stacks are not heap. Its time means nothing.
func BenchmarkHeapPerWait(b *testing.B) {
	for _, bc := range []struct {
		name         string
		suspendAfter time.Duration
	}{{"default", 0}, {"suspend", 30 * time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			stacks := make([]byte, 4<<20)
			heldPerWait(b, bc.suspendAfter, stacks) // warm up: goroutines to reuse
			var held, added float64
			for b.Loop() {
				h, a := heldPerWait(b, bc.suspendAfter, stacks)
				held += h
				added += a
			}
			b.ReportMetric(held/float64(b.N), "held-B/wait")
			b.ReportMetric(added/float64(b.N), "wait-B/wait")
		})
	}
}

// heldPerWait opens heldWaits waits, waits for them from as many
// goroutines, and returns the heap held per wait in all and the part that
// Wait added; then it interrupts them all.
func heldPerWait(b *testing.B, suspendAfter time.Duration, stacks []byte) (held, added float64) {
	c, err := New(Config{Kind: memory.KindApproval, Timeout: time.Hour, SuspendAfter: suspendAfter, TimedOut: timedOut, Interrupted: interrupted})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = ctx.Done() // made now, not counted as a wait's
	ws := make([]*Wait, heldWaits)
	var wg sync.WaitGroup
	var base, opened, waiting runtime.MemStats
	readHeap(&base)
	for i := range ws {
		w, _, err := c.Open(ctx, rec("s1", fmt.Sprint("c", i), ""))
		if err != nil {
			b.Fatal(err)
		}
		w.Record = nil // as person.Approvals does
		ws[i] = w
	}
	readHeap(&opened)
	for _, w := range ws {
		wg.Go(func() { _, _ = w.Wait(ctx) })
	}
	if !parked(heldWaits, stacks) {
		b.Fatal("the waits did not park")
	}
	readHeap(&waiting)
	cancel()
	wg.Wait()
	if c.Len() != 0 {
		b.Fatalf("%d waits left after they were interrupted", c.Len())
	}
	n := float64(heldWaits)
	return float64(int64(waiting.HeapAlloc)-int64(base.HeapAlloc)) / n,
		float64(int64(waiting.HeapAlloc)-int64(opened.HeapAlloc)) / n
}

func readHeap(m *runtime.MemStats) {
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(m)
}

// parked reports, after at most a few seconds, whether n goroutines are
// blocked in the select of Wait. stacks is the buffer for their dump.
func parked(n int, stacks []byte) bool {
	for range 5000 {
		dump := stacks[:runtime.Stack(stacks, true)]
		got := 0
		for g := range bytes.SplitSeq(dump, []byte("\n\n")) {
			if bytes.Contains(g, []byte(" [select")) && bytes.Contains(g, []byte("waiting.(*Wait).Wait(")) {
				got++
			}
		}
		if got >= n {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
