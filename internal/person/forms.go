package person

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/waiting"
	"github.com/planround/planround/memory"
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
	// creation. Zero means [interact.DefaultTimeout]; negative values are invalid.
	Timeout time.Duration

	// Store keeps the forms and their answers, as [Approvals] keep
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
	// no call of this process waits for, as
	// [ApprovalsConfig.OnDecided] is; the runner needs none. It must not
	// block.
	OnAnswered func(memory.Approval)
}

// Forms is the register / wait / answer / cancel service behind the forms
// of ask_user_question ([interact.AskUserQuestion]) and of MCP servers'
// requests for input, for a front end that lives elsewhere, such as a
// browser; it is the [interact.Asker] of the runner's runs. It is built on
// the same core as [Approvals]: a form is a record of its Store, like an
// approval.
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
	req  interact.FormRequest
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

// StartForms returns a Forms configured by cfg. It fails when cfg is
// invalid, and when the Notifier cannot listen.
func StartForms(cfg FormsConfig) (*Forms, error) {
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("interact: negative timeout %v", cfg.Timeout)
	case cfg.SuspendAfter < 0:
		return nil, fmt.Errorf("interact: negative SuspendAfter %v", cfg.SuspendAfter)
	case cfg.Notifier != nil && cfg.Store == nil:
		return nil, errors.New("interact: FormsConfig.Notifier needs a Store (the notes name forms kept there)")
	}
	timeout := cmp.Or(cfg.Timeout, interact.DefaultTimeout)
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
func (f *Forms) open(ctx context.Context, info agent.CallInfo, session string, req interact.FormRequest) (*waiting.Wait, interact.FormRequest, error) {
	req.Type, req.FormID = interact.TypeFormRequest, ""
	args, err := json.Marshal(req)
	if err != nil {
		return nil, interact.FormRequest{}, err
	}
	rec := memory.Approval{SessionID: session, CallID: info.CallID, Tool: info.Tool, Arguments: args, Round: info.Round}
	if info.Key != "" && info.SessionID == session {
		rec.Key = "form:" + info.Key
	}
	w, existing, err := f.core.Open(ctx, rec)
	if err != nil {
		return nil, interact.FormRequest{}, fmt.Errorf("interact: store the form of call %s: %w", info.CallID, err)
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
func formOf(a memory.Approval) (interact.FormRequest, error) {
	var req interact.FormRequest
	if err := json.Unmarshal(a.Arguments, &req); err != nil {
		return interact.FormRequest{}, fmt.Errorf("interact: form %s: %w", a.ID, err)
	}
	if req.Type != "" && req.Type != interact.TypeFormRequest {
		return interact.FormRequest{}, fmt.Errorf("interact: record %s is a %s, not a form", a.ID, req.Type)
	}
	req.Type, req.FormID = interact.TypeFormRequest, a.ID
	return req, nil
}

// register opens a form for the call's side message; Execute takes it.
// When ctx ends before Execute took it (the call never ran), the form is
// cancelled, unless ctx ended to suspend the run: then it stays open for
// the resumed turn's call.
func (f *Forms) register(ctx context.Context, info agent.CallInfo, session, key string, req interact.FormRequest) (interact.FormRequest, error) {
	w, req, err := f.open(ctx, info, session, req)
	if err != nil {
		return interact.FormRequest{}, err
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
func (f *Forms) wait(ctx context.Context, w *waiting.Wait, qs []interact.Question) (interact.Answers, error) {
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
			return nil, &waitError{d.Reason, interact.ErrTimeout}
		}
		return nil, &waitError{cmp.Or(d.Reason, "the form was cancelled before the user answered"), interact.ErrCancelled}
	}
	var answers interact.Answers
	if err := json.Unmarshal(d.Arguments, &answers); err != nil {
		return nil, fmt.Errorf("interact: the stored answers of form %s: %w", a.ID, err)
	}
	return interact.CheckAnswers(qs, answers)
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
// Answer fails, and leaves the form open, with [interact.ErrWrongSession] when the
// form belongs to another session, with an error wrapping
// [interact.ErrInvalidAnswers] when the answers do not fit the questions (an answer
// for each question and none for an unknown id; one text for a text
// question, at most [interact.MaxTextAnswer] bytes of UTF-8; one of the options for a
// single choice; distinct options for a multiple choice; for an
// elicitation, an action, and to accept a form content valid against the
// requested schema, with no field it does not have), and when the Store
// fails. ctx bounds the Store calls.
func (f *Forms) Answer(ctx context.Context, r interact.FormReply) (open bool, err error) {
	d := memory.ApprovalDecision{Approved: true, Principal: cmp.Or(r.By, "unknown"), Channel: cmp.Or(r.Via, "http")}
	if r.Cancel {
		d.Approved, d.Cause, d.Reason = false, f.interrupted.Cause, "the user dismissed the form without answering"
	}
	open, err = f.core.Decide(ctx, r.SessionID, r.FormID, d, func(a memory.Approval, d *memory.ApprovalDecision) error {
		if r.Cancel {
			return nil
		}
		if recordType(a) == interact.TypeElicitationRequest {
			return decideElicitation(a, r.Elicitation, d)
		}
		req, err := formOf(a)
		if err != nil {
			return err
		}
		checked, err := interact.CheckAnswers(req.Questions, r.Answers)
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
		return false, interact.ErrWrongSession
	case err != nil && !errors.Is(err, interact.ErrInvalidAnswers):
		return false, fmt.Errorf("interact: answer form %s: %w", r.FormID, err)
	}
	return open, err
}

// CancelSession ends every open form of sessionID, including forms whose
// call has not started to wait yet (that call then returns at once) and
// forms no call of this process waits for. A cancelled call returns an
// error wrapping [interact.ErrCancelled], which the model reads. Forms already
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
func (f *Forms) Pending(ctx context.Context, sessionID string) ([]interact.PendingForm, error) {
	list, err := f.core.Pending(ctx, sessionID)
	if err != nil {
		return []interact.PendingForm{}, fmt.Errorf("interact: list the open forms of session %q: %w", sessionID, err)
	}
	out := make([]interact.PendingForm, 0, len(list))
	for _, a := range list {
		if recordType(a) == interact.TypeElicitationRequest {
			el, err := elicitationOf(a)
			if err != nil {
				continue
			}
			out = append(out, interact.PendingForm{FormRequest: interact.FormRequest{Type: interact.TypeElicitationRequest, FormID: a.ID},
				Elicitation: &el, SessionID: a.SessionID, CallID: a.CallID, Created: a.CreatedAt})
			continue
		}
		req, err := formOf(a)
		if err != nil {
			continue // not a form this version can show
		}
		out = append(out, interact.PendingForm{FormRequest: req, SessionID: a.SessionID, CallID: a.CallID, Created: a.CreatedAt})
	}
	return out, nil
}

// OpenForm implements [interact.Asker]: it registers req as the form of the call
// running in ctx (ask_user_question's side message); [Forms.AwaitForm]
// takes it. When ctx ends before AwaitForm took it (the call never ran),
// the form is cancelled, unless ctx ended to suspend the run: then it
// stays open for the resumed turn's call.
func (f *Forms) OpenForm(ctx context.Context, req interact.FormRequest) (interact.FormRequest, error) {
	qs, err := interact.CheckQuestions(req.Questions)
	if err != nil {
		return interact.FormRequest{}, err
	}
	req.Questions = qs
	info, session, key, ok := callOf(ctx)
	if !ok {
		return interact.FormRequest{}, errors.New("interact: a form asked outside a run (no agent call in the context)")
	}
	if session == "" {
		return interact.FormRequest{}, fmt.Errorf("%w (set agent.Input.SessionID: forms are answered per session)", interact.ErrNoSession)
	}
	if err := ctx.Err(); err != nil {
		return interact.FormRequest{}, err
	}
	return f.register(ctx, info, session, key, req)
}

// AwaitForm implements [interact.Asker]: it waits for the answers to the form
// OpenForm registered for the call running in ctx, or to req, opened now
// when there is none.
func (f *Forms) AwaitForm(ctx context.Context, req interact.FormRequest) (interact.FormRequest, interact.Answers, error) {
	info, session, key, ok := callOf(ctx)
	var h *handoff
	if ok {
		h = f.take(key)
	}
	if h == nil {
		qs, err := interact.CheckQuestions(req.Questions)
		if err != nil {
			return interact.FormRequest{}, nil, err
		}
		req.Questions = qs
		if session == "" {
			return interact.FormRequest{}, nil, fmt.Errorf("%w: the form cannot be answered (the host must set agent.Input.SessionID)", interact.ErrNoSession)
		}
		if err := ctx.Err(); err != nil {
			return interact.FormRequest{}, nil, err
		}
		w, req, err := f.open(ctx, info, session, req)
		if err != nil {
			return interact.FormRequest{}, nil, err
		}
		h = &handoff{w: w, req: req}
	}
	answers, err := f.wait(ctx, h.w, h.req.Questions)
	if err != nil {
		return interact.FormRequest{}, nil, err
	}
	return h.req, answers, nil
}

// Elicit shows req, a server's request for input made during the tool call
// ctx belongs to, to the user of that call's session, and waits for the
// answer: a form of Forms like ask_user_question's, registered in the
// Store before it is shown (with agent.ShowSide, beside the call's card)
// and answerable through [Forms.Answer] on any process that shares the
// Store.
//
// A call with a durable key (agent.CallInfo.Key) keeps its elicitations
// under that key and req's identity (req.Ref): a resumed turn that runs the
// call again and is asked the same again takes up the form asked before,
// or its answer, instead of asking anew. With [FormsConfig.SuspendAfter],
// the wait suspends the run: Elicit then returns the error of
// agent.Suspend, which the tool returns.
//
// A form nobody answers in time, and one cancelled with its session, is
// answered [interact.ActionCancel]. Elicit fails, showing nothing, when ctx is not
// a call's or the call has no session ([interact.ErrNoSession]), for a request that
// makes no form (wrapping [interact.ErrInvalidForm]: a schema beyond the
// specification's primitive properties, a URL that is not http or https,
// is longer than [interact.MaxURLBytes] or has a host with a character a person
// cannot see)
// or asks for a secret in a form ([interact.ErrSecretField]), and when the Store
// fails.
func (f *Forms) Elicit(ctx context.Context, req interact.ElicitationRequest) (interact.ElicitationAnswer, error) {
	info, session, _, ok := callOf(ctx)
	if !ok || session == "" {
		return interact.ElicitationAnswer{}, fmt.Errorf("interact: an elicitation of server %q: %w", req.Server, interact.ErrNoSession)
	}
	ref := req.Ref
	req, err := interact.PrepareElicitation(req)
	if err != nil {
		return interact.ElicitationAnswer{}, err
	}
	args, err := json.Marshal(req)
	if err != nil {
		return interact.ElicitationAnswer{}, err
	}
	rec := memory.Approval{SessionID: session, CallID: info.CallID, Tool: info.Tool, Arguments: args, Round: info.Round}
	if info.Key != "" && info.SessionID == session {
		if ref == "" {
			sum := sha256.Sum256(args)
			ref = hex.EncodeToString(sum[:12])
		}
		rec.Key = "elicit:" + info.Key + "/" + ref
	}
	w, _, err := f.core.Open(ctx, rec)
	if err != nil {
		return interact.ElicitationAnswer{}, fmt.Errorf("interact: store the elicitation of call %s: %w", info.CallID, err)
	}
	if w.Record.Decided {
		return elicitationAnswerOf(*w.Record)
	}
	if stored, err := elicitationOf(*w.Record); err == nil {
		req = stored // the form asked before: the one the person may be filling in
	}
	req.FormID = w.Record.ID
	agent.ShowSide(ctx, req)
	a, err := w.Wait(ctx)
	if err != nil {
		if errors.Is(err, agent.ErrSuspended) {
			if ctx.Err() != nil {
				return interact.ElicitationAnswer{}, context.Cause(ctx)
			}
			return interact.ElicitationAnswer{}, agent.Suspend(w.Record.ID)
		}
		if ctx.Err() != nil {
			return interact.ElicitationAnswer{}, context.Cause(ctx)
		}
		return interact.ElicitationAnswer{}, err
	}
	return elicitationAnswerOf(a)
}

// elicitationAnswerOf returns the answer a decided record holds.
func elicitationAnswerOf(a memory.Approval) (interact.ElicitationAnswer, error) {
	if !a.Decided {
		return interact.ElicitationAnswer{}, fmt.Errorf("interact: elicitation %s is not answered", a.ID)
	}
	if !a.Decision.Approved {
		return interact.ElicitationAnswer{Action: interact.ActionCancel}, nil // timed out, cancelled
	}
	var ans interact.ElicitationAnswer
	if err := json.Unmarshal(a.Decision.Arguments, &ans); err != nil {
		return interact.ElicitationAnswer{}, fmt.Errorf("interact: the stored answer of elicitation %s: %w", a.ID, err)
	}
	return ans, nil
}

// recordType returns the "type" of a stored form's JSON.
func recordType(a memory.Approval) string {
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(a.Arguments, &t) // a record without one is no elicitation
	return t.Type
}

// elicitationOf returns the elicitation a stored record holds.
func elicitationOf(a memory.Approval) (interact.ElicitationRequest, error) {
	var req interact.ElicitationRequest
	if err := json.Unmarshal(a.Arguments, &req); err != nil {
		return req, fmt.Errorf("interact: elicitation %s: %w", a.ID, err)
	}
	if req.Type != interact.TypeElicitationRequest {
		return req, fmt.Errorf("interact: record %s is not an elicitation", a.ID)
	}
	req.FormID = a.ID
	return req, nil
}

// decideElicitation is the check of an answer to the elicitation record a.
func decideElicitation(a memory.Approval, ans *interact.ElicitationAnswer, d *memory.ApprovalDecision) error {
	req, err := elicitationOf(a)
	if err != nil {
		return err
	}
	if ans == nil {
		return fmt.Errorf("%w: an elicitation is answered with an action (accept, decline or cancel)", interact.ErrInvalidAnswers)
	}
	checked, err := interact.CheckElicitationAnswer(req, *ans)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(checked)
	if err != nil {
		return fmt.Errorf("%w: %v", interact.ErrInvalidAnswers, err)
	}
	d.Arguments = raw
	return nil
}
