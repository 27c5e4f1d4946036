package main

import (
	"bufio"
	"context"
	"io"
	"sync"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// lineSource is the one reader of stdin. The prompt loop and the terminal
// approver both read lines from it, so they never fight over the input: the
// loop takes lines with next, the approver through a gatedReader that hands
// it a line only while it is asking a question. A line typed while nobody
// asks is kept for whichever asks first.
type lineSource struct {
	r     *bufio.Reader
	start sync.Once
	lines chan string   // unbuffered: a line is read ahead, never more
	eof   chan struct{} // closed when the input ended; err says why
	err   error         // written before eof is closed
	stop  chan struct{} // closed by close: the reader goroutine gives up its line

	mu      sync.Mutex    // guards gates, asking, pending and changed
	gates   int           // approvals in progress
	asking  bool          // the approver wrote a question and waits for its line
	pending []string      // lines given back, read before new ones
	changed chan struct{} // closed (and replaced) whenever gates or asking change
}

func newLineSource(r io.Reader) *lineSource {
	return &lineSource{
		r:       bufio.NewReader(r),
		lines:   make(chan string),
		eof:     make(chan struct{}),
		stop:    make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// read is the reader goroutine, started on first use so that a run that
// never asks reads nothing from stdin. It ends at the end of the input or,
// once close was called, as soon as its pending read returns (a read from a
// terminal cannot be interrupted; at process exit that does not matter).
func (s *lineSource) read() {
	for {
		line, err := s.r.ReadString('\n')
		if line != "" {
			select {
			case s.lines <- line:
			case <-s.stop:
				return
			}
		}
		if err != nil {
			s.err = err
			close(s.eof)
			return
		}
	}
}

func (s *lineSource) startReading() { s.start.Do(func() { go s.read() }) }

// close stops the reader goroutine once its pending read returns.
func (s *lineSource) close() { close(s.stop) }

// next returns the next line without its line ending. At the end of the
// input it returns the read error (io.EOF); when ctx ends, ctx.Err().
func (s *lineSource) next(ctx context.Context) (string, error) {
	if line, ok := s.takePending(); ok {
		return trimEOL(line), nil
	}
	s.startReading()
	select {
	case line := <-s.lines:
		return trimEOL(line), nil
	case <-s.eof:
		// Lines are handed over before eof is closed, so none is left.
		return "", s.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func trimEOL(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	if n := len(s); n > 0 && s[n-1] == '\r' {
		s = s[:n-1]
	}
	return s
}

func (s *lineSource) takePending() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return "", false
	}
	line := s.pending[0]
	s.pending = s.pending[1:]
	return line, true
}

// notify wakes a gatedReader waiting for a change; s.mu is held.
func (s *lineSource) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// gate opens (d = 1) or closes (d = -1) the input for the approver. Once
// the last approval in progress ended nobody is asking any more.
func (s *lineSource) gate(d int) {
	s.mu.Lock()
	s.gates += d
	if s.gates == 0 {
		s.asking = false
	}
	s.notify()
	s.mu.Unlock()
}

// ask records that the approver now waits for one line.
func (s *lineSource) ask() {
	s.mu.Lock()
	if s.gates > 0 {
		s.asking = true
		s.notify()
	}
	s.mu.Unlock()
}

func (s *lineSource) askState() (asking bool, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asking, s.changed
}

// answered hands line to the approver if it still asks, and reports whether
// it did; otherwise the line is kept for whoever reads next.
func (s *lineSource) answered(line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.asking {
		s.pending = append(s.pending, line)
		return false
	}
	s.asking = false
	return true
}

// gatedReader is the io.Reader the terminal approver reads. The Terminal
// reads ahead from a goroutine of its own, so the reader must not give it a
// line just because it reads: it delivers one line per question, and only
// while the question waits. A question is a write of the approver that does
// not end with a newline ("approve [y] / reject [n] ...: ", "please answer
// ...: "), seen by questionWriter. Closing the reader (approval.Terminal.Close
// does) ends a blocked Read with io.EOF.
type gatedReader struct {
	src       *lineSource
	buf       string // rest of a line that did not fit into p
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *lineSource) gated() *gatedReader {
	return &gatedReader{src: s, closed: make(chan struct{})}
}

// Read is called by the terminal's reader goroutine only, never
// concurrently.
func (g *gatedReader) Read(p []byte) (int, error) {
	for g.buf == "" {
		asking, changed := g.src.askState()
		if !asking {
			select {
			case <-changed:
				continue
			case <-g.closed:
				return 0, io.EOF
			}
		}
		if line, ok := g.src.takePending(); ok {
			if g.src.answered(line) {
				g.buf = line
			}
			continue
		}
		g.src.startReading()
		select {
		case line := <-g.src.lines:
			// The question may have ended meanwhile (Ctrl-C): then the
			// line goes back for the prompt loop.
			if g.src.answered(line) {
				g.buf = line
			}
		case <-g.src.eof:
			return 0, g.src.err
		case <-changed:
		case <-g.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func (g *gatedReader) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return nil
}

// questionWriter is the approver's output: it tells the line source when a
// question was asked (a write that leaves the cursor on its line).
type questionWriter struct {
	w   io.Writer
	src *lineSource
}

func (q questionWriter) Write(p []byte) (int, error) {
	n, err := q.w.Write(p)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		q.src.ask()
	}
	return n, err
}

// terminalApprover asks the person at the terminal, opening the shared
// input for the time of each question.
type terminalApprover struct {
	term *approval.Terminal
	src  *lineSource
}

func (a terminalApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	a.src.gate(1)
	defer a.src.gate(-1)
	return a.term.Approve(ctx, req)
}
