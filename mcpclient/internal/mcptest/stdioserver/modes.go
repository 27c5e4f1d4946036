package main

import (
	"bytes"
	"io"
	"sync"
)

// garbage is what -mode=garbage-before and garbage-after write: lines that
// are not messages for the client, each a different kind of wrong.
var garbage = []string{
	"stdioserver: this line is not JSON",
	`[1, 2, 3]`,
	`{"hello": "this object is not JSON-RPC"}`,
	`{"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}`,
	`{"jsonrpc": "2.0", "method": `,
}

// writeGarbage writes the garbage lines to w.
func writeGarbage(w io.Writer) error {
	for _, line := range garbage {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// flood writes one line that never ends, until writing fails.
func flood(w io.Writer) error {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
}

// afterFirstLine passes writes through to w, and once a whole line has
// been written it calls then before each later write, or, with at once,
// right after that first line (then may never return). mcp-go writes each
// message as one line in one Write.
type afterFirstLine struct {
	mu     sync.Mutex // guards seen and serialises the writes to w
	w      io.Writer
	then   func(io.Writer) error
	atOnce bool
	seen   bool // a whole line was written
}

func (a *afterFirstLine) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen {
		if err := a.then(a.w); err != nil {
			return 0, err
		}
	}
	n, err := a.w.Write(p)
	if err == nil && !a.seen && bytes.HasSuffix(p, []byte("\n")) {
		a.seen = true
		if a.atOnce {
			err = a.then(a.w)
		}
	}
	return n, err
}
