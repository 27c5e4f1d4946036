package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// The tests of [memory.EventLog], run by RunDurable; the writers test also
// by RunEventLogPair.

// RunEventLogPair checks that two [memory.EventLog] handles on one backing
// store, as two processes would hold, share the logs: what one appends or
// trims the other reads, and of writers on both that append the same
// numbers at once exactly one wins each. newPair must return two handles
// on one new, empty store; it should register their clean-up with
// t.Cleanup.
func RunEventLogPair(t *testing.T, newPair func(t *testing.T) (a, b memory.Store)) {
	t.Helper()
	pair := func(t *testing.T) (memory.Store, memory.Store) {
		a, b := newPair(t)
		if _, ok := a.(memory.EventLog); !ok {
			t.Fatalf("storetest.RunEventLogPair: %T does not implement memory.EventLog", a)
		}
		if _, ok := b.(memory.EventLog); !ok {
			t.Fatalf("storetest.RunEventLogPair: %T does not implement memory.EventLog", b)
		}
		return a, b
	}
	t.Run("Shared", func(t *testing.T) {
		a, b := pair(t)
		la, lb := a.(memory.EventLog), b.(memory.EventLog)
		create(t, a, "s")
		appendEvents(t, la, "s", evRange(1, 5)...)
		checkEvents(t, lb, "s", 0, 0, evRange(1, 5), 5)
		trimEvents(t, lb, "s", 3)
		checkEvents(t, la, "s", 0, 0, evRange(1, 5)[3:], 5)
		if err := la.AppendEvents(t.Context(), "s", evRange(5, 6)...); !errors.Is(err, memory.ErrEventSeq) {
			t.Errorf("AppendEvents of seq 5 through one handle after the other wrote 5: err = %v, want ErrEventSeq", err)
		}
		appendEvents(t, lb, "s", evRange(6, 6)...)
		checkEvents(t, la, "s", 5, 0, evRange(6, 6), 6)
		if err := b.DeleteSession(t.Context(), "s"); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		if _, err := la.LastEvent(t.Context(), "s"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("LastEvent through one handle of a session deleted through the other: err = %v, want ErrNotFound", err)
		}
	})
	t.Run("Writers", func(t *testing.T) {
		a, b := pair(t)
		testEventWriters(t, a, a.(memory.EventLog), b.(memory.EventLog))
	})
}

// ev returns a valid event numbered seq, outside a turn unless turn is set,
// whose data names it.
func ev(seq, turn int64) memory.Event {
	return memory.Event{Seq: seq, Turn: turn, Kind: "delta", Data: fmt.Appendf(nil, `{"n":%d}`, seq)}
}

// evRange returns the events from through to, each in the turn started by
// from.
func evRange(from, to int64) []memory.Event {
	var out []memory.Event
	for s := from; s <= to; s++ {
		out = append(out, ev(s, from))
	}
	out[0].Kind = "turn_started"
	return out
}

func appendEvents(t *testing.T, log memory.EventLog, id string, evs ...memory.Event) {
	t.Helper()
	if err := log.AppendEvents(t.Context(), id, evs...); err != nil {
		t.Fatalf("AppendEvents(%q, %d events from seq %d): %v", id, len(evs), evs[0].Seq, err)
	}
}

func trimEvents(t *testing.T, log memory.EventLog, id string, through int64) {
	t.Helper()
	if err := log.TrimEvents(t.Context(), id, through); err != nil {
		t.Fatalf("TrimEvents(%q, %d): %v", id, through, err)
	}
}

func lastEvent(t *testing.T, log memory.EventLog, id string) int64 {
	t.Helper()
	n, err := log.LastEvent(t.Context(), id)
	if err != nil {
		t.Fatalf("LastEvent(%q): %v", id, err)
	}
	return n
}

func events(t *testing.T, log memory.EventLog, id string, after int64, limit int) ([]memory.Event, int64) {
	t.Helper()
	evs, last, err := log.Events(t.Context(), id, after, limit)
	if err != nil {
		t.Fatalf("Events(%q, %d, %d): %v", id, after, limit, err)
	}
	return evs, last
}

