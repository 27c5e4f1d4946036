package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/planround/planround/memory"
)

// A writer publishes a turn; a reader that has the events up to 2 replays
// the rest after a reconnection; a late writer is refused; a reader whose
// cursor was trimmed sees the gap.
func ExampleEventLog() {
	ctx := context.Background()
	var st memory.MemStore // any store that implements memory.EventLog
	var log memory.EventLog = &st
	if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
		panic(err)
	}

	// The writer that holds the session's lease numbers from LastEvent+1.
	last, _ := log.LastEvent(ctx, "s")
	turn := last + 1
	err := log.AppendEvents(ctx, "s",
		memory.Event{Seq: turn, Turn: turn, Kind: "turn_started", Data: []byte(`{"message":"hi"}`)},
		memory.Event{Seq: turn + 1, Turn: turn, Kind: "text", Data: []byte(`"Hel"`)},
		memory.Event{Seq: turn + 2, Turn: turn, Kind: "text", Data: []byte(`"lo"`)},
		memory.Event{Seq: turn + 3, Turn: turn, Kind: "turn_done"},
	)
	if err != nil {
		panic(err)
	}

	// A reader reconnects with cursor 2.
	evs, last, _ := log.Events(ctx, "s", 2, 0)
	for _, ev := range evs {
		fmt.Printf("%d %s data=%s\n", ev.Seq, ev.Kind, ev.Data)
	}
	fmt.Println("last:", last)

	// A previous writer flushes late, from the number it had: refused.
	err = log.AppendEvents(ctx, "s", memory.Event{Seq: 3, Turn: 1, Kind: "text", Data: []byte(`"late"`)})
	fmt.Println(errors.Is(err, memory.ErrEventSeq))

	// The turn's events are trimmed; a reader at 1 sees the gap.
	if err := log.TrimEvents(ctx, "s", 3); err != nil {
		panic(err)
	}
	evs, _, _ = log.Events(ctx, "s", 1, 0)
	fmt.Println("first:", evs[0].Seq, "gap:", evs[0].Seq > 1+1)
	// Output:
	// 3 text data="lo"
	// 4 turn_done data=
	// last: 4
	// true
	// first: 4 gap: true
}
