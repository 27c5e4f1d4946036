package interact

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/waiting"
	"github.com/planround/planround/memory"
)

// DefaultTimeout is how long a form waits for its answers when
// [FormsConfig.Timeout] is zero.
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
	// whose form was cancelled by [Forms.CancelSession] (or closed because
	// the user moved on).
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
	// Timeout is how long a form waits for its answers, counted from its
	// creation. Zero means [DefaultTimeout]; negative values are invalid.
	Timeout time.Duration

	// Store keeps the forms and their answers, as approval.Manager keeps
	// approvals (usually the same store): the SQLite store across
	// restarts, the PostgreSQL one across machines. Nil means a
	// memory.MemStore of the Forms' own. A form is created in Store before
	// its form_request chunk is yielded, answered there (the first answer
	// wins, in every process that shares Store), and outlives its call's
	// process: with a store that is also the agent's memory.CallLog, a run
	// can suspend while its form waits and resume on the answer, on any
	// replica (see [FormsConfig.SuspendAfter]).
	Store memory.ApprovalStore

	// Notifier, when not nil, carries answers between the processes that
	// share Store: an answer given to any
	// process wakes the call that waits for it at once, and a runner
	// (package runner) resumes a suspended turn on it. It requires Store;
	// a Forms with a Notifier must be closed ([Forms.Close]).
	Notifier memory.Notifier

	// SuspendAfter, when positive, is how long an ask_user_question call
	// waits for the answers before it suspends its run (agent.Suspend):
	// the form stays open in Store, and the turn resumes when it is
	// answered, in any process. It needs a run that keeps open-call
	// records (a memory.CallLog store); without one the call keeps
	// waiting. Zero means never.
	SuspendAfter time.Duration

	// OnAnswered, when not nil, is told of an answer (or a cancellation)
	// no call of this process waits for, as approval's
	// ManagerConfig.OnDecided is; a host that drives its sessions with a
	// runner needs none. It must not block.
	OnAnswered func(memory.Approval)
}

// PendingForm is a form that waits for its answers, as [Forms.Pending] lists
// it. Its JSON is the form request's with the fields below added.
type PendingForm struct {
	FormRequest
	// SessionID is the run's session.
	SessionID string `json:"session_id"`
	// CallID is the id of the call that asked: ask_user_question's, or
	// the MCP tool's whose server asked.
	CallID string `json:"call_id"`
	// Elicitation is the form of an MCP server ([Forms.Elicit]), whose
	// Type is then [TypeElicitationRequest] and which has no questions.
	Elicitation *ElicitationRequest `json:"elicitation,omitempty"`
	// Created is when the form was registered.
	Created time.Time `json:"created"`
}

// Forms is the register / wait / answer / cancel service behind the forms
// of ask_user_question ([AskUserQuestion]), for a front end that lives
// elsewhere, such as a browser or the terminal the run is ranged in. It is
// built on the same core as approval.Manager: a form is a record of its
// Store, like an approval.
//
// A call registers its form synchronously, in the agent's goroutine, when
// the agent asks for the call's side message: before the form_request chunk
// is yielded. From then on an answer given to [Forms.Answer] is kept until
// the call takes it, also
// when it comes before the call has started to wait, or in another process
// that shares the Store. The first valid answer wins; a form belongs to its
// run's session, and only that session may answer it.
//
// Waiting costs no goroutine. [Forms.Len] counts the forms this process's
// calls hold; it returns to zero after every run.
//
// All methods are safe for concurrent use.
type Forms struct {
	core         *waiting.Core
	suspendAfter time.Duration
	interrupted  memory.ApprovalDecision // the decision of a form cancelled

	mu sync.Mutex
	// byCall holds the forms registered by a side message until their
	// call's Execute takes them, by the call's path (see callOf).
	byCall map[string][]*handoff
}

// handoff is a form a side message registered for its call's Execute.
type handoff struct {
	w    *waiting.Wait
	req  FormRequest
	stop func() bool // stops the release at the end of the registering context
	// claimed is set (under Forms.mu) by whichever takes h first: take,
	// or the release at the end of the registering context, which keeps
	// h in byCall until it is done so that a take meanwhile waits for it.
	claimed bool
	// released is closed by whichever claimed h: take at once, the
	// release once it has cancelled the form (or kept it for a resumed
	// turn).
	released chan struct{}
}

