package mcpclient

// This file is a stand-in for the per-conversation sandbox registry, which
// is built on its own branch behind the same functions; it is deleted when
// that branch is merged. It starts an instance lazily per conversation and
// keeps it until closeConversation or close, without bound or eviction.

import (
	"context"
	"errors"
	"sync"
	"time"
)

type sandboxes struct {
	start starter

	mu     sync.Mutex
	byID   map[string]*standinEntry
	closed bool
}

type standinEntry struct {
	ready chan struct{}
	inst  instance
	err   error
}

func newSandboxes(start starter, max int, idle time.Duration) *sandboxes {
	return &sandboxes{start: start, byID: make(map[string]*standinEntry)}
}

func (s *sandboxes) get(ctx context.Context, conversation string) (instance, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("sandboxes closed")
	}
	en, ok := s.byID[conversation]
	if !ok {
		en = &standinEntry{ready: make(chan struct{})}
		s.byID[conversation] = en
		s.mu.Unlock()
		en.inst, en.err = s.start(ctx)
		close(en.ready)
		if en.err != nil {
			s.mu.Lock()
			if s.byID[conversation] == en {
				delete(s.byID, conversation)
			}
			s.mu.Unlock()
			return nil, nil, en.err
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			en.inst.close()
			return nil, nil, errors.New("sandboxes closed")
		}
		return en.inst, func() {}, nil
	}
	s.mu.Unlock()
	select {
	case <-en.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if en.err != nil {
		return nil, nil, en.err
	}
	return en.inst, func() {}, nil
}

func (s *sandboxes) closeConversation(id string) error {
	s.mu.Lock()
	en, ok := s.byID[id]
	delete(s.byID, id)
	s.mu.Unlock()
	if ok {
		<-en.ready
		if en.inst != nil {
			return en.inst.close()
		}
	}
	return nil
}

func (s *sandboxes) close() error {
	s.mu.Lock()
	s.closed = true
	all := s.byID
	s.byID = map[string]*standinEntry{}
	s.mu.Unlock()
	var errs []error
	for _, en := range all {
		<-en.ready
		if en.inst != nil {
			errs = append(errs, en.inst.close())
		}
	}
	return errors.Join(errs...)
}

type sandboxStats struct {
	Live int // running instances
}

func (s *sandboxes) stats() sandboxStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, en := range s.byID {
		select {
		case <-en.ready:
			if en.inst != nil {
				n++
			}
		default:
		}
	}
	return sandboxStats{Live: n}
}