// sameEvent reports whether got is want as stored: equal fields, Data
// byte for byte (empty as nil), and CreatedAt equal when want has one.
func sameEvent(got, want memory.Event) bool {
	return got.Seq == want.Seq && got.Turn == want.Turn && got.Kind == want.Kind &&
		bytes.Equal(got.Data, want.Data) && (len(got.Data) > 0 || got.Data == nil) &&
		(want.CreatedAt.IsZero() || got.CreatedAt.Equal(want.CreatedAt))
}

// checkEvents checks that Events(after, limit) returns want and last.
func checkEvents(t *testing.T, log memory.EventLog, id string, after int64, limit int, want []memory.Event, last int64) {
	t.Helper()
	got, gotLast := events(t, log, id, after, limit)
	if gotLast != last {
		t.Errorf("Events(%q, %d, %d): last = %d, want %d", id, after, limit, gotLast, last)
	}
	if len(got) != len(want) {
		t.Errorf("Events(%q, %d, %d) = seqs %v, want %v", id, after, limit, seqs(got), seqs(want))
		return
	}
	for i := range got {
		if !sameEvent(got[i], want[i]) {
			t.Errorf("Events(%q, %d, %d)[%d] = %+v, want %+v", id, after, limit, i, got[i], want[i])
		}
		if got[i].CreatedAt.IsZero() || got[i].CreatedAt.Location() != time.UTC {
			t.Errorf("Events(%q, %d, %d)[%d]: CreatedAt = %v, want a time in UTC", id, after, limit, i, got[i].CreatedAt)
		}
	}
}

