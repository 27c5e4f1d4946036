package memory

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Event is one entry of a session's event log ([EventLog]): what a runner
// publishes of a session's turns, numbered per session.
type Event struct {
	// Seq numbers the session's events from 1, with no gap, in the order
	// they were appended; the writer gives it.
	Seq int64 `json:"seq"`
	// Turn is the Seq of the event that started the turn this event
	// belongs to (its own Seq for that event); 0 outside a turn.
	Turn int64 `json:"turn,omitempty"`
	// Kind names the event for its reader (the log keeps it and does not
	// interpret it): not empty, at most [MaxEventKind] bytes of UTF-8 text
	// without control characters.
	Kind string `json:"kind"`
	// Data is the event's payload (JSON by convention; the log keeps the
	// bytes as they are, and may be empty: it comes back nil then).
	Data []byte `json:"data,omitempty"`
	// CreatedAt is set by the store when zero.
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// MaxEventKind is the longest [Event.Kind], in bytes.
const MaxEventKind = 64

// ErrEventSeq is returned (wrapped) by [EventLog.AppendEvents] when the
// events do not continue the session's log: their first Seq is not the
// log's last number plus one. Nothing is written.
var ErrEventSeq = errors.New("memory: event out of sequence")

// EventLog is implemented by stores that keep sessions' event logs: what a
// session runner publishes of each turn (its start, every piece of the
// agent's output, its end), so that a client that reconnects, to any
// process sharing the store, replays a turn from the last event it has and
// then follows it live.
//
// A log belongs to its session: every method returns an error wrapping
// [ErrNotFound] for an unknown session, and DeleteSession removes the log
// and its number, so that a session created again under the same id starts
// at 0. Appending events does not change the session's UpdatedAt. The log
// is not part of an [Export]. Like a [Store]'s, the methods return an error
// when ctx is already done, and copies.
//
// # Writers
//
// The writer numbers the events, and the store takes a batch only when it
// continues the log: of writers that race for one session, across
// processes, exactly one gets each number, and the others get
// [ErrEventSeq] with nothing written. This is what keeps the log whole
// when one writer at a time is meant to drive a session (a [Leaser]'s
// lease) but a previous one may still flush late: once the new writer has
// appended, every later flush of the previous one fails. A flush that lands
// between the new writer's reading of [EventLog.LastEvent] and its first
// append makes that append fail instead; so on ErrEventSeq a writer that
// still holds the lease reads LastEvent again and goes on after it (the
// late events are the end of the previous writer's turn), and one that does
// not hold it stops. A writer that got an error from an append it cannot
// tell was written (a connection lost at commit) and holds the lease reads
// LastEvent too: nobody else appends while it holds the lease and has
// appended.
//
// # Readers
//
// A reader with a cursor (the Seq of the last event it has) calls
// [EventLog.Events] with it, then again whenever it learns of new events
// (by a [Notifier]'s note, or on a timer). Trimmed events leave a gap: the
// first Seq returned is more than cursor+1, or, when none is returned, the
// log's last number is more than the cursor. A cursor beyond the last
// number is not of this log (the session was deleted and created again,
// say): the reader starts over.
type EventLog interface {
	// AppendEvents adds evs, numbered by the caller, to the session's log,
	// in one transaction: all or none. Their numbers follow one another
	// (see [ValidateEvents]) and continue the log: evs[0].Seq is
	// LastEvent+1, or the error wraps [ErrEventSeq]. Appending no events
	// only checks that the session exists.
	AppendEvents(ctx context.Context, sessionID string, evs ...Event) error
	// Events returns the session's events with Seq > after, oldest first,
	// at most limit of them (limit <= 0: all), and, read at the same time,
	// the session's LastEvent. When the log no longer holds the events
	// right after after (trimmed), it returns those it holds: the caller
	// sees the gap from the first Seq, or from last when none is left. A
	// negative after is an error.
	Events(ctx context.Context, sessionID string, after int64, limit int) (evs []Event, last int64, err error)
	// LastEvent returns the number of the session's last event ever
	// appended, trimmed or not; 0 when none.
	LastEvent(ctx context.Context, sessionID string) (int64, error)
	// TrimEvents removes the session's events with Seq <= through; its
	// LastEvent stays, and so does the number of the next append. Trimming
	// what is already gone is no error; events appended later are kept
	// whatever through was.
	TrimEvents(ctx context.Context, sessionID string, through int64) error
}

// checkEventKind reports whether k may be an [Event.Kind].
func checkEventKind(k string) error {
	switch {
	case k == "":
		return errors.New("empty kind")
	case len(k) > MaxEventKind:
		return fmt.Errorf("kind of %d bytes, more than %d", len(k), MaxEventKind)
	case !utf8.ValidString(k):
		return fmt.Errorf("kind %q is not valid UTF-8", k)
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return fmt.Errorf("kind %q holds a control character", k)
		}
	}
	return nil
}

// cloneEvents returns a copy of evs that shares no memory with it (Data is
// copied, and an empty Data is nil).
func cloneEvents(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		out[i] = ev
		out[i].Data = nil
		if len(ev.Data) > 0 {
			out[i].Data = append([]byte(nil), ev.Data...)
		}
	}
	return out
}
