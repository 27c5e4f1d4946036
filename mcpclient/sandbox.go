package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The sandbox registry keeps the instances of one per-conversation server,
// one instance per conversation.
//
// A conversation's instance starts on its first call and is cached for the
// calls that follow. Instances end in four ways: least-recently-used eviction
// when a new conversation needs room under the bound, idle eviction after the
// idle time without a call, closeConversation, and close. Each ends with one
// call of the instance's close, made without the registry's lock held, since
// ending a stdio server may take seconds.
//
// The bound is a hard limit on running instances, not a target: an instance
// counts from the moment its start begins until its close has returned, so
// the processes of a stdio server never outnumber it. An instance with a call
// in flight is never evicted by the bound or the idle timer. When every
// instance is busy, a new conversation's start waits for a slot (in arrival
// order, so no conversation starves) instead of going over the bound: a
// burst of conversations costs latency, never memory. The wait honours the
// caller's context, so a call timeout still ends it. A consequence for
// callers: a goroutine must not hold one conversation's instance while it
// waits for another's, or with every slot held that way it waits until its
// context ends.
//
// Under that contention, a conversation whose call ends loses its instance
// to the first waiting start at once: with every other instance busy, it is
// the least recently used idle one.
//
// closeConversation and close end an instance even with a call in flight
// (the conversation, or the whole client, is going away); the instance's
// close is expected to make that call return an error.

// The errors of the registry reach users wrapped with the server's name
// (serverEntry.wrap), so they carry no prefix of their own.

// errNoConversation is returned by get for an empty conversation id: the
// calls of all conversations without an id must not share one sandbox.
var errNoConversation = errors.New("a per-conversation server needs the call's conversation id, and it has none")

// errSandboxesClosed is returned by get once close has been called.
var errSandboxesClosed = errors.New("the per-conversation servers are shut down")

// errConversationClosed is returned to the calls that waited for a start
// that closeConversation cancelled.
var errConversationClosed = errors.New("the conversation's server was closed while it started")

// sandboxes is the registry of one per-conversation server's instances,
// keyed by conversation id. Its methods are safe for concurrent use.
type sandboxes struct {
	start starter
	max   int           // running instances at most; < 1: no bound
	idle  time.Duration // time without a call before an instance ends; <= 0: never

	// wg counts the start goroutines, the eviction goroutines and the closes
	// running in closeConversation; close waits for them.
	wg   sync.WaitGroup
	done chan struct{} // closed when close has ended everything

	mu sync.Mutex
	// Guarded by mu:
	//   - byConv holds each conversation's entry while it is starting (inst
	//     nil, ready open) or running (inst set). One entry per conversation,
	//     so concurrent first calls share one start; a failed start removes
	//     its entry, so the next get retries.
	//   - lru links the running entries; those with no call in flight
	//     (inflight == 0) are in the order their last call ended, least
	//     recent first. Only those are evicted by the bound or the timer.
	//   - used counts the slots held: starts past their wait for a slot,
	//     running entries, and ended instances whose close has not returned
	//     (closing of them). used <= max whenever max >= 1.
	//   - waiters queues the starts waiting for a slot, first come first
	//     served. A freed slot goes to the head of the queue before used is
	//     decremented, so len(waiters) > 0 implies used == max, and a late
	//     arrival never overtakes a waiting start.
	//   - closing < len(waiters) means the waiting starts need more room than
	//     the closes under way will free: an idle entry is evicted at once
	//     (evictForWaitersLocked), whenever one exists.
	//   - closed is set once, by close. Afterwards nothing is added to wg or
	//     byConv and no timer is armed.
	//   - Each instance is closed exactly once, with mu unlocked: by whoever
	//     removes its running entry from byConv (endLocked, which sets gone),
	//     or by its start when the conversation or the registry was closed
	//     before the start ended. That is why eviction never blocks a get for
	//     another conversation.
	byConv  map[string]*sandbox
	lru     sandbox // sentinel of the ring of running entries
	used    int
	closing int
	waiters []*slotWaiter
	closed  bool
	timer   *time.Timer // the idle sweep; nil until first armed
	timerAt time.Time   // when timer fires; zero when not armed
	counts  sandboxStats
}

// sandbox is one conversation's entry.
type sandbox struct {
	conv  string
	ready chan struct{} // closed when the start has ended (inst or err set)

	// Guarded by sandboxes.mu:
	cancel    context.CancelFunc // cancels the start; nil once it ended
	inst      instance           // nil while starting
	err       error              // why the start failed
	waiters   int                // gets waiting for the start
	inflight  int                // calls between get and release
	lastUsed  time.Time          // when the last call ended (or the start, if none)
	abandoned bool               // every waiter left, the start is cancelled
	dropped   bool               // closeConversation cancelled the start
	gone      bool               // ended: no longer in byConv
	prev      *sandbox           // lru ring
	next      *sandbox
}

