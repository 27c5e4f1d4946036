package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/planround/planround/agent"
)

// nopInstance costs nothing, so that the benchmarks measure the registry.
type nopInstance struct{}

func (nopInstance) call(context.Context, string, json.RawMessage, agent.Progress) (string, error) {
	return "", nil
}
func (nopInstance) close() error { return nil }
func (nopInstance) pid() int     { return 0 }

func startNop(context.Context) (instance, error) { return nopInstance{}, nil }

// BenchmarkSandboxGetWarm: get and release on a running sandbox, the cost
// the registry adds to every call of a per-conversation tool.
func BenchmarkSandboxGetWarm(b *testing.B) {
	s := newSandboxes(startNop, 8, 0)
	defer s.close()
	ctx := context.Background()
	_, release, err := s.get(ctx, "conversation")
	if err != nil {
		b.Fatal(err)
	}
	release()
	b.ReportAllocs()
	for b.Loop() {
		_, release, err := s.get(ctx, "conversation")
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkSandboxGetWarmParallel: the same from many goroutines, each on
// a conversation of its own, all through the registry's one lock.
func BenchmarkSandboxGetWarmParallel(b *testing.B) {
	s := newSandboxes(startNop, 0, 0)
	defer s.close()
	ctx := context.Background()
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		conv := fmt.Sprint("conversation-", next.Add(1))
		for pb.Next() {
			_, release, err := s.get(ctx, conv)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}

// BenchmarkSandboxGetCold: a conversation's first get with a start that
// costs nothing, then closeConversation: the registry's share of a sandbox
// start.
func BenchmarkSandboxGetCold(b *testing.B) {
	s := newSandboxes(startNop, 8, 0)
	defer s.close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		conv := fmt.Sprint("conversation-", i)
		i++
		_, release, err := s.get(ctx, conv)
		if err != nil {
			b.Fatal(err)
		}
		release()
		if err := s.closeConversation(conv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSandboxEntryMemory reports the heap a running, idle sandbox
// costs the registry (B/entry), the instance itself not counted.
func BenchmarkSandboxEntryMemory(b *testing.B) {
	const n = 10000
	convs := make([]string, n)
	for i := range convs {
		convs[i] = fmt.Sprintf("conversation-%06d", i)
	}
	ctx := context.Background()
	var total float64
	for b.Loop() {
		s := newSandboxes(startNop, 0, 0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, c := range convs {
			_, release, err := s.get(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		total += float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
		_ = s.close()
	}
	b.ReportMetric(total/float64(b.N), "B/entry")
}
