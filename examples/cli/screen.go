package main

import (
	"context"
	"strings"
	"sync"

	"github.com/planround/planround/agent"
)

// screen keeps what the CLI writes to the terminal in order. The transcript
// (stdout) and the questions (stderr) share the screen, and they are written
// by different goroutines: a sub-agent's approval question by the
// sub-agent's run, inside its tool call, while the host's goroutine draws the
// chunks that run forwards. Left alone, the question could be written before
// the call it asks about was drawn, and the drawing then ran into the
// question's last line or erased it (the "\r\x1b[K" that replaces a call's
// start line), leaving the user at a cursor with no question.
//
// So a question is asked only once the approval_required chunk of its call
// was drawn (see shown), and one thing at a time owns the screen: drawing a
// chunk, a question from its first line until its answer was read, or a log
// record of -v.
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

	shownMu sync.Mutex
	// shown counts, by call (see callKey), the approval_required chunks
	// drawn whose question has not been asked yet; guarded by shownMu.
	shown map[string]int
	// drawn is closed, and replaced, when shown grows; guarded by shownMu.
	drawn chan struct{}
}

func newScreen(settle func()) *screen {
	return &screen{settle: settle, shown: map[string]int{}, drawn: make(chan struct{})}
}

// draw draws c with f, owning the screen, and notes an approval_required
// chunk as drawn.
func (s *screen) draw(c agent.Chunk, f func(agent.Chunk)) {
	s.mu.Lock()
	f(c)
	s.mu.Unlock()
	if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
		s.shownMu.Lock()
		s.shown[c.Parent+"\x00"+c.Tool.ID]++
		close(s.drawn)
		s.drawn = make(chan struct{})
		s.shownMu.Unlock()
	}
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

// awaitShown waits until the approval_required chunk of the call key was
// drawn, or ctx ends (the run is over: the chunk may never be drawn).
func (s *screen) awaitShown(ctx context.Context, key string) {
	for {
		s.shownMu.Lock()
		n, drawn := s.shown[key], s.drawn
		if n > 0 {
			if n == 1 {
				delete(s.shown, key)
			} else {
				s.shown[key] = n - 1
			}
		}
		s.shownMu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-drawn:
		case <-ctx.Done():
			return
		}
	}
}

// endTurn forgets the chunks drawn in a turn whose questions were never
// asked.
func (s *screen) endTurn() {
	s.shownMu.Lock()
	clear(s.shown)
	s.shownMu.Unlock()
}

// callKey names the call of req as its chunks do: the chunk's Parent (the
// ids of the sub-agent calls the run is nested in, outermost first, joined
// by "/"; empty for the host's own run) and the call's id.
func callKey(ctx context.Context, id string) string {
	var parents []string
	if ci, ok := agent.CallFromContext(ctx); ok {
		for p := &ci; p != nil; p = p.Parent {
			parents = append(parents, p.CallID)
		}
	}
	for i, j := 0, len(parents)-1; i < j; i, j = i+1, j-1 {
		parents[i], parents[j] = parents[j], parents[i]
	}
	return strings.Join(parents, "/") + "\x00" + id
}

// screenApprover asks the questions of the approver it wraps (the terminal
// approver) on the screen: a question only after its call was drawn, and on
// lines of its own that nothing is drawn into before it is answered.
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
	key := callKey(ctx, req.Call.ID)
	return agent.Pending(t.ApprovalID(), func(ctx context.Context) (d agent.Decision, err error) {
		a.screen.awaitShown(ctx, key)
		a.screen.own(func() { d, err = t.Wait(ctx) })
		return d, err
	}), nil
}
