package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// RunAPILog tests an implementation of [memory.APILog]: records round-trip
// field for field (the request byte for byte), come back newest first and
// filtered by session and time, are deleted by query, are refused when
// invalid, and are bounded by rows and by age as [memory.APILogLimits]
// say. newLog returns an empty log with the given limits.
func RunAPILog(t *testing.T, newLog func(t *testing.T, l memory.APILogLimits) memory.APILog) {
	t.Helper()
	ctx := context.Background()
	t.Run("RoundTrip", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		started := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
		in := memory.APICall{
			SessionID: "s1", Round: 2, Model: "m", Purpose: memory.PurposeToolRound,
			Request:      json.RawMessage(`{"model":"m",  "messages":[{"role":"user","content":"héllo"}]}`),
			Reply:        &memory.APIReply{Text: "hi", ToolCalls: []memory.APIToolCall{{ID: "c1", Name: "get", Arguments: `{"a":`}}},
			FinishReason: "tool_calls", Usage: memory.APIUsage{InputTokens: 10, OutputTokens: 3},
			Status: memory.APICallError, Error: "boom", FirstToken: 120 * time.Millisecond, Latency: 2 * time.Second,
			Started: started,
		}
		id, err := lg.AppendAPICall(ctx, in)
		mustKV(t, err)
		got, err := lg.APICall(ctx, id)
		mustKV(t, err)
		want := in
		want.ID = id
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("APICall = %+v\nwant %+v", got, want)
		}
		got.Request[0] = 'x'
		got.Reply.ToolCalls[0].Name = "changed"
		if again, _ := lg.APICall(ctx, id); !reflect.DeepEqual(again, want) {
			t.Fatalf("changing a returned record changed the store: %+v", again)
		}
		// Metadata only: no request, no reply; Started set by the store.
		before := time.Now().Add(-time.Second)
		id2, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposeSummary, Status: memory.APICallOK})
		mustKV(t, err)
		if id2 <= id {
			t.Fatalf("second id %d after %d, want growing ids", id2, id)
		}
		got, err = lg.APICall(ctx, id2)
		mustKV(t, err)
		if got.Request != nil || got.Reply != nil || got.Started.Before(before) || got.Started.Location() != time.UTC {
			t.Fatalf("metadata-only record = %+v", got)
		}
		if _, err := lg.APICall(ctx, id2+100); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("APICall of a missing id: %v, want ErrNotFound", err)
		}
	})
	t.Run("Query", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		base := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
		var ids []int64
		for i, s := range []string{"a", "b", "a", "c", "a"} {
			id, err := lg.AppendAPICall(ctx, memory.APICall{SessionID: s, Round: i, Model: "m", Purpose: memory.PurposePlanning,
				Status: memory.APICallOK, Started: base.Add(time.Duration(i) * time.Minute)})
			mustKV(t, err)
			ids = append(ids, id)
		}
		check := func(name string, q memory.APICallQuery, want ...int64) {
			t.Helper()
			got, err := lg.APICalls(ctx, q)
			mustKV(t, err)
			gotIDs := []int64{}
			for _, c := range got {
				gotIDs = append(gotIDs, c.ID)
			}
			if want == nil {
				want = []int64{}
			}
			if !reflect.DeepEqual(gotIDs, want) {
				t.Fatalf("%s: ids %v, want %v", name, gotIDs, want)
			}
		}
		check("all", memory.APICallQuery{}, ids[4], ids[3], ids[2], ids[1], ids[0])
		check("limit", memory.APICallQuery{Limit: 2}, ids[4], ids[3])
		check("session", memory.APICallQuery{SessionIDs: []string{"a"}}, ids[4], ids[2], ids[0])
		check("sessions", memory.APICallQuery{SessionIDs: []string{"b", "c"}}, ids[3], ids[1])
		check("since", memory.APICallQuery{Since: base.Add(2 * time.Minute)}, ids[4], ids[3], ids[2])
		check("session since limit", memory.APICallQuery{SessionIDs: []string{"a"}, Since: base.Add(time.Minute), Limit: 1}, ids[4])
		check("unknown session", memory.APICallQuery{SessionIDs: []string{"zz"}})

		mustKV(t, lg.DeleteAPICalls(ctx, memory.APICallQuery{SessionIDs: []string{"a"}, Since: base.Add(time.Minute)}))
		check("after delete", memory.APICallQuery{}, ids[3], ids[1], ids[0])
		mustKV(t, lg.DeleteAPICalls(ctx, memory.APICallQuery{}))
		check("after delete all", memory.APICallQuery{})
	})
	t.Run("Invalid", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		for name, c := range map[string]memory.APICall{
			"purpose":     {Purpose: "other", Status: memory.APICallOK},
			"status":      {Purpose: memory.PurposePlanning, Status: "maybe"},
			"error on ok": {Purpose: memory.PurposePlanning, Status: memory.APICallOK, Error: "x"},
			"request":     {Purpose: memory.PurposePlanning, Status: memory.APICallOK, Request: json.RawMessage(`{`)},
			"latency":     {Purpose: memory.PurposePlanning, Status: memory.APICallOK, Latency: -1},
		} {
			if _, err := lg.AppendAPICall(ctx, c); err == nil {
				t.Errorf("%s: AppendAPICall(%+v) accepted", name, c)
			}
		}
		if got, err := lg.APICalls(ctx, memory.APICallQuery{}); err != nil || len(got) != 0 {
			t.Fatalf("after refused appends: %d records, %v", len(got), err)
		}
	})
	t.Run("BoundRows", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{MaxRows: 3})
		var ids []int64
		for i := range 7 {
			id, err := lg.AppendAPICall(ctx, memory.APICall{Round: i, Model: "m", Purpose: memory.PurposeToolRound, Status: memory.APICallOK})
			mustKV(t, err)
			ids = append(ids, id)
		}
		got, err := lg.APICalls(ctx, memory.APICallQuery{})
		mustKV(t, err)
		if len(got) != 3 || got[0].ID != ids[6] || got[2].ID != ids[4] {
			t.Fatalf("with MaxRows 3 after 7 appends: %d records %+v, want the 3 newest", len(got), got)
		}
		if _, err := lg.APICall(ctx, ids[0]); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("the oldest record: %v, want ErrNotFound", err)
		}
	})
	t.Run("BoundAge", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{MaxAge: time.Hour, MaxRows: -1})
		now := time.Now().UTC()
		old, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK, Started: now.Add(-3 * time.Hour)})
		mustKV(t, err)
		recent, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK, Started: now.Add(-30 * time.Minute)})
		mustKV(t, err)
		fresh, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK})
		mustKV(t, err)
		late, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK, Started: now.Add(-2 * time.Hour)})
		mustKV(t, err)
		got, err := lg.APICalls(ctx, memory.APICallQuery{})
		mustKV(t, err)
		if len(got) != 2 || got[0].ID != fresh || got[1].ID != recent {
			t.Fatalf("with MaxAge 1h: %+v, want %d and %d (dropped %d and %d)", got, fresh, recent, old, late)
		}
	})
	t.Run("Unbounded", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{MaxAge: -1, MaxRows: -1})
		_, err := lg.AppendAPICall(ctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK, Started: time.Now().Add(-400 * 24 * time.Hour)})
		mustKV(t, err)
		if got, err := lg.APICalls(ctx, memory.APICallQuery{}); err != nil || len(got) != 1 {
			t.Fatalf("without bounds: %d records, %v", len(got), err)
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		const writers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					_, err := lg.AppendAPICall(ctx, memory.APICall{SessionID: fmt.Sprint("w", w), Round: i, Model: "m",
						Purpose: memory.PurposeToolRound, Status: memory.APICallOK})
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			mustKV(t, err)
		}
		got, err := lg.APICalls(ctx, memory.APICallQuery{})
		mustKV(t, err)
		if len(got) != writers*each {
			t.Fatalf("%d records after %d concurrent appends", len(got), writers*each)
		}
		for i := 1; i < len(got); i++ {
			if got[i].ID >= got[i-1].ID {
				t.Fatalf("ids %d then %d: want distinct, newest first", got[i-1].ID, got[i].ID)
			}
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := lg.AppendAPICall(cctx, memory.APICall{Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK}); err == nil {
			t.Error("AppendAPICall with a cancelled context: no error")
		}
		if _, err := lg.APICalls(cctx, memory.APICallQuery{}); err == nil {
			t.Error("APICalls with a cancelled context: no error")
		}
	})
	t.Run("DeleteSession", func(t *testing.T) {
		lg := newLog(t, memory.APILogLimits{})
		st, ok := lg.(memory.Store)
		if !ok {
			t.Skip("the log is not the Store of the sessions")
		}
		for _, id := range []string{"gone", "kept"} {
			if _, err := st.CreateSession(ctx, memory.Session{ID: id}); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, err := lg.AppendAPICall(ctx, memory.APICall{SessionID: id, Model: "m", Purpose: memory.PurposePlanning, Status: memory.APICallOK})
				mustKV(t, err)
			}
		}
		if err := st.DeleteSession(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		got, err := lg.APICalls(ctx, memory.APICallQuery{})
		mustKV(t, err)
		if len(got) != 2 || got[0].SessionID != "kept" || got[1].SessionID != "kept" {
			t.Fatalf("after DeleteSession(gone), the log holds %+v: want kept's two records", got)
		}
	})
}