// NewForms returns a Forms configured by cfg. It fails when cfg is
// invalid, and when the Notifier cannot listen.
func NewForms(cfg FormsConfig) (*Forms, error) {
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("interact: negative timeout %v", cfg.Timeout)
	case cfg.SuspendAfter < 0:
		return nil, fmt.Errorf("interact: negative SuspendAfter %v", cfg.SuspendAfter)
	case cfg.Notifier != nil && cfg.Store == nil:
		return nil, errors.New("interact: FormsConfig.Notifier needs a Store (the notes name forms kept there)")
	}
	timeout := cmp.Or(cfg.Timeout, DefaultTimeout)
	interrupted := memory.ApprovalDecision{Reason: "the form was cancelled before the user answered",
		Cause: string(agent.CauseApprovalInterrupted), Principal: "system", Channel: "system"}
	core, err := waiting.New(waiting.Config{
		Kind:         memory.KindForm,
		Store:        cfg.Store,
		Notifier:     cfg.Notifier,
		Timeout:      timeout,
		SuspendAfter: cfg.SuspendAfter,
		OnDecided:    cfg.OnAnswered,
		TimedOut: memory.ApprovalDecision{Reason: fmt.Sprintf("the user did not answer the form within %v", timeout),
			Cause: string(agent.CauseTimeout), Principal: "timeout", Channel: "timeout"},
		Interrupted: interrupted,
	})
	if err != nil {
		return nil, fmt.Errorf("interact: %w", err)
	}
	return &Forms{core: core, suspendAfter: cfg.SuspendAfter, interrupted: interrupted, byCall: make(map[string][]*handoff)}, nil
}

// Close stops a Forms with a Notifier from listening; a Forms without one
// has nothing to close. It always returns nil.
func (f *Forms) Close() error {
	f.core.Close()
	return nil
}

// Timeout returns how long a form waits for its answers.
func (f *Forms) Timeout() time.Duration { return f.core.Timeout() }

// callOf returns the session and the call key of the call running in ctx.
// The session is the nearest one up the chain of parent calls (a sub-agent's
// run may have none of its own); the key names the call by its whole path,
// so that the calls of two sub-agents never share one.
func callOf(ctx context.Context) (info agent.CallInfo, session, key string, ok bool) {
	info, ok = agent.CallFromContext(ctx)
	if !ok {
		return info, "", "", false
	}
	var path []string
	for c := &info; c != nil; c = c.Parent {
		if session == "" {
			session = c.SessionID
		}
		path = append(path, c.CallID)
	}
	slices.Reverse(path)
	return info, session, session + "\x00" + strings.Join(path, "\x00"), true
}

// open creates the form req for the call info of session, or, when the
// call has a durable key (a resumed turn), takes up the form the call
// asked before. It returns the form as the front end shows it.
func (f *Forms) open(ctx context.Context, info agent.CallInfo, session string, req FormRequest) (*waiting.Wait, FormRequest, error) {
	req.Type, req.FormID = TypeFormRequest, ""
	args, err := json.Marshal(req)
	if err != nil {
		return nil, FormRequest{}, err
	}
	rec := memory.Approval{SessionID: session, CallID: info.CallID, Tool: info.Tool, Arguments: args, Round: info.Round}
	if info.Key != "" && info.SessionID == session {
		rec.Key = "form:" + info.Key
	}
	w, existing, err := f.core.Open(ctx, rec)
	if err != nil {
		return nil, FormRequest{}, fmt.Errorf("interact: store the form of call %s: %w", info.CallID, err)
	}
	if existing {
		// The form asked before: the one the person may be filling in.
		if stored, err := formOf(*w.Record); err == nil {
			req = stored
		}
	}
	req.FormID = w.Record.ID
	return w, req, nil
}

// formOf returns the form a stored record holds.
func formOf(a memory.Approval) (FormRequest, error) {
	var req FormRequest
	if err := json.Unmarshal(a.Arguments, &req); err != nil {
		return FormRequest{}, fmt.Errorf("interact: form %s: %w", a.ID, err)
	}
	if req.Type != "" && req.Type != TypeFormRequest {
		return FormRequest{}, fmt.Errorf("interact: record %s is a %s, not a form", a.ID, req.Type)
	}
	req.Type, req.FormID = TypeFormRequest, a.ID
	return req, nil
}

