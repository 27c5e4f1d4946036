package runner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// Defaults of [Config].
const (
	// DefaultLeaseTTL is how long a session's lease lasts unrenewed: how
	// long the sessions of a process that died stay locked.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultSweepInterval is how often the sweeper looks for turns to
	// resume.
	DefaultSweepInterval = 3 * time.Second
)

// Errors of a Runner.
var (
	// ErrClosed is returned (wrapped) by a Runner that is closing or
	// closed.
	ErrClosed = errors.New("runner: closed")
	// ErrTooManyRuns is returned (wrapped) when the Runner drives
	// Config.MaxRuns runs already.
	ErrTooManyRuns = errors.New("runner: too many runs")
	// ErrEventsLost ends a subscription whose cursor is older than what
	// the log keeps, or from another log: the client loads the history
	// again and subscribes from its end.
	ErrEventsLost = errors.New("runner: the events after the cursor are no longer kept")
)

// The reasons a TurnEnded gives for what the Runner did.
const (
	// ReasonShutdown: the Runner closed while the turn ran.
	ReasonShutdown = "the process is shutting down"
	// ReasonProcessStopped: the process that ran the turn stopped without
	// ending it (a crash, a kill); another process ended it.
	ReasonProcessStopped = "the process that ran the turn stopped"
	// ReasonSessionLost: the process lost the session's lease to another
	// one while the turn ran.
	ReasonSessionLost = "this process lost the session to another"
	// ReasonLeaseUnrenewed: the Store failed every renewal of the
	// session's lease until it would have expired (no other process was
	// seen to hold it): the turn stopped before another process could
	// take the session.
	ReasonLeaseUnrenewed = "this process could not renew the session's lease: the store failed"
)

// Causes of a run's cancellation, told apart with context.Cause.
var (
	errInterrupted = errors.New("interrupted")
	errShutdown    = errors.New(ReasonShutdown)
	errLeaseLost   = fmt.Errorf("%w: the session's lease was lost", agent.ErrSuspended)
	// errLeaseUnrenewed is what unrenewed wraps.
	errLeaseUnrenewed = errors.New("runner: the session's lease could not be renewed")
	errSuspendNow     = fmt.Errorf("%w: %s", agent.ErrSuspended, ReasonShutdown)
)

// unrenewed is the cause of a run whose lease the Store failed to renew
// until it would have expired: it wraps errLeaseUnrenewed, the Store's
// last error, and agent.ErrSuspended (a run that waits for a person
// suspends).
type unrenewed struct{ err error }

func (e unrenewed) Error() string   { return errLeaseUnrenewed.Error() + ": " + e.err.Error() }
func (e unrenewed) Unwrap() []error { return []error{errLeaseUnrenewed, e.err, agent.ErrSuspended} }

// Config configures a [Runner]. Store is required; the zero value of every
// other field is ready to use.
type Config struct {
	// Store keeps the sessions, their approvals, forms and events: the one
	// store of the Runner, which sets it as the agent's Config.Store and
	// keeps the approvals and forms of the person in the loop there. The
	// durable interfaces it implements decide what the Runner can do:
	// memory.CallLog and memory.ApprovalStore keep turns that wait across
	// restarts (the sweeper resumes them); memory.Leaser gives each session
	// one driver among the processes that share the Store; memory.EventLog
	// keeps the turns' events for the subscribers of other processes
	// (without one, events live in this process only); memory.Notifier
	// wakes the other processes (a decision, an answer, an interrupt, new
	// events). A Store that is no memory.ApprovalStore keeps its approvals
	// and forms in this process only. The Runner does not close it.
	Store memory.Store
	// Agent configures the agent that runs the turns. The Runner sets its
	// Store (Config.Store) and its Approver: the Runner's own, which asks
	// the person through the Runner ([Runner.Pending], [Runner.Decide])
	// after Policies. An Agent config that sets Store or Approver itself is
	// refused.
	Agent agent.Config
	// Policies decide a call without asking anybody, in order, before the
	// person is asked: approval.ReadOnlyHints, approval.AllowTools, an
	// AllowList's Policy... Their decisions are recorded for the audit
	// ([Runner.Decisions]); a policy's approval of a call that must ask
	// (agent.ToolCall.MustAsk) counts as abstaining, and a decision a
	// person took on the call before (a resumed turn) stands.
	Policies []approval.Policy
	// ApprovalTimeout is how long an approval waits for a decision, counted
	// from its creation: then the call is rejected (agent.CauseTimeout).
	// Zero means approval.DefaultTimeout.
	ApprovalTimeout time.Duration
	// FormTimeout is how long a form (ask_user_question, an MCP server's
	// request for input) waits for its answers: then the call fails with
	// an error the model reads. Zero means interact.DefaultTimeout.
	FormTimeout time.Duration
	// SuspendAfter, when positive, is how long a call waits for a person
	// (an approval, a form) before its run is suspended: the approval or
	// form stays open in the Store, and a decision or answer, given in any
	// process, resumes the turn. It needs a Store that keeps calls
	// (memory.CallLog). Zero means never: the run waits until the timeout.
	SuspendAfter time.Duration
	// Holder names this process to the Store's leases: unique among the
	// processes that share the Store. Empty means a random name, new at
	// every New.
	Holder string
	// LeaseTTL is how long a lease lasts unrenewed (DefaultLeaseTTL when
	// zero); a driver renews it every LeaseTTL/3. A renewal the Store
	// fails is tried again while the lease lasts: only a lease another
	// process holds, or a Store that fails until the lease would have
	// expired, stops the run (ReasonSessionLost, ReasonLeaseUnrenewed).
	LeaseTTL time.Duration
	// SweepInterval is how often the sweeper looks for turns that can go on
	// (DefaultSweepInterval when zero; negative: no sweeper). The sweeper
	// runs only with a Store that keeps calls and approvals.
	SweepInterval time.Duration
	// MaxRuns bounds the runs the Runner drives at once (0: no bound):
	// beyond it Start and Resume fail with ErrTooManyRuns, and the sweeper
	// tries again later.
	MaxRuns int
	// TurnGrace is how long a turn's events stay in the log after the turn
	// ended (one minute when zero), for a client that loaded the history
	// just before the end.
	TurnGrace time.Duration
	// InterruptOnClose makes Close interrupt every run, also one that waits
	// for a person, instead of suspending it: for a Store that ends with
	// the process (a MemStore the host does not keep), where nothing would
	// resume it.
	InterruptOnClose bool
	// Logger receives what goes wrong outside a call (a sweep, a lease, an
	// event that could not be written); nil discards it.
	Logger *slog.Logger
	// OnEvent, when not nil, is called with every event this process
	// publishes, numbered, in the goroutine that drives the session's run,
	// before subscribers see it: a host keeps state of its own with it
	// (where a sub-agent's card is drawn, what a run waits for). It must not
	// block nor call the Runner; it is not called for the events of other
	// processes.
	OnEvent func(sessionID string, e Event)
}

