// Package notehub hands the notes of a memory.Notifier to the listeners of
// one process. The SQL stores share it: memory/sqlitestore delivers its
// notes with it alone, memory/pgstore delivers through it what its LISTEN
// connection receives.
//
// Each listener has its own goroutine and queue, so a slow listener delays
// no one else and Deliver never waits for a listener. A queue holds at most
// MaxQueue notes: when it is full, its notes are dropped and replaced with
// one empty payload, which tells the listener that notes were lost (the
// memory.Notifier contract), so memory stays bounded.
package notehub

import (
	"errors"
	"sync"
)

// MaxQueue is the number of notes a listener's queue holds before they are
// dropped for an empty payload.
const MaxQueue = 1024

// ErrClosed is returned by [Hub.Add] after [Hub.Close].
var ErrClosed = errors.New("notes closed")

// Hub holds the listeners of one store, by key (a channel name). Its zero
// value is ready to use. It is safe for concurrent use.
type Hub struct {
	mu        sync.Mutex
	listeners map[string][]*listener // by key; guarded by mu
	closed    bool                   // guarded by mu
}

// listener is one Add: fn is called from run, one note at a time.
type listener struct {
	hub  *Hub
	key  string
	fn   func(payload string)
	once sync.Once

	mu    sync.Mutex
	queue []string // notes not delivered yet; guarded by mu

	wake    chan struct{} // a token when queue was empty and got a note
	stopped chan struct{} // closed by stop
	done    chan struct{} // closed when run returns
}

// Add registers fn for key and starts its goroutine. stop unregisters it
// and waits for the goroutine to end: once stop has returned, fn is not
// called again. stop may be called more than once, but not from fn (it
// would wait for itself).
func (h *Hub) Add(key string, fn func(payload string)) (stop func(), err error) {
	l := &listener{hub: h, key: key, fn: fn,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if h.listeners == nil {
		h.listeners = make(map[string][]*listener)
	}
	h.listeners[key] = append(h.listeners[key], l)
	h.mu.Unlock()
	go l.run()
	return l.stop, nil
}

// Keys returns the keys that have at least one listener.
func (h *Hub) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.listeners))
	for k := range h.listeners {
		out = append(out, k)
	}
	return out
}

// Has reports whether key has at least one listener.
func (h *Hub) Has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.listeners[key]) > 0
}

// Deliver queues payload for every listener of key. After [Hub.Close] it
// returns ErrClosed.
func (h *Hub) Deliver(key, payload string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	for _, l := range h.listeners[key] {
		l.push(payload)
	}
	return nil
}

// DeliverAll queues payload for every listener of every key.
func (h *Hub) DeliverAll(payload string) {
	h.mu.Lock()
	for _, ls := range h.listeners {
		for _, l := range ls {
			l.push(payload)
		}
	}
	h.mu.Unlock()
}

// Close stops every listener, waiting for their goroutines to end; Add
// fails afterwards.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	var all []*listener
	for _, ls := range h.listeners {
		all = append(all, ls...)
	}
	h.mu.Unlock()
	for _, l := range all {
		l.stop()
	}
}

// push queues payload; when the queue is full, it drops the queue for an
// empty payload.
func (l *listener) push(payload string) {
	l.mu.Lock()
	switch {
	case len(l.queue) >= MaxQueue:
		l.queue = []string{""}
	case len(l.queue) == 1 && l.queue[0] == "" && payload == "":
		// Already told that notes were lost.
	default:
		l.queue = append(l.queue, payload)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *listener) run() {
	defer close(l.done)
	for {
		select {
		case <-l.stopped:
			return
		case <-l.wake:
		}
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, p := range q {
			select {
			case <-l.stopped:
				return
			default:
			}
			l.fn(p)
		}
	}
}

func (l *listener) stop() {
	l.once.Do(func() {
		h := l.hub
		h.mu.Lock()
		ls := h.listeners[l.key]
		for i, x := range ls {
			if x == l {
				ls = append(ls[:i:i], ls[i+1:]...)
				break
			}
		}
		if len(ls) == 0 {
			delete(h.listeners, l.key)
		} else {
			h.listeners[l.key] = ls
		}
		h.mu.Unlock()
		close(l.stopped)
	})
	<-l.done
}