// register opens a form for the call's side message; Execute takes it.
// When ctx ends before Execute took it (the call never ran), the form is
// cancelled, unless ctx ended to suspend the run: then it stays open for
// the resumed turn's call.
func (f *Forms) register(ctx context.Context, info agent.CallInfo, session, key string, req FormRequest) (FormRequest, error) {
	w, req, err := f.open(ctx, info, session, req)
	if err != nil {
		return FormRequest{}, err
	}
	h := &handoff{w: w, req: req, released: make(chan struct{})}
	f.mu.Lock()
	f.byCall[key] = append(f.byCall[key], h)
	f.mu.Unlock()
	h.stop = context.AfterFunc(ctx, func() {
		if !f.claim(h) {
			return
		}
		defer close(h.released)
		defer f.unqueue(key, h)
		defer w.Release() // after the cancel: the form leaves Len once it is answered
		if errors.Is(context.Cause(ctx), agent.ErrSuspended) {
			return // the run suspended: the resumed turn's call takes the form up
		}
		// The call will never wait (the run ended before it ran): the
		// form must not stay answerable, as a wait's end interrupts it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		defer cancel()
		_ = f.core.Cancel(cctx, session, w.Record.ID, f.interrupted) // a form left open times out
	})
	return req, nil
}

// cancelGrace bounds the store call that cancels a form whose call never
// ran.
const cancelGrace = 3 * time.Second

// take returns the oldest form registered for the call key and not taken
// yet, or nil.
func (f *Forms) take(key string) *handoff {
	f.mu.Lock()
	q := f.byCall[key]
	if len(q) == 0 {
		f.mu.Unlock()
		return nil
	}
	h := q[0]
	if h.claimed {
		f.mu.Unlock()
		// The registering context ended first and its release took the
		// form: wait until it is done, so that the call, which ends
		// interrupted, leaves no form behind.
		<-h.released
		return nil
	}
	h.claimed = true
	f.mu.Unlock()
	f.unqueue(key, h)
	close(h.released)
	h.stop()
	return h
}

// claim claims h for the release at the end of its registering context,
// unless take claimed it first.
func (f *Forms) claim(h *handoff) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.claimed {
		return false
	}
	h.claimed = true
	return true
}

// unqueue removes h from byCall.
func (f *Forms) unqueue(key string, h *handoff) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.byCall[key]
	i := slices.Index(q, h)
	if i < 0 {
		return
	}
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(f.byCall, key)
	} else {
		f.byCall[key] = q
	}
}

// wait waits for the answers to the form of w, whose questions are qs.
func (f *Forms) wait(ctx context.Context, w *waiting.Wait, qs []Question) (Answers, error) {
	a, err := w.Wait(ctx)
	if err != nil {
		if errors.Is(err, agent.ErrSuspended) {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx) // the host suspends the run
			}
			return nil, agent.Suspend(w.Record.ID)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	d := a.Decision
	if !d.Approved {
		if d.Cause == string(agent.CauseTimeout) {
			return nil, &waitError{d.Reason, ErrTimeout}
		}
		return nil, &waitError{cmp.Or(d.Reason, "the form was cancelled before the user answered"), ErrCancelled}
	}
	var answers Answers
	if err := json.Unmarshal(d.Arguments, &answers); err != nil {
		return nil, fmt.Errorf("interact: the stored answers of form %s: %w", a.ID, err)
	}
	return CheckAnswers(qs, answers)
}

// FormReply is an answer to one form, as [Forms.Answer] takes it.
type FormReply struct {
	SessionID string
	FormID    string
	Answers   Answers
	// Elicitation answers a form of [Forms.Elicit] (an
	// elicitation_request) instead of Answers.
	Elicitation *ElicitationAnswer
	// Cancel dismisses the form instead of answering it (the person moved
	// on): its call ends with an error wrapping [ErrCancelled], which the
	// model reads, as for a cancelled session (an elicitation is answered
	// [ActionCancel]).
	Cancel bool
	// By is who answered (the principal a handler's Authorize returned)
	// and Via through what ("http", "terminal"); kept with the answer.
	By, Via string
}

