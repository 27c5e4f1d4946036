package interact

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/agent"
)

// DefaultTimeout is how long an ask_user_question call waits for the
// answers when [FormsConfig.Timeout] is zero.
const DefaultTimeout = 10 * time.Minute

// Errors of [Forms.Answer] and of the waits of ask_user_question.
var (
	// ErrWrongSession is returned by Answer for a form id that belongs to
	// another session. The form stays open.
	ErrWrongSession = errors.New("interact: form id belongs to another session")
	// ErrNoSession is wrapped by the error of an ask_user_question call of
	// a run without a session id: forms are answered per session, so a
	// form nobody can answer is not shown.
	ErrNoSession = errors.New("interact: the run has no session id")
	// ErrTimeout is wrapped by the error of an ask_user_question call whose
	// form nobody answered within the timeout.
	ErrTimeout = errors.New("interact: the form was not answered in time")
	// ErrCancelled is wrapped by the error of an ask_user_question call
	// whose form was cancelled by [Forms.CancelSession].
	ErrCancelled = errors.New("interact: the form was cancelled")
)

// waitError is the outcome of a form nobody answered: its text is for the
// model (the tool message), its sentinel for the host.
type waitError struct {
	msg string
	err error
}

func (e *waitError) Error() string { return e.msg }
func (e *waitError) Unwrap() error { return e.err }

// FormsConfig configures a [Forms]. The zero value is ready to use.
type FormsConfig struct {
	// Timeout is how long an ask_user_question call waits for the answers,
	// counted from the moment it starts waiting. Zero means
	// [DefaultTimeout]; negative values are invalid.
	Timeout time.Duration
}

// PendingForm is a form that waits for its answers, as [Forms.Pending] lists
// it. Its JSON is the form request's with the fields below added.
type PendingForm struct {
	FormRequest
	// SessionID is the run's session.
	SessionID string `json:"session_id"`
	// CallID is the id of the ask_user_question call that asked.
	CallID string `json:"call_id"`
	// Created is when the form was registered.
	Created time.Time `json:"created"`
}

// Forms is the register / wait / answer / cancel service behind the forms
// of ask_user_question ([AskUserQuestion]), for a front end that lives
// elsewhere, such as a browser or the terminal the run is ranged in.
//
// A call registers its form synchronously, in the agent's goroutine, when
// the agent asks for the call's side message: before the form_request chunk
// is yielded. From then on an answer given to [Forms.Answer] (or through the
// handler of [Forms.AnswerHandler]) is kept until the call takes it, also
// when it comes before the call has started to wait: a host that answers
// from inside its range loop, as a terminal does, loses nothing. The first
// valid answer wins; a form belongs to its run's session, and only that
// session may answer it.
//
// Waiting costs no goroutine. A form leaves the Forms when its call has
// taken the answers (or gave up: timeout, interrupt), when its session is
// cancelled, or, for a form whose call never ran (the consumer stopped
// ranging right after the side chunk), when the run's context ends, so
// [Forms.Len] returns to zero after every run.
//
// All methods are safe for concurrent use.
type Forms struct {
	timeout time.Duration

	mu sync.Mutex
	// byID and bySession index the open forms (answerable, listed by
	// Pending); byCall holds the forms registered by a side message until
	// their call takes them. mu guards the three maps, seq and the state
	// fields of every form.
	byID      map[string]*form
	bySession map[string]map[string]*form
	byCall    map[string][]*form
	seq       uint64
}

type formState uint8

const (
	stateOpen  formState = iota // waits for its answers
	stateEnded                  // answered, cancelled, timed out or interrupted
)

// form is one registered form. done is closed exactly once, by whoever
// moves state to stateEnded, with Forms.mu held.
type form struct {
	req     FormRequest
	session string
	callID  string
	callKey string
	created time.Time
	seq     uint64
	done    chan struct{}
	stop    func() bool // stops the clean-up at the end of the registering context

	state   formState // guarded by Forms.mu
	waiting bool      // guarded by Forms.mu: a call waits for it
	inCall  bool      // guarded by Forms.mu: in byCall
	listed  bool      // guarded by Forms.mu: in byID and bySession
	answers Answers   // guarded by Forms.mu; set before done is closed
	err     error     // guarded by Forms.mu; set before done is closed
}

