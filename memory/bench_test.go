package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// benchStores are the stores the benchmarks compare; each call returns a
// fresh, empty store.
var benchStores = []struct {
	name string
	open func(b *testing.B) memory.Store
}{
	{"mem", func(b *testing.B) memory.Store { return new(memory.MemStore) }},
	{"sqlite", func(b *testing.B) memory.Store { return openSQLite(b, filepath.Join(b.TempDir(), "bench.db")) }},
	{"pg", func(b *testing.B) memory.Store { return openPG(b) }},
}

// openPG opens a pgstore.Store on a fresh schema of the server at
// PLANROUND_POSTGRES_URL (default: this project's test server), dropped when
// b ends; it skips b when the server cannot be reached.
func openPG(b *testing.B) memory.Store {
	b.Helper()
	url := os.Getenv("PLANROUND_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Skipf("PostgreSQL at %s cannot be reached: %v", url, err)
	}
	schema := fmt.Sprintf("planround_bench_%d_%d", os.Getpid(), time.Now().UnixNano())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			b.Errorf("drop schema %s: %v", schema, err)
		}
		conn.Close(ctx)
	})
	st, err := pgstore.Open(b.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		b.Fatalf("pgstore.Open: %v", err)
	}
	b.Cleanup(st.Close)
	return st
}

var benchSizes = []int{10, 100, 1_000, 10_000}

// benchMessage returns a typical message: every fourth one is an assistant
// message with a tool call, followed by its result.
func benchMessage(i int) memory.Message {
	switch i % 4 {
	case 0:
		return memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("question %d: what is the weather in Paris today?", i)}
	case 1:
		return memory.Message{Role: memory.RoleAssistant, Content: "Let me check. <need_tool>",
			ToolCalls: []memory.ToolCall{{ID: fmt.Sprint("call_", i), Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"C"}`)}}}
	case 2:
		return memory.Message{Role: memory.RoleTool, ToolCallID: fmt.Sprint("call_", i-1), Name: "get_weather", Content: "sunny, 22 C, light wind from the west"}
	default:
		return memory.Message{Role: memory.RoleAssistant, Content: "It is sunny and 22 C in Paris today."}
	}
}

// BenchmarkAppend measures filling a session with n messages, one Append
// call per message, as an agent does. ns/op is per session of n messages;
// ns/msg is per Append call.
func BenchmarkAppend(b *testing.B) {
	for _, s := range benchStores {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				st := s.open(b)
				ctx := b.Context()
				msgs := make([]memory.Message, n)
				for i := range msgs {
					msgs[i] = benchMessage(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					id := fmt.Sprint("s", i)
					if _, err := st.CreateSession(ctx, memory.Session{ID: id}); err != nil {
						b.Fatal(err)
					}
					for _, m := range msgs {
						if _, err := st.Append(ctx, id, m); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
			})
		}
	}
}

// BenchmarkLoad measures loading the active messages of a session holding
// n messages, as the agent does at the start of every run.
func BenchmarkLoad(b *testing.B) {
	for _, s := range benchStores {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				st := s.open(b)
				ctx := b.Context()
				if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
					b.Fatal(err)
				}
				msgs := make([]memory.Message, n)
				for i := range msgs {
					msgs[i] = benchMessage(i)
				}
				if _, err := st.Append(ctx, "s", msgs...); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					got, err := st.Messages(ctx, "s", false)
					if err != nil || len(got) != n {
						b.Fatalf("Messages: %d messages, %v", len(got), err)
					}
				}
			})
		}
	}
}

// BenchmarkAppendConcurrent measures appends from 100 goroutines, each
// appending one message per operation to its own session.
func BenchmarkAppendConcurrent(b *testing.B) {
	const sessions = 100
	for _, s := range benchStores {
		b.Run(s.name, func(b *testing.B) {
			st := s.open(b)
			ctx := b.Context()
			for i := range sessions {
				if _, err := st.CreateSession(ctx, memory.Session{ID: fmt.Sprint("s", i)}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			// 100 goroutines whatever GOMAXPROCS is (rounded up).
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((sessions + procs - 1) / procs)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprint("s", next.Add(1)%sessions)
				i := 0
				for pb.Next() {
					if _, err := st.Append(ctx, id, benchMessage(i)); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