func seqs(evs []memory.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// testEventAppend: events come back as appended, numbered by their writer,
// with a time set by the store unless given; no append leaves a log empty.
func testEventAppend(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	create(t, st, "s")
	create(t, st, "other")
	if n := lastEvent(t, log, "s"); n != 0 {
		t.Errorf("LastEvent of a new session = %d, want 0", n)
	}
	checkEvents(t, log, "s", 0, 0, nil, 0)
	if err := log.AppendEvents(t.Context(), "s"); err != nil {
		t.Errorf("AppendEvents of no events: %v", err)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", -7200))
	first := []memory.Event{{Seq: 1, Turn: 1, Kind: "turn_started", Data: []byte(`{"message":"hi"}`), CreatedAt: at}}
	before := time.Now()
	appendEvents(t, log, "s", first...)
	// Data kept byte for byte, whatever it holds; a kind of any script.
	batch := []memory.Event{
		{Seq: 2, Turn: 1, Kind: "delta", Data: []byte("not json \x00\xff\xfe")},
		{Seq: 3, Turn: 1, Kind: "délta 文字"},
		{Seq: 4, Turn: 1, Kind: strings.Repeat("k", memory.MaxEventKind), Data: []byte{}},
		{Seq: 5, Turn: 0, Kind: "outside"},
		{Seq: 6, Turn: 6, Kind: "turn_started", Data: []byte("{}")},
	}
	appendEvents(t, log, "s", batch...)
	after := time.Now()
	want := append(append([]memory.Event(nil), first...), batch...)
	checkEvents(t, log, "s", 0, 0, want, 6)
	got, _ := events(t, log, "s", 0, 0)
	if !got[0].CreatedAt.Equal(at) {
		t.Errorf("CreatedAt given = %v, want %v", got[0].CreatedAt, at)
	}
	for _, e := range got[1:] {
		// Stores keep at least microseconds.
		if e.CreatedAt.Before(before.Truncate(time.Microsecond)) || e.CreatedAt.After(after) {
			t.Errorf("event %d: CreatedAt set by the store = %v, want between %v and %v", e.Seq, e.CreatedAt, before, after)
		}
	}
	if n := lastEvent(t, log, "s"); n != 6 {
		t.Errorf("LastEvent = %d, want 6", n)
	}
	// A big batch, and another session's log apart.
	big := evRange(7, 306)
	appendEvents(t, log, "s", big...)
	checkEvents(t, log, "s", 6, 0, big, 306)
	appendEvents(t, log, "other", evRange(1, 2)...)
	checkEvents(t, log, "other", 0, 0, evRange(1, 2), 2)
	if n := lastEvent(t, log, "s"); n != 306 {
		t.Errorf("LastEvent after another session's append = %d, want 306", n)
	}
	for _, id := range []string{"s", "other"} {
		s, err := st.Session(t.Context(), id)
		if err != nil {
			t.Fatalf("Session(%q): %v", id, err)
		}
		if !s.UpdatedAt.Equal(s.CreatedAt) {
			t.Errorf("session %q: UpdatedAt = %v after AppendEvents, want it unchanged (%v)", id, s.UpdatedAt, s.CreatedAt)
		}
	}
}

// testEventSequence: a batch that does not continue the log is refused
// with ErrEventSeq and nothing of it is written, whoever sends it.
func testEventSequence(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	ctx := t.Context()
	create(t, st, "s")
	if err := log.AppendEvents(ctx, "s", evRange(2, 3)...); !errors.Is(err, memory.ErrEventSeq) {
		t.Errorf("AppendEvents from seq 2 to an empty log: err = %v, want ErrEventSeq", err)
	}
	appendEvents(t, log, "s", evRange(1, 3)...)
	for _, c := range []struct {
		name string
		evs  []memory.Event
	}{
		{"a gap", evRange(5, 6)},
		{"the last number again", evRange(3, 4)},
		{"from the start again", evRange(1, 5)},
		{"a late flush of a writer that saw seq 2", evRange(3, 10)},
	} {
		if err := log.AppendEvents(ctx, "s", c.evs...); !errors.Is(err, memory.ErrEventSeq) {
			t.Errorf("AppendEvents of %s (seqs %v) to a log at 3: err = %v, want ErrEventSeq", c.name, seqs(c.evs), err)
		}
	}
	checkEvents(t, log, "s", 0, 0, evRange(1, 3), 3)
	// A new writer takes over at 3 and appends: the previous one's flush
	// from 4 fails, and nothing of it is written.
	appendEvents(t, log, "s", evRange(4, 5)...)
	late := evRange(4, 8)
	late[0].Kind = "late"
	if err := log.AppendEvents(ctx, "s", late...); !errors.Is(err, memory.ErrEventSeq) {
		t.Errorf("late AppendEvents from seq 4 after another writer wrote 4 and 5: err = %v, want ErrEventSeq", err)
	}
	checkEvents(t, log, "s", 0, 0, append(evRange(1, 3), evRange(4, 5)...), 5)
}

// testEventInvalid: what memory.ValidateEvents refuses is an error (not
// ErrEventSeq) and nothing of the batch is written.
func testEventInvalid(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	create(t, st, "s")
	appendEvents(t, log, "s", evRange(1, 2)...)
	with := func(f func(evs []memory.Event)) []memory.Event {
		evs := evRange(3, 5)
		f(evs)
		return evs
	}
	for _, c := range []struct {
		name string
		evs  []memory.Event
	}{
		{"a gap inside the batch", with(func(evs []memory.Event) { evs[2].Seq = 6 })},
		{"numbers out of order", with(func(evs []memory.Event) { evs[1].Seq, evs[2].Seq = 5, 4 })},
		{"a repeated number", with(func(evs []memory.Event) { evs[2].Seq = 4 })},
		{"seq 0", []memory.Event{{Seq: 0, Kind: "k"}}},
		{"a negative seq", []memory.Event{{Seq: -1, Kind: "k"}}},
		{"an empty kind", with(func(evs []memory.Event) { evs[1].Kind = "" })},
		{"a kind too long", with(func(evs []memory.Event) { evs[1].Kind = strings.Repeat("k", memory.MaxEventKind+1) })},
		{"a kind with a NUL", with(func(evs []memory.Event) { evs[1].Kind = "a\x00b" })},
		{"a kind with a newline", with(func(evs []memory.Event) { evs[1].Kind = "a\nb" })},
		{"a kind of invalid UTF-8", with(func(evs []memory.Event) { evs[1].Kind = "a\xffb" })},
		{"a turn after the event", with(func(evs []memory.Event) { evs[1].Turn = 5 })},
		{"a negative turn", with(func(evs []memory.Event) { evs[1].Turn = -1 })},
		{"a time out of range", with(func(evs []memory.Event) { evs[2].CreatedAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) })},
	} {
		err := log.AppendEvents(t.Context(), "s", c.evs...)
		if err == nil {
			t.Errorf("AppendEvents with %s: got nil error", c.name)
		} else if errors.Is(err, memory.ErrEventSeq) {
			t.Errorf("AppendEvents with %s: err = %v, want an error that does not wrap ErrEventSeq (the batch is wrong, whatever the log holds)", c.name, err)
		}
		if err := memory.ValidateEvents(c.evs); err == nil {
			t.Errorf("ValidateEvents with %s: got nil error", c.name)
		}
	}
	checkEvents(t, log, "s", 0, 0, evRange(1, 2), 2)
	appendEvents(t, log, "s", evRange(3, 5)...) // the log is usable and at 2
}

// testEventRead: Events after a cursor, with a limit, and the last number
// read at the same time.
func testEventRead(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	ctx := t.Context()
	create(t, st, "s")
	all := evRange(1, 10)
	appendEvents(t, log, "s", all[:4]...)
	appendEvents(t, log, "s", all[4:]...)
	for _, c := range []struct {
		after int64
		limit int
		want  []memory.Event
	}{
		{0, 0, all},
		{0, -1, all},
		{3, 0, all[3:]},
		{3, 4, all[3:7]},
		{9, 5, all[9:]},
		{0, 1, all[:1]},
		{10, 0, nil},
		{10, 3, nil},
		{25, 0, nil}, // a cursor beyond the log: none, and last says so
	} {
		checkEvents(t, log, "s", c.after, c.limit, c.want, 10)
	}
	if _, _, err := log.Events(ctx, "s", -1, 0); err == nil {
		t.Errorf("Events after -1: got nil error")
	}
}

// testEventTrim: trimmed events are gone, the log's number stays, and a
// reader whose cursor was trimmed sees the gap.
func testEventTrim(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	create(t, st, "s")
	create(t, st, "other")
	all := evRange(1, 10)
	appendEvents(t, log, "s", all...)
	appendEvents(t, log, "other", evRange(1, 3)...)
	trimEvents(t, log, "s", 4)
	if n := lastEvent(t, log, "s"); n != 10 {
		t.Errorf("LastEvent after a trim = %d, want 10", n)
	}
	checkEvents(t, log, "s", 0, 0, all[4:], 10)
	checkEvents(t, log, "s", 2, 2, all[4:6], 10) // first Seq 5 > 3: the gap
	checkEvents(t, log, "s", 4, 0, all[4:], 10)
	checkEvents(t, log, "s", 6, 0, all[6:], 10)
	for _, through := range []int64{4, 2, 0, -3} {
		trimEvents(t, log, "s", through) // already gone: no error
	}
	checkEvents(t, log, "s", 0, 0, all[4:], 10)
	trimEvents(t, log, "s", 10)
	checkEvents(t, log, "s", 0, 0, nil, 10)
	checkEvents(t, log, "s", 7, 0, nil, 10) // none left: last > cursor is the gap
	if n := lastEvent(t, log, "s"); n != 10 {
		t.Errorf("LastEvent after trimming every event = %d, want 10", n)
	}
	if err := log.AppendEvents(t.Context(), "s", evRange(1, 1)...); !errors.Is(err, memory.ErrEventSeq) {
		t.Errorf("AppendEvents from seq 1 to a trimmed log at 10: err = %v, want ErrEventSeq", err)
	}
	appendEvents(t, log, "s", evRange(11, 12)...)
	checkEvents(t, log, "s", 0, 0, evRange(11, 12), 12)
	// Trimming beyond the log removes what it holds; what comes later is
	// kept.
	trimEvents(t, log, "s", 100)
	appendEvents(t, log, "s", evRange(13, 14)...)
	checkEvents(t, log, "s", 0, 0, evRange(13, 14), 14)
	checkEvents(t, log, "other", 0, 0, evRange(1, 3), 3)
}

// testEventDelete: DeleteSession removes the log and its number.
func testEventDelete(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	ctx := t.Context()
	create(t, st, "gone")
	create(t, st, "kept")
	appendEvents(t, log, "gone", evRange(1, 20)...)
	trimEvents(t, log, "gone", 5)
	appendEvents(t, log, "kept", evRange(1, 4)...)
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if _, _, err := log.Events(ctx, "gone", 0, 0); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Events of a deleted session: err = %v, want ErrNotFound", err)
	}
	if _, err := log.LastEvent(ctx, "gone"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("LastEvent of a deleted session: err = %v, want ErrNotFound", err)
	}
	if err := log.AppendEvents(ctx, "gone", evRange(21, 21)...); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("AppendEvents to a deleted session: err = %v, want ErrNotFound", err)
	}
	create(t, st, "gone")
	if n := lastEvent(t, log, "gone"); n != 0 {
		t.Errorf("LastEvent of a session created again = %d, want 0", n)
	}
	checkEvents(t, log, "gone", 0, 0, nil, 0)
	if err := log.AppendEvents(ctx, "gone", evRange(21, 21)...); !errors.Is(err, memory.ErrEventSeq) {
		t.Errorf("AppendEvents from the old number to a session created again: err = %v, want ErrEventSeq", err)
	}
	appendEvents(t, log, "gone", evRange(1, 3)...)
	checkEvents(t, log, "gone", 0, 0, evRange(1, 3), 3)
	checkEvents(t, log, "kept", 0, 0, evRange(1, 4), 4)
}