// slotWaiter is a start waiting for a slot under the bound.
type slotWaiter struct {
	ch      chan struct{} // closed when granted
	granted bool          // guarded by sandboxes.mu
}

// sandboxStats is what the registry reports about itself.
type sandboxStats struct {
	Live          int    // running instances, with a call in flight or not
	Busy          int    // running instances with a call in flight
	Starting      int    // starts in flight, waiting for a slot or starting
	Starts        uint64 // starts that succeeded
	StartFailures uint64 // starts that failed, not counting those every caller left
	Evictions     uint64 // instances ended to make room under the bound
	IdleEvictions uint64 // instances ended after the idle time
	CloseError    error  // the last error an instance's close returned
}

// newSandboxes returns a registry starting instances with start, holding
// at most max running instances (no bound when max < 1) and ending an
// instance after idle without a call (never when idle <= 0). The caller must
// call close.
//
// start is called without the registry's lock, once at a time per
// conversation (a start cancelled by closeConversation may still be ending
// when the conversation's next one begins). Its context carries the values
// of the first get's context; it is cancelled when every get waiting for the
// start has left, when the conversation or the registry is closed, and in
// any case once start has returned. It bounds the start, not the instance's
// life: an instance must not tie its process to it (as exec.CommandContext
// would).
func newSandboxes(start starter, max int, idle time.Duration) *sandboxes {
	s := &sandboxes{
		start:  start,
		max:    max,
		idle:   idle,
		done:   make(chan struct{}),
		byConv: make(map[string]*sandbox),
	}
	s.lru.next, s.lru.prev = &s.lru, &s.lru
	return s
}

// get returns the conversation's instance, starting it if it is not running.
// The caller must call release exactly when its call on the instance has
// ended (more calls of release do nothing); until then the instance is not
// evicted by the bound or the idle timer.
//
// Concurrent gets for a conversation share one start. A get waiting for it
// returns when ctx ends; the start itself is cancelled only when every get
// waiting for it has left, and an instance that still comes out of it is
// cached like any other. A failed start is not cached: the next get starts
// again. get returns errSandboxesClosed after close, and errNoConversation
// for an empty conversation id.
func (s *sandboxes) get(ctx context.Context, conversation string) (inst instance, release func(), err error) {
	if conversation == "" {
		return nil, nil, errNoConversation
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, nil, errSandboxesClosed
		}
		e := s.byConv[conversation]
		switch {
		case e == nil:
			e = s.startLocked(ctx, conversation)
		case e.inst != nil:
			e.inflight++
			s.mu.Unlock()
			return e.inst, s.releaser(e), nil
		default:
			e.waiters++
		}
		s.mu.Unlock()

		inst, release, err, retry := s.wait(ctx, e)
		if !retry {
			return inst, release, err
		}
	}
}

// startLocked adds an entry for conversation, with the caller as its first
// waiter, and starts it in a goroutine of its own, so that the caller can
// leave when its ctx ends while others still wait for the start. The start's
// context keeps ctx's values but not its cancellation.
func (s *sandboxes) startLocked(ctx context.Context, conversation string) *sandbox {
	e := &sandbox{conv: conversation, ready: make(chan struct{}), waiters: 1}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	s.byConv[conversation] = e
	s.wg.Add(1)
	go s.run(sctx, e)
	return e
}

// wait waits for e's start on behalf of a get counted in e.waiters. retry
// says the start was abandoned before this get joined it: the get starts
// again.
func (s *sandboxes) wait(ctx context.Context, e *sandbox) (inst instance, release func(), err error, retry bool) {
	select {
	case <-e.ready:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-e.ready:
	default:
		// ctx ended before the start did.
		e.waiters--
		if e.waiters == 0 {
			e.abandoned = true
			e.cancel()
		}
		// The cause says why (a call timeout, say), where ctx.Err() would
		// only say that a deadline passed.
		return nil, nil, fmt.Errorf("waiting for the conversation's server to start: %w", context.Cause(ctx)), false
	}
	switch {
	case e.err == nil && e.gone:
		// The start counted this get in inflight, but the instance was
		// closed (closeConversation or close) before it woke up.
		e.inflight--
		if s.closed {
			return nil, nil, errSandboxesClosed, false
		}
		return nil, nil, errConversationClosed, false
	case e.err == nil:
		return e.inst, s.releaser(e), nil, false
	case e.abandoned && !e.dropped && !s.closed && ctx.Err() == nil:
		return nil, nil, nil, true
	default:
		return nil, nil, e.err, false
	}
}

