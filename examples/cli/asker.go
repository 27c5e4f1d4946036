package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

// terminalForms is the CLI's interact.Asker: no runner drives its turns, so
// it asks the person itself, on the terminal. A form (ask_user_question's,
// or an MCP server's request for input) is shown as a side chunk; the turn's
// range loop asks its questions on the terminal and gives the answers here
// (answer, answerElicitation), and the call that waits for them takes them.
// Nothing outlives the process: a CLI's forms are answered while it runs.
type terminalForms struct {
	mu     sync.Mutex
	next   int
	open   map[string]*termForm // by form id, until answered or cancelled
	byCall map[string]*termForm // opened by a call's side message, until the call takes it
}

// termForm is one form shown on the terminal.
type termForm struct {
	id   string
	form interact.FormRequest         // a question form
	el   *interact.ElicitationRequest // or a server's request for input
	done chan struct{}                // closed when answered or cancelled
	// Set before done is closed.
	answers   interact.Answers
	elAnswer  interact.ElicitationAnswer
	cancelled bool
}

func newTerminalForms() *terminalForms {
	return &terminalForms{open: make(map[string]*termForm), byCall: make(map[string]*termForm)}
}

var _ interact.Asker = (*terminalForms)(nil)

// errFormCancelled is what the model reads for a form nobody answered: the
// input ended before its questions were answered.
var errFormCancelled = fmt.Errorf("%w before the user answered", interact.ErrCancelled)

// callKey names the call running in ctx by its whole path (a sub-agent's
// call under its parent's), and reports whether ctx is a call's.
func callKey(ctx context.Context) (string, bool) {
	info, ok := agent.CallFromContext(ctx)
	if !ok {
		return "", false
	}
	var path []string
	for c := &info; c != nil; c = c.Parent {
		path = append(path, c.CallID)
	}
	return strings.Join(path, "\x00"), true
}

// add registers a new form and returns it.
func (t *terminalForms) add(f *termForm) *termForm {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	f.id = "form-" + strconv.Itoa(t.next)
	f.done = make(chan struct{})
	t.open[f.id] = f
	return f
}

// OpenForm implements interact.Asker: the form of ask_user_question's side
// message, which the turn's range loop asks on the terminal.
func (t *terminalForms) OpenForm(ctx context.Context, req interact.FormRequest) (interact.FormRequest, error) {
	qs, err := interact.CheckQuestions(req.Questions)
	if err != nil {
		return interact.FormRequest{}, err
	}
	key, ok := callKey(ctx)
	if !ok {
		return interact.FormRequest{}, errors.New("cli: a form asked outside a run")
	}
	req.Questions, req.Type = qs, interact.TypeFormRequest
	f := t.add(&termForm{form: req})
	f.form.FormID = f.id
	t.mu.Lock()
	t.byCall[key] = f
	t.mu.Unlock()
	return f.form, nil
}

// AwaitForm implements interact.Asker: it waits for the answers to the form
// the call's side message opened, or shows req now (a side chunk) when
// there is none.
func (t *terminalForms) AwaitForm(ctx context.Context, req interact.FormRequest) (interact.FormRequest, interact.Answers, error) {
	key, _ := callKey(ctx)
	t.mu.Lock()
	f := t.byCall[key]
	delete(t.byCall, key)
	t.mu.Unlock()
	if f == nil {
		qs, err := interact.CheckQuestions(req.Questions)
		if err != nil {
			return interact.FormRequest{}, nil, err
		}
		req.Questions, req.Type = qs, interact.TypeFormRequest
		f = t.add(&termForm{form: req})
		f.form.FormID = f.id
		agent.ShowSide(ctx, f.form)
	}
	if err := t.wait(ctx, f); err != nil {
		return interact.FormRequest{}, nil, err
	}
	if f.cancelled {
		return interact.FormRequest{}, nil, errFormCancelled
	}
	return f.form, f.answers, nil
}

// Elicit implements interact.Asker: it shows an MCP server's request for
// input (a side chunk beside the call), which the turn's range loop asks
// on the terminal, and waits for the answer. A request cancelled (the input
// ended) is answered cancel.
func (t *terminalForms) Elicit(ctx context.Context, req interact.ElicitationRequest) (interact.ElicitationAnswer, error) {
	if _, ok := callKey(ctx); !ok {
		return interact.ElicitationAnswer{}, fmt.Errorf("cli: a request for input of server %q outside a run: %w", req.Server, interact.ErrNoSession)
	}
	req, err := interact.PrepareElicitation(req)
	if err != nil {
		return interact.ElicitationAnswer{}, err
	}
	f := t.add(&termForm{el: &req})
	req.FormID = f.id
	agent.ShowSide(ctx, req)
	if err := t.wait(ctx, f); err != nil {
		return interact.ElicitationAnswer{}, err
	}
	if f.cancelled {
		return interact.ElicitationAnswer{Action: interact.ActionCancel}, nil
	}
	return f.elAnswer, nil
}

// wait waits until f is answered or cancelled, or ctx ends (an interrupt):
// then f is dropped and the cause returned.
func (t *terminalForms) wait(ctx context.Context, f *termForm) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		delete(t.open, f.id)
		t.mu.Unlock()
		return context.Cause(ctx)
	}
}

// take removes the open form id and returns it, or nil when it is not open.
func (t *terminalForms) take(id string, check func(f *termForm) error) (*termForm, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.open[id]
	if f == nil {
		return nil, nil
	}
	if err := check(f); err != nil {
		return nil, err // the form stays open
	}
	delete(t.open, id)
	return f, nil
}

// answer gives answers to the open form id. It reports whether the form was
// open; answers that do not fit its questions are refused with an error
// wrapping interact.ErrInvalidAnswers, and leave it open.
func (t *terminalForms) answer(id string, answers interact.Answers) (bool, error) {
	f, err := t.take(id, func(f *termForm) error {
		if f.el != nil {
			return fmt.Errorf("%w: the form is a server's request for input", interact.ErrInvalidAnswers)
		}
		checked, err := interact.CheckAnswers(f.form.Questions, answers)
		answers = checked
		return err
	})
	if f == nil {
		return false, err
	}
	f.answers = answers
	close(f.done)
	return true, nil
}

// answerElicitation gives ans to the open request for input id, as answer
// does for a form.
func (t *terminalForms) answerElicitation(id string, ans interact.ElicitationAnswer) (bool, error) {
	f, err := t.take(id, func(f *termForm) error {
		if f.el == nil {
			return fmt.Errorf("%w: the form is a question form", interact.ErrInvalidAnswers)
		}
		checked, err := interact.CheckElicitationAnswer(*f.el, ans)
		ans = checked
		return err
	})
	if f == nil {
		return false, err
	}
	f.elAnswer = ans
	close(f.done)
	return true, nil
}

// cancelAll ends every open form: its call returns at once, as nobody
// answered it (the input ended).
func (t *terminalForms) cancelAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, f := range t.open {
		f.cancelled = true
		close(f.done)
		delete(t.open, id)
	}
	clear(t.byCall)
}
