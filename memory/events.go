package memory

import (
	"context"
	"errors"
	"time"
)

// TEMPORARY: replaced by the eventlog branch at merge.

type Event struct {
	Seq       int64     `json:"seq"`
	Turn      int64     `json:"turn,omitempty"`
	Kind      string    `json:"kind"`
	Data      []byte    `json:"data,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

var ErrEventSeq = errors.New("memory: event out of sequence")

type EventLog interface {
	AppendEvents(ctx context.Context, sessionID string, evs ...Event) error
	Events(ctx context.Context, sessionID string, after int64, limit int) (evs []Event, last int64, err error)
	LastEvent(ctx context.Context, sessionID string) (int64, error)
	TrimEvents(ctx context.Context, sessionID string, through int64) error
}