// NewForms returns a Forms configured by cfg. It fails when cfg is invalid.
func NewForms(cfg FormsConfig) (*Forms, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("interact: negative timeout %v", cfg.Timeout)
	}
	return &Forms{
		timeout:   cmp.Or(cfg.Timeout, DefaultTimeout),
		byID:      make(map[string]*form),
		bySession: make(map[string]map[string]*form),
		byCall:    make(map[string][]*form),
	}, nil
}

// Timeout returns how long a call waits for the answers.
func (f *Forms) Timeout() time.Duration { return f.timeout }

// newID returns an unguessable form id: 128 random bits in hex.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// callOf returns the session and the call key of the call running in ctx.
// The session is the nearest one up the chain of parent calls (a sub-agent's
// run may have none of its own); the key names the call by its whole path,
// so that the calls of two sub-agents never share one.
func callOf(ctx context.Context) (session, key, callID string, ok bool) {
	info, ok := agent.CallFromContext(ctx)
	if !ok {
		return "", "", "", false
	}
	var path []string
	for c := &info; c != nil; c = c.Parent {
		if session == "" {
			session = c.SessionID
		}
		path = append(path, c.CallID)
	}
	slices.Reverse(path)
	return session, session + "\x00" + strings.Join(path, "\x00"), info.CallID, true
}

// register opens a form for req's questions (already checked). A form
// registered for a side message (handoff) waits in byCall for its call's
// Execute; it is dropped when ctx ends before the call takes it.
func (f *Forms) register(ctx context.Context, session, key, callID string, req FormRequest, handoff bool) *form {
	req.Type = TypeFormRequest
	req.FormID = newID()
	e := &form{req: req, session: session, callID: callID, callKey: key, created: time.Now(), done: make(chan struct{})}
	f.mu.Lock()
	f.seq++
	e.seq = f.seq
	e.listed = true
	f.byID[e.req.FormID] = e
	s := f.bySession[session]
	if s == nil {
		s = make(map[string]*form)
		f.bySession[session] = s
	}
	s[e.req.FormID] = e
	if handoff {
		e.inCall = true
		f.byCall[key] = append(f.byCall[key], e)
	}
	f.mu.Unlock()
	if handoff {
		e.stop = context.AfterFunc(ctx, func() { f.expire(e) })
	}
	return e
}

// take returns the oldest form registered for the call key and not taken
// yet, or nil.
func (f *Forms) take(key string) *form {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.byCall[key]
	if len(q) == 0 {
		return nil
	}
	e := q[0]
	f.unqueue(e)
	return e
}

// unqueue removes e from byCall. f.mu must be held.
func (f *Forms) unqueue(e *form) {
	if !e.inCall {
		return
	}
	e.inCall = false
	q := slices.DeleteFunc(f.byCall[e.callKey], func(x *form) bool { return x == e })
	if len(q) == 0 {
		delete(f.byCall, e.callKey)
	} else {
		f.byCall[e.callKey] = q
	}
}

// unlist removes e from byID and bySession. f.mu must be held.
func (f *Forms) unlist(e *form) {
	if !e.listed {
		return
	}
	e.listed = false
	delete(f.byID, e.req.FormID)
	if s := f.bySession[e.session]; s != nil {
		delete(s, e.req.FormID)
		if len(s) == 0 {
			delete(f.bySession, e.session)
		}
	}
}

// end records the outcome of e and wakes its waiter. f.mu must be held and
// e must be open.
func (f *Forms) end(e *form, a Answers, err error) {
	e.state = stateEnded
	e.answers, e.err = a, err
	close(e.done)
}

// expire drops a form whose registering context ended before its call took
// it: the call never ran (or will find the run ended).
func (f *Forms) expire(e *form) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.waiting {
		return // the waiter owns it
	}
	if e.state == stateOpen {
		f.end(e, nil, context.Canceled)
	}
	f.unlist(e)
	f.unqueue(e)
}

