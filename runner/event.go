package runner

import (
	"encoding/json"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// EventKind says what an [Event] is.
type EventKind string

// The kinds of events.
const (
	// EventTurnStarted starts a turn: a new message, or a turn resumed
	// from the store ([Event.Started]).
	EventTurnStarted EventKind = "turn_started"
	// EventChunk is a chunk of the turn's run ([Event.Chunk]).
	EventChunk EventKind = "chunk"
	// EventTurnEnded ends a turn ([Event.Ended]).
	EventTurnEnded EventKind = "turn_ended"
	// EventSessionDeleted says that the session was deleted ([Runner.Delete]);
	// it is the last event a subscriber gets. It is not logged: it has no
	// Seq.
	EventSessionDeleted EventKind = "session_deleted"
)

// Event is one event of a session's turns, as [Runner.Subscribe] yields
// them. Its JSON is stable, like a Chunk's: a host forwards it unchanged.
type Event struct {
	// Seq numbers the session's events from 1, with no gap; a subscriber
	// that reconnects passes the Seq of the last event it has.
	Seq int64 `json:"seq,omitempty"`
	// Turn is the Seq of the EventTurnStarted of the turn the event
	// belongs to.
	Turn int64     `json:"turn,omitempty"`
	Kind EventKind `json:"kind"`
	// Started is set on EventTurnStarted, Chunk on EventChunk, Ended on
	// EventTurnEnded.
	Started *TurnStarted `json:"started,omitempty"`
	Chunk   *agent.Chunk `json:"chunk,omitempty"`
	Ended   *TurnEnded   `json:"ended,omitempty"`
}

// TurnStarted is what starts a turn.
type TurnStarted struct {
	// Message is the user's message that started the turn; empty for a
	// resumed turn.
	Message string `json:"message,omitempty"`
	// Resumed is true for a turn continued from the store (agent.Resume):
	// after a restart, a decision on a suspended turn, or on another
	// process. Its chunks continue the calls of the turn it resumes.
	Resumed bool `json:"resumed,omitempty"`
	// History is the id of the session's last stored message when the turn
	// started: a client that loads the history while the turn runs shows
	// the messages up to it, and the rest from the turn's events.
	History int64 `json:"history"`
}

// Status says how a turn ended.
type Status string

// The statuses of an ended turn.
const (
	// StatusFinished: the run ended normally.
	StatusFinished Status = "finished"
	// StatusInterrupted: the run was interrupted ([Runner.Interrupt]), its
	// process shut down, or the process that ran it stopped (Reason says).
	// A run whose pending approval was cancelled ([Runner.Stop] in another
	// process, whose cancellation may reach it before the interrupt) ends
	// so too.
	StatusInterrupted Status = "interrupted"
	// StatusRejected: a rejected tool call ended the run (Reason and Cause
	// say which).
	StatusRejected Status = "rejected"
	// StatusSuspended: the run stopped at calls that wait for a person;
	// their approvals stay answerable, and a decision resumes the turn.
	StatusSuspended Status = "suspended"
	// StatusError: the run failed (Error says why).
	StatusError Status = "error"
)

// TurnEnded is how a turn ended.
type TurnEnded struct {
	Status Status `json:"status"`
	// Reason says why a turn was rejected, interrupted or suspended by
	// something else than the user (a timeout, a shutdown, a stop).
	Reason string `json:"reason,omitempty"`
	// Cause is the cause of the rejection that ended the turn (status
	// rejected).
	Cause agent.Cause `json:"cause,omitempty"`
	// Error is the run's error (status error).
	Error string `json:"error,omitempty"`
}

// WarnNotLogged is the code of the warning chunk that a Store's event log
// holds in place of an event that could not be encoded (a side payload
// holding a NaN, say): the subscribers of other processes see it, with the
// round, depth and parent of the chunk it replaces, where they would have
// seen that chunk, and the turn goes on. Its Text says why. The process
// that published the chunk gave it to its own subscribers as it was.
const WarnNotLogged agent.WarningCode = "event_not_logged"

// notLogged returns the warning the log keeps in place of e, which could
// not be encoded for err.
func notLogged(e Event, err error) memory.Event {
	c := agent.Chunk{Kind: agent.KindWarning, Code: WarnNotLogged}
	what := "a " + string(e.Kind) + " event"
	if e.Chunk != nil {
		c.Round, c.Agent, c.Depth, c.Parent = e.Chunk.Round, e.Chunk.Agent, e.Chunk.Depth, e.Chunk.Parent
		what = "a " + e.Chunk.Kind.String() + " chunk"
		if e.Chunk.Tool != nil && e.Chunk.Tool.ID != "" {
			what += " of call " + e.Chunk.Tool.ID
		}
	}
	c.Text = fmt.Sprintf("%s could not be kept in the event log: %v", what, err)
	data, err := json.Marshal(&c)
	if err != nil { // not expected: its fields are strings and numbers
		data = []byte(`{"kind":"warning","round":0,"code":"` + string(WarnNotLogged) + `"}`)
	}
	return memory.Event{Seq: e.Seq, Turn: e.Turn, Kind: string(EventChunk), Data: data}
}

// stored returns e as the event log keeps it.
func (e Event) stored() (memory.Event, error) {
	var v any
	switch e.Kind {
	case EventTurnStarted:
		v = e.Started
	case EventChunk:
		v = e.Chunk
	case EventTurnEnded:
		v = e.Ended
	default:
		return memory.Event{}, fmt.Errorf("runner: event kind %q is not logged", e.Kind)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return memory.Event{}, fmt.Errorf("runner: encoding a %s event: %w", e.Kind, err)
	}
	return memory.Event{Seq: e.Seq, Turn: e.Turn, Kind: string(e.Kind), Data: data}, nil
}

// loaded returns the event a log kept.
func loaded(m memory.Event) (Event, error) {
	e := Event{Seq: m.Seq, Turn: m.Turn, Kind: EventKind(m.Kind)}
	var err error
	switch e.Kind {
	case EventTurnStarted:
		e.Started = new(TurnStarted)
		err = json.Unmarshal(m.Data, e.Started)
	case EventChunk:
		e.Chunk = new(agent.Chunk)
		err = json.Unmarshal(m.Data, e.Chunk)
	case EventTurnEnded:
		e.Ended = new(TurnEnded)
		err = json.Unmarshal(m.Data, e.Ended)
	default:
		err = fmt.Errorf("unknown kind %q", m.Kind)
	}
	if err != nil {
		return Event{}, fmt.Errorf("runner: event %d of the log: %w", m.Seq, err)
	}
	return e, nil
}