// testEventDeleteRacing: a session deleted and created again while a
// writer appends to it keeps no event of its earlier life: the writer's
// appends succeed or fail with ErrNotFound or ErrEventSeq, and the log of
// the last life is whole, numbered from 1.
func testEventDeleteRacing(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	create(t, st, "s")
	done := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		for i := 0; i < 2000; i++ {
			select {
			case <-done:
				return
			default:
			}
			last, err := log.LastEvent(ctx, "s")
			if errors.Is(err, memory.ErrNotFound) {
				continue
			}
			if err != nil {
				werr = err
				return
			}
			err = log.AppendEvents(ctx, "s", evRange(last+1, last+3)...)
			if err != nil && !errors.Is(err, memory.ErrNotFound) && !errors.Is(err, memory.ErrEventSeq) {
				werr = fmt.Errorf("AppendEvents from seq %d: %w, want nil, ErrNotFound or ErrEventSeq", last+1, err)
				return
			}
		}
	})
	for range 8 {
		time.Sleep(2 * time.Millisecond)
		if err := st.DeleteSession(ctx, "s"); err != nil {
			t.Errorf("DeleteSession: %v", err)
		}
		create(t, st, "s")
	}
	close(done)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	evs, last := events(t, log, "s", 0, 0)
	if int64(len(evs)) != last {
		t.Fatalf("Events of the last life = seqs %v, last %d, want 1 to last", seqs(evs), last)
	}
	for i, e := range evs {
		if e.Seq != int64(i)+1 {
			t.Fatalf("Events of the last life = seqs %v, want 1 to %d", seqs(evs), last)
		}
	}
}

