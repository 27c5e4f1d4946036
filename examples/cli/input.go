package main

import (
	"bufio"
	"context"
	"io"
	"sync"
)

// lineSource is the one reader of stdin. The prompt loop and the terminal
// approver (approval.NewTerminalFunc) both take lines with next, each only
// while it waits for one, so they never fight over the input. A line typed
// while nobody asks is kept (read ahead, one line) for whichever asks first.
type lineSource struct {
	r     *bufio.Reader
	start sync.Once
	lines chan string   // unbuffered: a line is read ahead, never more
	eof   chan struct{} // closed when the input ended; err says why
	err   error         // written before eof is closed
	stop  chan struct{} // closed by close: the reader goroutine gives up its line
}

func newLineSource(r io.Reader) *lineSource {
	return &lineSource{
		r:     bufio.NewReader(r),
		lines: make(chan string),
		eof:   make(chan struct{}),
		stop:  make(chan struct{}),
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
