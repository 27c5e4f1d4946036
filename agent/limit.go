package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A RequestLimit bounds how many model requests are in flight at once
// among the Agents whose Config shares it, so that a wave of runs (a
// sweeper resuming suspended turns, many approvals answered within a
// second) queues instead of sending every request at once. A request holds
// its slot from before it is sent until its response has been read (its
// stream, for a round); one that waits for a slot waits within its run's
// context, so an interrupted run leaves the queue at once. Requests are
// let through in the order they came.
//
// One Agent, the Agents of one process, or the Agents behind one runner
// can share a limit. A sub-agent's requests count where its own Config
// says: give it the same limit to count them with the caller's.
//
// The metrics planround.model.queue.length (requests waiting) and
// planround.model.queue.wait (how long each request under a limit
// waited) tell whether the bound is too low.
//
// All methods are safe for concurrent use.
type RequestLimit struct {
	slots   chan struct{}
	waiting atomic.Int64
}

// NewRequestLimit returns a limit of n requests in flight at once; n must
// be positive.
func NewRequestLimit(n int) (*RequestLimit, error) {
	if n <= 0 {
		return nil, errors.New("agent: a request limit must be positive")
	}
	return &RequestLimit{slots: make(chan struct{}, n)}, nil
}

// InFlight returns the number of requests holding a slot.
func (l *RequestLimit) InFlight() int { return len(l.slots) }

// Waiting returns the number of requests waiting for a slot.
func (l *RequestLimit) Waiting() int { return int(l.waiting.Load()) }

// acquire takes a slot for a request of a run observed by tel, waiting
// while all are held, or returns ctx's error. A nil limit has no bound.
func (l *RequestLimit) acquire(ctx context.Context, tel *telemetry) error {
	if l == nil {
		return nil
	}
	select {
	case l.slots <- struct{}{}:
		tel.queued(ctx, 0)
		return nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	l.waiting.Add(1)
	tel.queueLength(ctx, 1)
	var err error
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	l.waiting.Add(-1)
	tel.queueLength(ctx, -1)
	tel.queued(ctx, time.Since(start))
	return err
}

// release gives back the slot acquire took. A nil limit has none.
func (l *RequestLimit) release() {
	if l != nil {
		<-l.slots
	}
}