// testEventNotFound: every method on an unknown session wraps ErrNotFound.
func testEventNotFound(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	ctx := t.Context()
	if err := log.AppendEvents(ctx, "nope", evRange(1, 2)...); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("AppendEvents: err = %v, want ErrNotFound", err)
	}
	if err := log.AppendEvents(ctx, "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("AppendEvents of no events: err = %v, want ErrNotFound", err)
	}
	if _, _, err := log.Events(ctx, "nope", 0, 0); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Events: err = %v, want ErrNotFound", err)
	}
	if _, err := log.LastEvent(ctx, "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("LastEvent: err = %v, want ErrNotFound", err)
	}
	if err := log.TrimEvents(ctx, "nope", 3); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("TrimEvents: err = %v, want ErrNotFound", err)
	}
}

// testEventCopies: changing what was appended, or what was read, does not
// change the log.
func testEventCopies(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	create(t, st, "s")
	in := evRange(1, 2)
	appendEvents(t, log, "s", in...)
	in[0].Data[0], in[0].Kind = 'X', "changed"
	got, _ := events(t, log, "s", 0, 0)
	got[0].Data[0] = 'Y'
	got[1].Data = append(got[1].Data[:1], "changed"...)
	checkEvents(t, log, "s", 0, 0, evRange(1, 2), 2)
}