// wait waits for the answers to e, which the caller took from byCall (or
// registered without a handoff). It returns them, or an error wrapping
// ErrTimeout or ErrCancelled, or ctx's error.
func (f *Forms) wait(ctx context.Context, e *form) (Answers, error) {
	f.mu.Lock()
	e.waiting = true
	if e.stop != nil {
		e.stop() // the clean-up at the end of the run is the waiter's now
	}
	if e.state == stateEnded {
		// Answered (or cancelled) before the wait.
		f.unlist(e)
		a, err := e.answers, e.err
		f.mu.Unlock()
		return a, err
	}
	if err := ctx.Err(); err != nil {
		f.end(e, nil, err)
		f.unlist(e)
		f.mu.Unlock()
		return nil, err
	}
	f.mu.Unlock()

	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	var ctxErr error
	select {
	case <-e.done:
		// Whoever closed done set the outcome and unlisted e.
		f.mu.Lock()
		defer f.mu.Unlock()
		return e.answers, e.err
	case <-ctx.Done():
		ctxErr = ctx.Err()
	case <-timer.C:
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlist(e)
	if e.state == stateOpen {
		// Nothing came first: the wait's own end is the outcome.
		f.end(e, nil, cmp.Or(ctxErr, error(&waitError{fmt.Sprintf("the user did not answer the form within %v", f.timeout), ErrTimeout})))
	}
	return e.answers, e.err
}

// Answer gives answers to the open form formID of session sessionID. It
// reports whether the form was open: false means the id is unknown, or the
// form was already answered, timed out, cancelled or ended with its run (a
// stale form, for example after a server restart); the first answer wins
// and later ones change nothing.
//
// Answers that arrive before the call waits are kept and returned by the
// wait that follows.
//
// Answer fails, and leaves the form open, with [ErrWrongSession] when the
// form belongs to another session, and with an error wrapping
// [ErrInvalidAnswers] when answers do not fit the questions: an answer for
// each question and none for an unknown id; one text for a text question (at
// most [MaxTextAnswer] bytes of UTF-8), one of the options for a single
// choice, distinct options for a multiple choice.
func (f *Forms) Answer(sessionID, formID string, answers Answers) (open bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byID[formID]
	if e == nil {
		return false, nil
	}
	if e.session != sessionID {
		return false, ErrWrongSession
	}
	if e.state != stateOpen {
		return false, nil
	}
	a, err := checkAnswers(e.req.Questions, answers)
	if err != nil {
		return false, err
	}
	f.end(e, a, nil)
	if e.waiting {
		// The waiter holds e: drop it now, so Len and Pending stop counting
		// it at once.
		f.unlist(e)
	}
	return true, nil
}

// CancelSession ends every open form of sessionID, including forms whose
// call has not started to wait yet: that call then returns at once. A
// cancelled call returns an error wrapping [ErrCancelled], which the model
// reads. Forms already answered keep their answers. CancelSession returns
// the number of forms it cancelled.
func (f *Forms) CancelSession(sessionID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.bySession[sessionID] {
		if e.state != stateOpen {
			continue
		}
		f.end(e, nil, &waitError{"the form was cancelled before the user answered", ErrCancelled})
		f.unlist(e)
		n++
	}
	return n
}

// Len returns the number of forms the Forms holds: forms waiting for their
// answers plus answered ones whose call has not taken the answers yet. It
// returns to zero when every run has ended (for a run whose consumer
// stopped ranging right after a form_request chunk, a moment after: when
// the run's context has ended).
func (f *Forms) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byID)
}

// Pending lists the open forms of sessionID, oldest first, so that a
// reconnecting front end can draw them again.
func (f *Forms) Pending(sessionID string) []PendingForm {
	f.mu.Lock()
	s := f.bySession[sessionID]
	list := make([]*form, 0, len(s))
	for _, e := range s {
		if e.state == stateOpen {
			list = append(list, e)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(list, func(a, b *form) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]PendingForm, len(list))
	for i, e := range list {
		req := e.req
		req.Questions = slices.Clone(req.Questions)
		out[i] = PendingForm{FormRequest: req, SessionID: e.session, CallID: e.callID, Created: e.created}
	}
	return out
}
