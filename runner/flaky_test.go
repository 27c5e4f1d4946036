package runner_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/planround/planround/memory"
)

// flakyStore is a MemStore whose event log and leases fail on demand: a
// store that blips.
type flakyStore struct {
	*memory.MemStore

	mu sync.Mutex
	// appends is how many of the next AppendEvents fail; committed makes
	// them write the events before they fail (a connection lost at
	// commit).
	appends   int
	committed bool
	// leases is how many of the next AcquireLease fail (-1: all, until
	// failLeases is called again); leaseFailed counts the failures.
	// failedAll is closed once the last of them failed (the first, with
	// -1), renewed at the first AcquireLease that succeeds after them.
	leases        int
	leaseFailed   int
	failedAll     chan struct{}
	renewed       chan struct{}
	closedFailed  bool
	closedRenewed bool
}

var errBlip = errors.New("flaky store: connection lost")

// failAppends makes the next n AppendEvents calls fail, after writing
// their events when committed.
func (s *flakyStore) failAppends(n int, committed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appends, s.committed = n, committed
}

// failLeases makes the next n AcquireLease calls fail (-1: all of them
// until it is called again). It returns the channels closed once they
// failed, and at the first AcquireLease that succeeds after them.
func (s *flakyStore) failLeases(n int) (failed, renewed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases, s.leaseFailed = n, 0
	s.failedAll, s.renewed = make(chan struct{}), make(chan struct{})
	s.closedFailed, s.closedRenewed = false, false
	return s.failedAll, s.renewed
}

func (s *flakyStore) AppendEvents(ctx context.Context, sessionID string, evs ...memory.Event) error {
	s.mu.Lock()
	fail, committed := s.appends > 0, s.committed
	if fail {
		s.appends--
	}
	s.mu.Unlock()
	if !fail {
		return s.MemStore.AppendEvents(ctx, sessionID, evs...)
	}
	if committed {
		if err := s.MemStore.AppendEvents(ctx, sessionID, evs...); err != nil {
			return err
		}
	}
	return errBlip
}

func (s *flakyStore) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases != 0 {
		s.leaseFailed++
		if s.leases > 0 {
			s.leases--
		}
		if s.leases <= 0 && !s.closedFailed {
			close(s.failedAll)
			s.closedFailed = true
		}
		return false, errBlip
	}
	ok, err := s.MemStore.AcquireLease(ctx, sessionID, holder, ttl)
	if ok && err == nil && s.leaseFailed > 0 && !s.closedRenewed {
		close(s.renewed)
		s.closedRenewed = true
	}
	return ok, err
}
