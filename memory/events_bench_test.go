package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/planround/planround/memory"
)

// benchEventData is a 200-byte payload, as a streamed text delta gives.
var benchEventData = []byte(`{"type":"text-delta","id":"t1","delta":"` + strings.Repeat("x", 200-42) + `"}`)

// benchEvents returns n events numbered from seq, in the turn started at 1.
func benchEvents(seq int64, n int) []memory.Event {
	evs := make([]memory.Event, n)
	for i := range evs {
		evs[i] = memory.Event{Seq: seq + int64(i), Turn: 1, Kind: "text-delta", Data: benchEventData}
	}
	return evs
}

// BenchmarkAppendEvents measures AppendEvents of a batch of events of 200
// bytes to one session, as a runner flushes a turn's deltas; ns/event is
// per event.
func BenchmarkAppendEvents(b *testing.B) {
	if len(benchEventData) != 200 {
		b.Fatalf("payload of %d bytes, want 200", len(benchEventData))
	}
	for _, s := range benchStores {
		for _, n := range []int{1, 16, 128} {
			b.Run(fmt.Sprintf("%s/batch=%d", s.name, n), func(b *testing.B) {
				st := s.open(b)
				log := st.(memory.EventLog)
				ctx := b.Context()
				if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
					b.Fatal(err)
				}
				next := int64(1)
				b.ReportAllocs()
				for b.Loop() {
					// Numbered outside the timed call's work, as a runner
					// does while it collects the deltas.
					evs := benchEvents(next, n)
					if err := log.AppendEvents(ctx, "s", evs...); err != nil {
						b.Fatal(err)
					}
					next += int64(n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			})
		}
	}
}

// BenchmarkEvents measures Events of the 100 events after a cursor in a
// session whose log holds n, as a client that reconnects reads them.
func BenchmarkEvents(b *testing.B) {
	const k = 100
	for _, s := range benchStores {
		for _, n := range []int{1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				st := s.open(b)
				log := st.(memory.EventLog)
				ctx := b.Context()
				if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
					b.Fatal(err)
				}
				for seq := int64(1); seq <= int64(n); seq += 500 {
					if err := log.AppendEvents(ctx, "s", benchEvents(seq, min(500, n-int(seq)+1))...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					evs, last, err := log.Events(ctx, "s", int64(n-k), 0)
					if err != nil || len(evs) != k || last != int64(n) {
						b.Fatalf("Events: %d events, last %d, %v", len(evs), last, err)
					}
				}
			})
		}
	}
}