// testEventCancelled: every method fails with a done context, and nothing
// is written.
func testEventCancelled(t *testing.T, st memory.Store) {
	log := st.(memory.EventLog)
	create(t, st, "s")
	appendEvents(t, log, "s", evRange(1, 4)...)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := log.AppendEvents(ctx, "s", evRange(5, 6)...); err == nil {
		t.Errorf("AppendEvents with a cancelled context: got nil error")
	}
	if _, _, err := log.Events(ctx, "s", 0, 0); err == nil {
		t.Errorf("Events with a cancelled context: got nil error")
	}
	if _, err := log.LastEvent(ctx, "s"); err == nil {
		t.Errorf("LastEvent with a cancelled context: got nil error")
	}
	if err := log.TrimEvents(ctx, "s", 2); err == nil {
		t.Errorf("TrimEvents with a cancelled context: got nil error")
	}
	checkEvents(t, log, "s", 0, 0, evRange(1, 4), 4)
}

// testEventWritersOne runs testEventWriters with one handle.
func testEventWritersOne(t *testing.T, st memory.Store) {
	testEventWriters(t, st, st.(memory.EventLog), st.(memory.EventLog))
}

// testEventWriters: writers, alternately on a and b, append at once from
// the same number, round after round, each a batch of its own size:
// exactly one wins each round, the others get ErrEventSeq, and the log
// holds the winners' batches and nothing else.
func testEventWriters(t *testing.T, st memory.Store, a, b memory.EventLog) {
	const writers, rounds = 6, 15
	create(t, st, "s")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var want []memory.Event
	for r := range rounds {
		from := int64(len(want)) + 1
		batches := make([][]memory.Event, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			batch := make([]memory.Event, 1+w%3)
			for i := range batch {
				seq := from + int64(i)
				batch[i] = memory.Event{Seq: seq, Turn: from, Kind: fmt.Sprint("writer-", w), Data: fmt.Appendf(nil, `{"round":%d,"writer":%d,"seq":%d}`, r, w, seq)}
			}
			batches[w] = batch
			log := []memory.EventLog{a, b}[w%2]
			wg.Go(func() {
				<-start
				errs[w] = log.AppendEvents(ctx, "s", batch...)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both appended from seq %d", r, winner, w, from)
				}
				winner = w
			case !errors.Is(err, memory.ErrEventSeq):
				t.Fatalf("round %d: writer %d: err = %v, want nil or ErrEventSeq", r, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer appended from seq %d", r, from)
		}
		want = append(want, batches[winner]...)
		if n, err := b.LastEvent(ctx, "s"); err != nil || n != int64(len(want)) {
			t.Fatalf("round %d: LastEvent = %d, %v, want %d (writer %d's batch of %d)", r, n, err, len(want), winner, len(batches[winner]))
		}
	}
	checkEvents(t, a, "s", 0, 0, want, int64(len(want)))
	checkEvents(t, b, "s", 0, 0, want, int64(len(want)))
}
