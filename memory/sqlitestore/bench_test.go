package sqlitestore_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/planround/planround/memory"
)

// BenchmarkApprovalCreateDecide: one op is a CreateApproval and its
// DecideApproval, each a write transaction.
func BenchmarkApprovalCreateDecide(b *testing.B) {
	st := openSQLite(b, filepath.Join(b.TempDir(), "bench.db"))
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
	for _, mode := range []string{"insert", "replace", "edit"} {
		b.Run(mode, func(b *testing.B) {
			st := openSQLite(b, filepath.Join(b.TempDir(), "bench.db"))
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

// BenchmarkNotify: one op is a Notify to a listener of the sending Store,
// "alone" on the file (no note is written to it) and with "another
// listening" Store on the file (each note is a row for it, a write
// transaction). "append event" is the write a runner makes before each
// note it sends: AppendEvents of one event.
func BenchmarkNotify(b *testing.B) {
	for _, mode := range []string{"alone", "another listening"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			st := openSQLite(b, path)
			ctx := b.Context()
			stop, err := st.Listen(ctx, "c", func(string) {})
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			if mode == "another listening" {
				other := openSQLite(b, path)
				stop, err := other.Listen(ctx, "c", func(string) {})
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
			}
			payload := "42 3f6c1e0a9b7d4c2e8f1a5b6c7d8e9f00"
			b.ReportAllocs()
			for b.Loop() {
				if err := st.Notify(ctx, "c", payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("append event", func(b *testing.B) {
		st := openSQLite(b, filepath.Join(b.TempDir(), "bench.db"))
		ctx := b.Context()
		if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
			b.Fatal(err)
		}
		data := json.RawMessage(`{"kind":"text","round":1,"text":"Hello! "}`)
		seq := int64(0)
		b.ReportAllocs()
		for b.Loop() {
			seq++
			if err := st.AppendEvents(ctx, "s", memory.Event{Seq: seq, Turn: 1, Kind: "chunk", Data: data}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