// run is e's start: it waits for a slot, starts the instance and publishes
// the result. An instance nobody may use any more (the registry or the
// conversation was closed meanwhile) is closed here.
func (s *sandboxes) run(ctx context.Context, e *sandbox) {
	defer s.wg.Done()
	var inst instance
	slot, err := s.acquire(ctx)
	if err == nil {
		inst, err = s.start(ctx)
		if err == nil && inst == nil {
			err = errors.New("the server's start returned no instance")
		}
	}

	s.mu.Lock()
	e.cancel() // frees the context; nil-ed only when ready closes, as wait may still call it
	if err == nil && !s.closed && !e.dropped {
		e.inst = inst
		e.inflight, e.waiters = e.waiters, 0
		e.lastUsed = time.Now()
		s.pushLocked(e)
		s.counts.Starts++
		if e.inflight == 0 {
			s.idleLocked(e)
		}
		e.cancel = nil
		close(e.ready)
		s.mu.Unlock()
		return
	}

	if s.byConv[e.conv] == e {
		delete(s.byConv, e.conv)
	}
	e.gone = true
	switch {
	case s.closed:
		e.err = errSandboxesClosed
	case e.dropped:
		e.err = errConversationClosed
	default:
		e.err = err
		if !e.abandoned {
			s.counts.StartFailures++
		}
	}
	if inst != nil {
		// Started, but unwanted (or the starter returned an error with it).
		s.closing++
		s.mu.Unlock()
		_ = s.closeInstance(inst)
		s.mu.Lock()
	} else if slot {
		s.freeSlotLocked()
	}
	e.cancel = nil
	close(e.ready)
	s.mu.Unlock()
}

// acquire takes a slot for a start, waiting in arrival order while the
// bound is reached, and evicting idle instances to make room. slot says
// whether the caller holds a slot it must give back.
func (s *sandboxes) acquire(ctx context.Context) (slot bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, errSandboxesClosed
	}
	if s.max < 1 || s.used < s.max {
		s.used++
		s.mu.Unlock()
		return true, nil
	}
	w := &slotWaiter{ch: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.evictForWaitersLocked()
	s.mu.Unlock()

	select {
	case <-w.ch:
		return true, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		// Granted as ctx ended: pass the slot on.
		s.freeSlotLocked()
	} else {
		for i, x := range s.waiters {
			if x == w {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
	return false, ctx.Err()
}

// freeSlotLocked gives a slot back: to the first waiting start if there is
// one, else to the pool.
func (s *sandboxes) freeSlotLocked() {
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		w.granted = true
		close(w.ch)
		return
	}
	s.used--
}

// evictForWaitersLocked evicts idle instances, least recently used first,
// until the closes under way will free a slot for every waiting start.
func (s *sandboxes) evictForWaitersLocked() {
	for s.closing < len(s.waiters) {
		var victim *sandbox
		for e := s.lru.next; e != &s.lru; e = e.next {
			if e.inflight == 0 {
				victim = e
				break
			}
		}
		if victim == nil {
			return
		}
		s.counts.Evictions++
		s.evictLocked(victim)
	}
}

// releaser returns the release function of one call on e.
func (s *sandboxes) releaser(e *sandbox) func() {
	var done atomic.Bool
	return func() {
		if !done.Swap(true) {
			s.release(e)
		}
	}
}

// release ends one call on e. When it was the last, e becomes the most
// recently used idle entry: a start waiting for room takes its slot, or the
// idle timer watches it.
func (s *sandboxes) release(e *sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.inflight--
	if e.inflight > 0 || e.gone || s.closed {
		return
	}
	e.lastUsed = time.Now()
	s.removeLocked(e)
	s.pushLocked(e)
	s.idleLocked(e)
}

// idleLocked is called when running entry e has no call in flight any more.
func (s *sandboxes) idleLocked(e *sandbox) {
	s.evictForWaitersLocked()
	if !e.gone {
		s.armLocked(e.lastUsed.Add(s.idle))
	}
}

// armLocked makes the idle sweep run at the latest at at.
func (s *sandboxes) armLocked(at time.Time) {
	if s.idle <= 0 || s.closed {
		return
	}
	if !s.timerAt.IsZero() && !at.Before(s.timerAt) {
		return
	}
	s.timerAt = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.sweep)
	} else {
		s.timer.Reset(time.Until(at))
	}
}

