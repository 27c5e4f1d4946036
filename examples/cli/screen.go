package main

import (
	"context"
	"sync"

	"github.com/planround/planround/agent"
)

// screen keeps what the CLI writes to the terminal in order. The transcript
// (stdout) and the questions (stderr) share the screen, and they are written
// by different goroutines: a sub-agent's approval question by the
// sub-agent's run, inside its tool call, while the host's goroutine draws the
// chunks that run forwards. One thing at a time owns the screen: drawing a
// chunk, a question from its first line until its answer was read, or a log
// record of -v. A question never comes before the call it asks about: the
// agent waits for an approval only after the host has handled the call's
// approval_required chunk, a sub-agent's too.
type screen struct {
	// mu is held while a chunk is drawn, while a question is on screen and
	// while a log record is written. Nothing that holds it waits for the
	// host's goroutine, which draws the chunks (a question waits only for
	// its answer or its ctx), and nothing that holds it logs through
	// cfg.Logger: the renderer, the terminal approver and the forms' code
	// do not.
	mu sync.Mutex
	// settle ends the transcript's unfinished line (streamed text, a call's
	// start line) before a question starts; called with mu held.
	settle func()
}

func newScreen(settle func()) *screen { return &screen{settle: settle} }

// draw draws c with f, owning the screen.
func (s *screen) draw(c agent.Chunk, f func(agent.Chunk)) {
	s.mu.Lock()
	f(c)
	s.mu.Unlock()
}

// own runs f owning the screen, after ending the transcript's unfinished
// line: f writes on lines of its own (a question and the wait for its
// answer, a log record), and nothing else is written meanwhile.
func (s *screen) own(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	f()
}

// screenApprover asks the questions of the approver it wraps (the terminal
// approver) on the screen, on lines of its own that nothing is drawn into
// before it is answered.
type screenApprover struct {
	approver agent.Approver
	screen   *screen
}

func (a screenApprover) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	var (
		t   agent.Ticket
		err error
	)
	// The terminal approver says here when it approves at once ("approved
	// (always)"): a line of its own too.
	a.screen.own(func() { t, err = a.approver.Request(ctx, req) })
	if err != nil {
		return t, err
	}
	if _, decided := t.Decision(); decided {
		return t, nil
	}
	return agent.Pending(t.ApprovalID(), func(ctx context.Context) (d agent.Decision, err error) {
		a.screen.own(func() { d, err = t.Wait(ctx) })
		return d, err
	}), nil
}
