package approval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strings"
	"sync"

	"github.com/planround/planround/agent"
)

// ReasonEndOfInput is the reason of the rejection a [Terminal] returns when
// its input has ended (EOF) before an answer. The rejection's cause is
// [agent.CauseApprovalFailed]: nobody could answer.
const ReasonEndOfInput = "rejected: no answer, the terminal's input ended"

// ErrTerminalClosed is returned by [Terminal.Request], and by the Wait of its
// tickets, after [Terminal.Close].
var ErrTerminalClosed = errors.New("approval: terminal closed")

// Terminal is an [agent.Approver] that asks a person at a terminal. For each
// call it writes the tool's name, its indented arguments, its hints
// ([HintLabels]) and the call's details (what changed in an MCP tool's
// definition, say) to out and reads one answer line from in:
//
//	y, yes           approve this call
//	n, no            reject it; the rest of the line, if any, is the reason
//	a, always        approve it and every later call of the same tool
//
// Other answers are asked again. "always" grants last for the Terminal's
// lifetime and come with [agent.ScopeAlways], so an [AllowList] wrapped
// around the Terminal remembers them as well; the later calls of the tool are
// approved at once, without an approval card, except a call that must be
// asked about ([agent.ToolCall.MustAsk]). When in reaches its end the
// call is rejected with [ReasonEndOfInput], as is every later call.
//
// Request returns a pending ticket without an approval id; the question is
// asked when the agent waits, after it has shown the approval_required
// chunk.
//
// # Concurrency and the reader goroutine
//
// Request and Wait are safe for concurrent use; prompts are shown one at a
// time. While a prompt waits for its answer Wait still returns promptly when
// ctx ends. To
// make that possible the Terminal reads in from one goroutine of its own,
// started by the first prompt. That goroutine ends when in returns an error
// (such as io.EOF), or, after [Terminal.Close], when its pending Read returns:
// Close closes in when in is an [io.Closer] (a pipe, os.Stdin), which ends the
// Read at once on most readers. A line typed while no prompt waits is kept
// for the next prompt. A host that reads the same input itself (a prompt
// loop) should hand its line reader to [NewTerminalFunc] instead.
type Terminal struct {
	in       io.Reader                                 // nil with NewTerminalFunc
	readLine func(ctx context.Context) (string, error) // the source of answers
	out      io.Writer

	turn      chan struct{} // holds a token while a prompt owns in and out
	lines     chan line     // from the reader goroutine, unbuffered
	closed    chan struct{} // closed by Close
	startOnce sync.Once
	closeOnce sync.Once
	// inErr is the error that ended the input; guarded by the turn token.
	inErr error

	mu     sync.Mutex
	always map[string]struct{} // guarded by mu: tools answered with "a"
}

type line struct {
	text string
	err  error
}

// NewTerminal returns a Terminal that reads answers from in and writes
// prompts to out, typically os.Stdin and os.Stderr.
func NewTerminal(in io.Reader, out io.Writer) *Terminal {
	t := &Terminal{
		in:     in,
		out:    out,
		turn:   make(chan struct{}, 1),
		lines:  make(chan line),
		closed: make(chan struct{}),
		always: make(map[string]struct{}),
	}
	t.readLine = t.readFromIn
	return t
}

// NewTerminalFunc returns a Terminal that reads each answer with readLine and
// writes prompts to out. It starts no goroutine of its own: use it when the
// host already owns the input, as a prompt loop that shares stdin with the
// approver does. readLine is called only while a prompt waits, one call at a
// time; it must return promptly with ctx.Err() when ctx ends, without
// consuming a line, and io.EOF when the input has ended. The line it returns
// may or may not end in a newline. Close does not interrupt a readLine in
// progress; it makes later questions return ErrTerminalClosed.
func NewTerminalFunc(readLine func(ctx context.Context) (string, error), out io.Writer) *Terminal {
	t := NewTerminal(nil, out)
	t.readLine = readLine
	return t
}

// Close stops the Terminal: waiting and later tickets return
// [ErrTerminalClosed]. It closes in when in is an [io.Closer] and returns the
// error of that Close. Close may be called more than once; later calls do
// nothing and return nil.
func (t *Terminal) Close() error {
	var err error
	t.closeOnce.Do(func() {
		close(t.closed)
		if c, ok := t.in.(io.Closer); ok {
			err = c.Close()
		}
	})
	return err
}

// readFromIn reads the next line of in through the reader goroutine, which
// it starts on first use.
func (t *Terminal) readFromIn(ctx context.Context) (string, error) {
	t.startOnce.Do(func() { go t.read() })
	select {
	case l := <-t.lines:
		return l.text, l.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.closed:
		return "", ErrTerminalClosed
	}
}

// read is the reader goroutine: it hands each line of in to the prompt that
// waits, and ends at the first error or when the Terminal is closed.
func (t *Terminal) read() {
	r := bufio.NewReader(t.in)
	for {
		s, err := r.ReadString('\n')
		if s != "" {
			select {
			case t.lines <- line{text: s}:
			case <-t.closed:
				return
			}
		}
		if err != nil {
			select {
			case t.lines <- line{err: err}:
			case <-t.closed:
			}
			return
		}
	}
}

