package runner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
)

const benchDeltas = 10_000

// benchReplies are the two responses of one no-tool turn: a planning reply
// of benchDeltas small deltas ending in <no_tool>, and a one-delta
// continuation.
func benchReplies() (plan, cont agenttest.Response) {
	pieces := make([]string, benchDeltas)
	for i := range pieces {
		pieces[i] = "tok "
	}
	pieces[len(pieces)-1] = "<no_tool>"
	return agenttest.Reply().Text(pieces...).Finish("stop"), agenttest.Reply().Text("ok").Finish("stop")
}

// BenchmarkTurn runs a turn of benchDeltas text deltas on a store, as
// agent.Run ("agent": the host ranges over the chunks) and through a
// Runner ("runner": Send, whose events are numbered, kept for subscribers
// and written to the store's event log in batches). The difference per
// delta is what the runner costs.
func BenchmarkTurn(b *testing.B) {
	stores := map[string]func(b *testing.B) memory.Store{
		"memstore": func(*testing.B) memory.Store { return &memory.MemStore{} },
		"sqlite": func(b *testing.B) memory.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "chat.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	for _, name := range []string{"memstore", "sqlite"} {
		for _, mode := range []string{"agent", "runner"} {
			b.Run(name+"/"+mode, func(b *testing.B) { benchTurn(b, stores[name](b), mode == "runner") })
		}
	}
}

func benchTurn(b *testing.B, st memory.Store, viaRunner bool) {
	srv := agenttest.NewServer()
	defer srv.Close()
	plan, cont := benchReplies()
	cfg := agent.Config{BaseURL: srv.URL(), HTTPClient: srv.Client(), Model: "bench", MaxRetries: -1}
	var (
		a   *agent.Agent
		r   *runner.Runner
		err error
	)
	if viaRunner {
		if r, err = runner.New(runner.Config{Store: st, Agent: cfg, SweepInterval: -1}); err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		a = r.Agent()
	} else {
		cfg.Store = st
		if a, err = agent.New(cfg); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		srv.Enqueue(plan, cont)
		i++
		in := agent.Input{SessionID: fmt.Sprintf("s%d", i), Message: "go"}
		b.StartTimer()
		n := 0
		if viaRunner {
			for e, err := range r.Send(ctx, in) {
				if err != nil {
					b.Fatal(err)
				}
				if e.Chunk != nil && e.Chunk.Kind == agent.KindText {
					n++
				}
			}
		} else {
			for c, err := range a.Run(ctx, in) {
				if err != nil {
					b.Fatal(err)
				}
				if c.Kind == agent.KindText {
					n++
				}
			}
		}
		if n < benchDeltas/2 {
			b.Fatalf("%d text chunks, want about %d", n, benchDeltas)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
}