// Answer gives r.Answers to the open form r.FormID of session r.SessionID.
// It reports whether the form was open: false means the id is unknown, or
// the form was already answered, timed out, cancelled or ended with its run
// (a stale form); the first answer wins, in every process that shares the
// Store, and later ones change nothing.
//
// Answers that arrive before the call waits are kept and returned by the
// wait that follows; with a Store, also in another process, or after a
// restart: the resumed turn's call takes them.
//
// Answer fails, and leaves the form open, with [ErrWrongSession] when the
// form belongs to another session, with an error wrapping
// [ErrInvalidAnswers] when the answers do not fit the questions (an answer
// for each question and none for an unknown id; one text for a text
// question, at most [MaxTextAnswer] bytes of UTF-8; one of the options for a
// single choice; distinct options for a multiple choice; for an
// elicitation, an action, and to accept a form content valid against the
// requested schema, with no field it does not have), and when the Store
// fails. ctx bounds the Store calls.
func (f *Forms) Answer(ctx context.Context, r FormReply) (open bool, err error) {
	d := memory.ApprovalDecision{Approved: true, Principal: cmp.Or(r.By, "unknown"), Channel: cmp.Or(r.Via, "http")}
	if r.Cancel {
		d.Approved, d.Cause, d.Reason = false, f.interrupted.Cause, "the user dismissed the form without answering"
	}
	open, err = f.core.Decide(ctx, r.SessionID, r.FormID, d, func(a memory.Approval, d *memory.ApprovalDecision) error {
		if r.Cancel {
			return nil
		}
		if recordType(a) == TypeElicitationRequest {
			return decideElicitation(a, r.Elicitation, d)
		}
		req, err := formOf(a)
		if err != nil {
			return err
		}
		checked, err := CheckAnswers(req.Questions, r.Answers)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(checked)
		if err != nil {
			return err
		}
		d.Arguments = raw
		return nil
	})
	switch {
	case errors.Is(err, waiting.ErrWrongSession):
		return false, ErrWrongSession
	case err != nil && !errors.Is(err, ErrInvalidAnswers):
		return false, fmt.Errorf("interact: answer form %s: %w", r.FormID, err)
	}
	return open, err
}

// CancelSession ends every open form of sessionID, including forms whose
// call has not started to wait yet (that call then returns at once) and
// forms no call of this process waits for. A cancelled call returns an
// error wrapping [ErrCancelled], which the model reads. Forms already
// answered keep their answers. It returns the number of forms it
// cancelled, also when the Store fails for some.
func (f *Forms) CancelSession(ctx context.Context, sessionID string) (int, error) {
	n, err := f.core.CancelSession(ctx, sessionID)
	if err != nil {
		return n, fmt.Errorf("interact: cancel the forms of session %q: %w", sessionID, err)
	}
	return n, nil
}

// Len returns the number of forms this process's calls hold: forms waiting
// for their answers plus answered ones whose call has not taken the answers
// yet. It returns to zero when every run has ended (for a run whose
// consumer stopped ranging right after a form_request chunk, a moment
// after: when the run's context has ended).
func (f *Forms) Len() int { return f.core.Len() }

// Pending lists the open forms of sessionID, oldest first, so that a
// reconnecting front end can draw them again: every open form of the
// session in the Store, also those whose run is suspended or driven by
// another process. A form past its timeout is recorded as timed out
// instead of listed.
func (f *Forms) Pending(ctx context.Context, sessionID string) ([]PendingForm, error) {
	list, err := f.core.Pending(ctx, sessionID)
	if err != nil {
		return []PendingForm{}, fmt.Errorf("interact: list the open forms of session %q: %w", sessionID, err)
	}
	out := make([]PendingForm, 0, len(list))
	for _, a := range list {
		if recordType(a) == TypeElicitationRequest {
			el, err := elicitationOf(a)
			if err != nil {
				continue
			}
			out = append(out, PendingForm{FormRequest: FormRequest{Type: TypeElicitationRequest, FormID: a.ID},
				Elicitation: &el, SessionID: a.SessionID, CallID: a.CallID, Created: a.CreatedAt})
			continue
		}
		req, err := formOf(a)
		if err != nil {
			continue // not a form this version can show
		}
		out = append(out, PendingForm{FormRequest: req, SessionID: a.SessionID, CallID: a.CallID, Created: a.CreatedAt})
	}
	return out, nil
}