// Request implements [agent.Approver]. A call of a tool answered "always"
// before is approved at once (a line on out says so); for any other call
// Request returns a pending ticket whose Wait asks the question. When ctx
// ends first Wait returns a rejection with [agent.CauseApprovalInterrupted]
// and ctx.Err(). A failed write to out or read from in is returned as an
// error.
func (t *Terminal) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	select {
	case <-t.closed:
		return agent.Ticket{}, ErrTerminalClosed
	default:
	}
	name := req.Call.Name
	if !req.Call.MustAsk && t.alwaysAllowed(name) {
		if _, err := fmt.Fprintf(t.out, "%s: approved (always)\n", name); err != nil {
			return agent.Ticket{}, fmt.Errorf("approval: terminal: %w", err)
		}
		return agent.Decided(agent.Decision{Approved: true, Scope: agent.ScopeAlways, By: terminalUser(), Via: ViaTerminal}), nil
	}
	return agent.Pending("", func(ctx context.Context) (agent.Decision, error) {
		d, err := t.ask(ctx, req)
		if d.By == "" && err == nil && d.Cause == "" {
			d.By, d.Via = terminalUser(), ViaTerminal // a person at the terminal
		}
		return d, err
	}), nil
}

// terminalUser is the principal of the person at the terminal: the
// operating system's name of the user the process runs as.
var terminalUser = sync.OnceValue(func() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "terminal-user"
})

// ask asks about req's call and waits for the answer.
func (t *Terminal) ask(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	name := req.Call.Name
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return cancelled(), ctx.Err()
	case <-t.closed:
		return agent.Decision{Reason: ErrTerminalClosed.Error()}, ErrTerminalClosed
	}
	defer func() { <-t.turn }()
	// Another prompt may have granted "always" while this one waited.
	if !req.Call.MustAsk && t.alwaysAllowed(name) {
		return agent.Decision{Approved: true, Scope: agent.ScopeAlways}, nil
	}
	if t.inErr != nil {
		return endOfInput(), nil
	}
	if _, err := io.WriteString(t.out, promptText(req)); err != nil {
		return agent.Decision{}, fmt.Errorf("approval: terminal: %w", err)
	}
	for {
		text, err := t.readLine(ctx)
		switch {
		case err == nil:
			// A line that was read is the answer, even if ctx ended
			// meanwhile: the caller decides what an answer after the end
			// means, and the line is not lost to the host.
		case ctx.Err() != nil:
			io.WriteString(t.out, "\n") //nolint:errcheck // best effort: end the prompt's line
			return cancelled(), ctx.Err()
		case errors.Is(err, ErrTerminalClosed):
			return agent.Decision{Reason: ErrTerminalClosed.Error()}, ErrTerminalClosed
		case err != nil:
			t.inErr = err
			if errors.Is(err, io.EOF) {
				io.WriteString(t.out, "\n") //nolint:errcheck // best effort
				return endOfInput(), nil
			}
			return agent.Decision{}, fmt.Errorf("approval: terminal: %w", err)
		}
		d, ok := parseAnswer(text)
		if !ok {
			if _, err := io.WriteString(t.out, "please answer y (approve), n (reject, optionally followed by a reason) or a (always approve this tool): "); err != nil {
				return agent.Decision{}, fmt.Errorf("approval: terminal: %w", err)
			}
			continue
		}
		if d.Scope == agent.ScopeAlways {
			t.mu.Lock()
			t.always[name] = struct{}{}
			t.mu.Unlock()
		}
		return d, nil
	}
}

// endOfInput is the rejection of a call nobody can answer any more.
func endOfInput() agent.Decision {
	return agent.Decision{Reason: ReasonEndOfInput, Cause: agent.CauseApprovalFailed}
}

func (t *Terminal) alwaysAllowed(tool string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.always[tool]
	return ok
}

// promptText is what the Terminal shows for req.
func promptText(req agent.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTool call %s wants to run", req.Call.Name)
	switch {
	case len(req.Call.Arguments) > 0:
		var ind bytes.Buffer
		if json.Indent(&ind, req.Call.Arguments, "  ", "  ") == nil {
			b.WriteString(" with:\n  ")
			ind.WriteTo(&b)
		} else {
			fmt.Fprintf(&b, " with:\n  %s", req.Call.Arguments)
		}
	case req.Call.ArgumentsRaw != "":
		fmt.Fprintf(&b, " with:\n  %s", req.Call.ArgumentsRaw)
	default:
		b.WriteString(" without arguments")
	}
	if h := HintLabels(req.Call.Hints); len(h) > 0 {
		fmt.Fprintf(&b, "\n  hints: %s", strings.Join(h, ", "))
	}
	for _, d := range req.Call.Details {
		fmt.Fprintf(&b, "\n  %s", d)
	}
	b.WriteString("\napprove [y] / reject [n] / always approve this tool [a]: ")
	return b.String()
}

// HintLabels returns the words an approval prompt or card shows for a
// call's hints: "read-only", "destructive", "idempotent", "open world",
// "closed world", and "untrusted hints" when no policy may act on them;
// nil for a call without hints.
func HintLabels(h *agent.ToolHints) []string {
	if h == nil {
		return nil
	}
	out := h.Labels()
	if !h.Trusted {
		out = append(out, "untrusted hints")
	}
	return out
}

// parseAnswer reads one answer line; ok is false when it is not an answer.
func parseAnswer(s string) (d agent.Decision, ok bool) {
	s = strings.TrimSpace(s)
	word, rest := s, ""
	if i := strings.IndexAny(s, " \t:,"); i >= 0 {
		word, rest = s[:i], s[i+1:]
	}
	word = strings.ToLower(word)
	switch word {
	case "y", "yes":
		return agent.Decision{Approved: true}, true
	case "a", "always":
		return agent.Decision{Approved: true, Scope: agent.ScopeAlways}, true
	case "n", "no":
		reason := strings.TrimSpace(strings.TrimLeft(rest, " \t:,"))
		if reason == "" {
			return agent.Decision{Reason: agent.CauseUser.DefaultReason()}, true
		}
		return agent.Decision{Reason: agent.CauseUser.DefaultReason() + ": " + reason}, true
	}
	return agent.Decision{}, false
}