// Runner drives the conversations of a process: one run at a time per
// session, among every process that shares the Store (see [Config.Store]),
// with at most one execution of each tool call, whatever stops a process.
//
// A Runner starts turns ([Runner.Start], [Runner.Send]) and resumes them
// ([Runner.Resume]; by itself, when a decision comes for a turn that no run
// waits for, or when its sweeper finds a turn that can go on); it publishes
// every turn's events, which clients follow from a cursor
// ([Runner.Subscribe]), on any process; it interrupts a run wherever it is
// driven ([Runner.Interrupt]); it is the door of the person in the loop:
// what a session waits for ([Runner.Pending]), the decisions and answers
// ([Runner.Decide], [Runner.Answer]), a stop ([Runner.Stop]) and the audit
// ([Runner.Decisions]); and [Runner.Close] suspends the runs that wait for
// a person, so that another process (or this one, restarted) resumes them
// on the decision. Its methods are safe for concurrent use.
type Runner struct {
	agent     *agent.Agent
	store     memory.Store
	approvals *person.Approvals    // the approvals of the person in the loop, on store
	forms     *person.Forms        // the forms, on store
	calls     memory.CallLog       // nil: turns do not survive the process
	pending   memory.ApprovalStore // nil: idem
	leaser    memory.Leaser        // nil: one driver per session in this process only
	notifier  memory.Notifier      // nil: other processes are not told
	elog      memory.EventLog      // nil: events in this process only
	holder    string
	ttl       time.Duration
	sweep     time.Duration
	grace     time.Duration
	maxRuns   int
	noSuspend bool
	logger    *slog.Logger
	onEvent   func(string, Event)
	writer    *writer // writes the events to elog; nil without one

	base     context.Context // parent of every run's context; ends with Close
	stopBase context.CancelCauseFunc
	stopped  chan struct{} // closed by Close: the sweeper and listeners end
	finished chan struct{} // closed by Close once the runs ended: subscriptions end
	stops    []func()      // the Notifier listeners' stop functions
	workers  sync.WaitGroup
	runs     sync.WaitGroup
	once     sync.Once

	mu       sync.Mutex
	sessions map[string]*session // sessions with a run or a subscriber here; mu guards it, closed, running and each session
	closed   bool
	running  int
}

// session is a session's live state in this process. Runner.mu guards it.
type session struct {
	id   string
	run  *driven            // the run this process drives; nil when none
	subs map[*follower]bool // open subscriptions
	log  memLog             // the recent events
	gone bool               // deleted: subscribers end
	// deleting is set while Delete removes the session from the Store, so
	// that a subscriber that finds the log gone meanwhile ends with
	// EventSessionDeleted rather than with ErrEventsLost.
	deleting bool
	// changed is closed, and cleared, at the session's next change
	// (wakeAll: its run cleared or its turn started, events); nil while
	// nobody waits for one.
	changed chan struct{}
}

// changedLocked returns a channel closed at the session's next change.
// Runner.mu must be held.
func (ss *session) changedLocked() <-chan struct{} {
	if ss.changed == nil {
		ss.changed = make(chan struct{})
	}
	return ss.changed
}