// sweep evicts the idle entries whose time is up and arms the timer for the
// next one. It may run early or twice (a Reset racing a firing timer); it
// only acts on what it finds.
func (s *sandboxes) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timerAt = time.Time{}
	if s.closed {
		return
	}
	now := time.Now()
	for e := s.lru.next; e != &s.lru; {
		next := e.next
		if e.inflight == 0 {
			at := e.lastUsed.Add(s.idle)
			if at.After(now) {
				// Idle entries are in lastUsed order: the rest are younger.
				s.armLocked(at)
				return
			}
			s.counts.IdleEvictions++
			s.evictLocked(e)
		}
		e = next
	}
}

// endLocked removes running entry e and returns its instance, which the
// caller must close with closeInstance once mu is unlocked.
func (s *sandboxes) endLocked(e *sandbox) instance {
	delete(s.byConv, e.conv)
	s.removeLocked(e)
	e.gone = true
	s.closing++
	return e.inst
}

// evictLocked ends running entry e and closes its instance in a goroutine,
// so that neither the caller nor the lock waits for it.
func (s *sandboxes) evictLocked(e *sandbox) {
	inst := s.endLocked(e)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.closeInstance(inst)
	}()
}

// closeInstance closes an instance counted in closing, then frees its slot.
// mu must not be held.
func (s *sandboxes) closeInstance(inst instance) error {
	err := inst.close()
	s.mu.Lock()
	s.closing--
	s.freeSlotLocked()
	if err != nil {
		s.counts.CloseError = err
	}
	s.mu.Unlock()
	return err
}

// closeConversation ends the conversation's instance, or cancels its start,
// and returns once the instance is closed, with the error of its close (nil
// when it was still starting: stats keeps that one). A call in flight on the
// instance fails, and so do the gets waiting for its start. A later get
// starts a new instance.
func (s *sandboxes) closeConversation(conversation string) error {
	s.mu.Lock()
	e := s.byConv[conversation]
	if s.closed || e == nil {
		s.mu.Unlock()
		return nil
	}
	if e.inst == nil {
		// Starting: the start closes what it gets, then closes ready.
		delete(s.byConv, conversation)
		e.dropped = true
		e.cancel()
		s.mu.Unlock()
		<-e.ready
		return nil
	}
	inst := s.endLocked(e)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	return s.closeInstance(inst)
}

// discard ends the conversation's instance if it is still inst, and
// returns once it is closed, with the error of its close. A caller that
// found inst broken ends it this way rather than with closeConversation:
// when the conversation got a newer instance meanwhile (another call saw the
// loss first, or the conversation was closed and started again), inst was
// closed when it was replaced, and the newer one must keep running.
func (s *sandboxes) discard(conversation string, inst instance) error {
	s.mu.Lock()
	e := s.byConv[conversation]
	if s.closed || e == nil || e.inst == nil || e.inst != inst {
		s.mu.Unlock()
		return nil
	}
	s.endLocked(e)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	return s.closeInstance(inst)
}

// close ends every instance (calls in flight fail), cancels the starts in
// flight and returns when all are closed, with the errors of the closes it
// made; a start that does not honour its context delays it. Later gets
// return errSandboxesClosed. close may be called more than once; later calls
// wait for the first and return nil.
func (s *sandboxes) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	var insts []instance
	for _, e := range s.byConv {
		if e.inst == nil {
			e.cancel()
			continue
		}
		insts = append(insts, s.endLocked(e))
	}
	s.mu.Unlock()

	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for i, inst := range insts {
		wg.Go(func() { errs[i] = s.closeInstance(inst) })
	}
	wg.Wait()
	s.wg.Wait()
	close(s.done)
	return errors.Join(errs...)
}

// stats reports the registry's counts.
func (s *sandboxes) stats() sandboxStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.counts
	for _, e := range s.byConv {
		switch {
		case e.inst == nil:
			st.Starting++
		case e.inflight > 0:
			st.Live++
			st.Busy++
		default:
			st.Live++
		}
	}
	return st
}

// pushLocked links e as the most recently used entry.
func (s *sandboxes) pushLocked(e *sandbox) {
	e.prev, e.next = s.lru.prev, &s.lru
	e.prev.next, s.lru.prev = e, e
}

// removeLocked unlinks e from the lru ring, if linked.
func (s *sandboxes) removeLocked(e *sandbox) {
	if e.next == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}
