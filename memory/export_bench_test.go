package memory_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// exportShapes are the ways the export benchmarks archive a session of n
// messages: each message in a summary of its own (n summaries), all of them
// in one summary, and n summaries nested like an attack's, the i-th with
// the range [1, i] (each archives one new message, but its range holds all
// those before it).
var exportShapes = []struct {
	name string
	sums func(n int) [][2]int64 // the summaries' [first, last] message ids (1-based)
}{
	{"own", func(n int) [][2]int64 {
		r := make([][2]int64, n)
		for i := range r {
			r[i] = [2]int64{int64(i + 1), int64(i + 1)}
		}
		return r
	}},
	{"one", func(n int) [][2]int64 { return [][2]int64{{1, int64(n)}} }},
	{"nested", func(n int) [][2]int64 {
		r := make([][2]int64, n)
		for i := range r {
			r[i] = [2]int64{1, int64(i + 1)}
		}
		return r
	}},
}

var exportSizes = []int{1_000, 10_000, 100_000}

// exportDoc returns a session export of n messages (benchMessage's) with
// ids 1 to n, archived into the summaries of ranges, written out as
// [memory.Export] writes it; it does not use Import or Export.
func exportDoc(tb testing.TB, n int, ranges [][2]int64) []byte {
	tb.Helper()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := make([]memory.Message, n)
	for i := range msgs {
		msgs[i] = benchMessage(i)
		msgs[i].ID = int64(i + 1)
		msgs[i].CreatedAt = t0.Add(time.Duration(i) * time.Second)
	}
	sums := make([]memory.Summary, len(ranges))
	for k, r := range ranges {
		sums[k] = memory.Summary{ID: int64(k + 1), Content: fmt.Sprint("summary ", k+1), CreatedAt: t0, FirstID: r[0], LastID: r[1]}
		for i := r[0]; i <= r[1]; i++ {
			if msgs[i-1].SummaryID == 0 {
				msgs[i-1].SummaryID = sums[k].ID
			}
		}
	}
	data, err := json.MarshalIndent(struct {
		Format    string           `json:"format"`
		Session   memory.Session   `json:"session"`
		Messages  []memory.Message `json:"messages"`
		Summaries []memory.Summary `json:"summaries"`
	}{memory.ExportFormat, memory.Session{ID: "doc", Title: "bench", CreatedAt: t0}, msgs, sums}, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// BenchmarkImport measures ImportAs of a session of n messages (a quarter
// with a tool call) archived in each of exportShapes, into the stores
// compared (fresh per sub-benchmark; each op imports under a new id).
// MB/s is of the document.
func BenchmarkImport(b *testing.B) {
	for _, s := range benchStores {
		for _, shape := range exportShapes {
			for _, n := range exportSizes {
				b.Run(fmt.Sprintf("%s/%s/n=%d", s.name, shape.name, n), func(b *testing.B) {
					data := exportDoc(b, n, shape.sums(n))
					st := s.open(b)
					ctx := b.Context()
					b.ReportAllocs()
					b.SetBytes(int64(len(data)))
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						if _, err := memory.ImportAs(ctx, st, data, fmt.Sprint("s", i)); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkExport measures Export of the sessions BenchmarkImport imports.
func BenchmarkExport(b *testing.B) {
	for _, s := range benchStores {
		for _, shape := range exportShapes {
			for _, n := range exportSizes {
				b.Run(fmt.Sprintf("%s/%s/n=%d", s.name, shape.name, n), func(b *testing.B) {
					data := exportDoc(b, n, shape.sums(n))
					st := s.open(b)
					ctx := b.Context()
					if _, err := memory.ImportAs(ctx, st, data, "s"); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.SetBytes(int64(len(data)))
					b.ResetTimer()
					for b.Loop() {
						if _, err := memory.Export(ctx, st, "s"); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