// New returns a Runner for cfg: it builds the approvals and forms of the
// person in the loop on cfg.Store, and the agent on cfg.Agent with that
// Store and an Approver that asks after cfg.Policies, and starts its
// sweeper and listeners. Close it when done.
func New(cfg Config) (*Runner, error) {
	st := cfg.Store
	switch {
	case st == nil:
		return nil, errors.New("runner: Config.Store is nil")
	case cfg.Agent.Store != nil:
		return nil, errors.New("runner: Config.Agent.Store is set: name the store once, in runner.Config.Store")
	case cfg.Agent.Approver != nil:
		return nil, errors.New("runner: Config.Agent.Approver is set: the runner asks the person itself; give policies that decide without a person in runner.Config.Policies")
	case cfg.LeaseTTL < 0 || cfg.MaxRuns < 0 || cfg.TurnGrace < 0:
		return nil, errors.New("runner: negative LeaseTTL, MaxRuns or TurnGrace")
	case cfg.ApprovalTimeout < 0 || cfg.FormTimeout < 0 || cfg.SuspendAfter < 0:
		return nil, errors.New("runner: negative ApprovalTimeout, FormTimeout or SuspendAfter")
	}
	ppl, err := newPerson(cfg)
	if err != nil {
		return nil, err
	}
	acfg := cfg.Agent
	acfg.Store = st
	acfg.Approver = ppl.approvals
	if len(cfg.Policies) > 0 {
		acfg.Approver = ppl.approvals.Approver(cfg.Policies...)
	}
	a, err := agent.New(acfg)
	if err != nil {
		ppl.close()
		return nil, err
	}
	base, stop := context.WithCancelCause(context.Background())
	r := &Runner{
		agent:     a,
		store:     st,
		approvals: ppl.approvals,
		forms:     ppl.forms,
		holder:    cmp.Or(cfg.Holder, "runner-"+randomID()),
		ttl:       cmp.Or(cfg.LeaseTTL, DefaultLeaseTTL),
		sweep:     cmp.Or(cfg.SweepInterval, DefaultSweepInterval),
		grace:     cmp.Or(cfg.TurnGrace, time.Minute),
		maxRuns:   cfg.MaxRuns,
		noSuspend: cfg.InterruptOnClose,
		logger:    cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		onEvent:   cfg.OnEvent,
		base:      base,
		stopBase:  stop,
		stopped:   make(chan struct{}),
		finished:  make(chan struct{}),
		sessions:  make(map[string]*session),
	}
	r.calls, _ = st.(memory.CallLog)
	r.pending, _ = st.(memory.ApprovalStore)
	r.leaser, _ = st.(memory.Leaser)
	r.notifier, _ = st.(memory.Notifier)
	r.elog, _ = st.(memory.EventLog)
	if r.calls == nil || r.pending == nil {
		r.sweep = -1
	}
	if r.elog != nil {
		r.writer = newWriter(r)
	}
	if err := r.listen(); err != nil {
		r.closeListeners()
		if r.writer != nil {
			r.writer.close()
		}
		stop(err)
		ppl.close()
		return nil, err
	}
	r.startSweeper()
	return r, nil
}

// Close stops the Runner: no run starts any more; a run that waits for a
// person is suspended (with a Store that keeps calls: its approvals stay
// answerable, and a decision resumes the turn on a process that shares the
// Store), every other run is interrupted; Close waits for them to end,
// their last events written, and their leases released. Subscriptions
// end. It closes the approvals and forms New built, not the Store, which
// the host opened. Close is safe to call more than once.
func (r *Runner) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		for _, ss := range r.sessions {
			if ss.run == nil {
				continue
			}
			if r.calls != nil && !r.noSuspend && ss.run.waiting() {
				ss.run.cancel(errSuspendNow)
			} else {
				ss.run.cancel(errShutdown)
			}
		}
		r.mu.Unlock()
		close(r.stopped)
		r.stopBase(errShutdown)
		r.runs.Wait()
		r.workers.Wait()
		r.closeListeners()
		if r.writer != nil {
			r.writer.close()
		}
		r.approvals.Close()
		r.forms.Close()
		close(r.finished)
	})
	return nil
}

// Holder returns the name of this process in the Store's leases.
func (r *Runner) Holder() string { return r.holder }

// Agent returns the agent New built from Config.Agent, which runs the
// turns; its Store (Config.Store) keeps the sessions, for a host that
// shows their history.
func (r *Runner) Agent() *agent.Agent { return r.agent }

// sessionLocked returns the live state of id, creating it. r.mu must be
// held.
func (r *Runner) sessionLocked(id string) *session {
	ss := r.sessions[id]
	if ss == nil {
		ss = &session{id: id, subs: make(map[*follower]bool)}
		r.sessions[id] = ss
	}
	return ss
}

// forgetLocked drops a session's live state once nothing uses it and its
// events need not be kept. r.mu must be held.
func (r *Runner) forgetLocked(ss *session) {
	if ss.run == nil && len(ss.subs) == 0 && ss.log.empty() && r.sessions[ss.id] == ss {
		delete(r.sessions, ss.id)
	}
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
