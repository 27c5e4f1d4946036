package pgstore_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// BenchmarkApprovalCreateDecide: one op is a CreateApproval and its
// DecideApproval, each one statement.
func BenchmarkApprovalCreateDecide(b *testing.B) {
	url := server(b)
	st := open(b, url, freshSchema(b, url))
	ctx := b.Context()
	args := json.RawMessage(`{"to":"a@example.com","subject":"hello"}`)
	d := memory.ApprovalDecision{Approved: true, Reason: "ok", Cause: "user"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := fmt.Sprint("ap-", i)
		i++
		if err := st.CreateApproval(ctx, memory.Approval{ID: id, SessionID: "s", CallID: "c", Tool: "send_mail", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		if _, err := st.DecideApproval(ctx, "s", id, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveCall: "insert" saves a new record per op, "replace" saves
// the same record again, "edit" saves it again with an approver's edit of
// the arguments, which rewrites the call in its stored assistant message
// (of 4 calls).
func BenchmarkSaveCall(b *testing.B) {
	url := server(b)
	for _, mode := range []string{"insert", "replace", "edit"} {
		b.Run(mode, func(b *testing.B) {
			st := open(b, url, freshSchema(b, url))
			ctx := b.Context()
			if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
				b.Fatal(err)
			}
			m, err := st.Append(ctx, "s", memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{
				{ID: "c", Name: "f", Arguments: json.RawMessage(`{"city":"Paris"}`)}, {ID: "d", Name: "f"}, {ID: "e", Name: "f"}, {ID: "g", Name: "f"}}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := memory.OpenCall{MessageID: m[0].ID, CallID: "c", Round: 1, ApprovalID: "ap", Executing: i%2 == 0}
				switch mode {
				case "insert":
					c.CallID = fmt.Sprint("c", i)
				case "edit":
					c.Arguments = json.RawMessage(fmt.Sprintf(`{"city":"Rome %d"}`, i))
				}
				i++
				if err := st.SaveCall(ctx, "s", c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNotifyLatency measures, one note at a time, the time from
// Notify to the listener's call: "same" listens through the sending Store,
// "other" through another Store on the schema, as another replica would.
// It reports the median and 99th percentile in microseconds.
func BenchmarkNotifyLatency(b *testing.B) {
	url := server(b)
	for _, mode := range []string{"same", "other"} {
		b.Run(mode, func(b *testing.B) {
			schema := freshSchema(b, url)
			from := open(b, url, schema)
			to := from
			if mode == "other" {
				to = open(b, url, schema)
			}
			ctx := b.Context()
			heard := make(chan string, 1)
			stop, err := to.Listen(ctx, "bench", func(p string) { heard <- p })
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			var lat []time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				want := strconv.Itoa(i)
				i++
				start := time.Now()
				if err := from.Notify(ctx, "bench", want); err != nil {
					b.Fatal(err)
				}
				select {
				case got := <-heard:
					if got != want {
						b.Fatalf("heard %q, want %q", got, want)
					}
				case <-time.After(10 * time.Second):
					b.Fatalf("note %s not heard within 10s", want)
				}
				lat = append(lat, time.Since(start))
			}
			reportPercentiles(b, lat)
		})
	}
}

// reportPercentiles reports the median and 99th percentile of lat in
// microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
