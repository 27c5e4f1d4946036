package interact

import (
	"context"
	"errors"
	"fmt"
)

// Asker asks a person, for the tools of this package and of mcpclient: it
// shows ask_user_question's forms and MCP servers' requests for input to
// the user of the call running in its context, and waits for the answers.
// The tools find it in the call's context ([WithAsker]): a runner.Runner
// puts its own in the context of every run it drives; a host that runs
// agent.Run itself (a terminal) puts one of its own in the context it
// passes. A call whose context has none fails with an error
// wrapping [ErrNoAsker], which the model reads.
//
// Each method learns the call it serves from its context
// (agent.CallFromContext): a form belongs to the call's session and is
// answered there only.
type Asker interface {
	// OpenForm registers req, questions checked, as the form of the call
	// running in ctx, before it is shown, and returns it as the front end
	// shows it (its FormID set): ask_user_question's side message. A
	// resumed turn's call (the same durable key) gets the form it asked
	// before, with the same id. When ctx ends before the call waited for
	// the form, the form is cancelled, unless ctx ended to suspend the run.
	OpenForm(ctx context.Context, req FormRequest) (FormRequest, error)
	// AwaitForm waits for the answers to the form of the call running in
	// ctx: the one OpenForm registered for it, or req, opened now when the
	// call has none (its side message failed). It returns the form as it
	// was shown and its answers, which fit its questions.
	AwaitForm(ctx context.Context, req FormRequest) (FormRequest, Answers, error)
	// Elicit shows req, a server's request for input made during the call
	// running in ctx, and waits for the answer. It shows what
	// [PrepareElicitation] returns, and checks the answer it takes with
	// [CheckElicitationAnswer].
	Elicit(ctx context.Context, req ElicitationRequest) (ElicitationAnswer, error)
}

// ErrNoAsker is wrapped by the error of a tool that asks a person in a run
// whose context has no [Asker]: the host neither drives the run with a
// runner nor set one with [WithAsker].
var ErrNoAsker = errors.New("interact: no person can be asked: the run's context has no asker (drive the run with a runner.Runner, or set one with interact.WithAsker)")

type askerKey struct{}

// WithAsker returns ctx carrying a, the Asker the tools of the runs and
// calls of ctx ask the person through. A nil a removes the one ctx carries.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerFrom returns the Asker ctx carries, and false when it carries none.
func AskerFrom(ctx context.Context) (Asker, bool) {
	a, ok := ctx.Value(askerKey{}).(Asker)
	return a, ok && a != nil
}

// askerOf returns the Asker of ctx, or an error wrapping ErrNoAsker that
// names the tool that needed one.
func askerOf(ctx context.Context, tool string) (Asker, error) {
	a, ok := AskerFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", tool, ErrNoAsker)
	}
	return a, nil
}
