// Package suspend holds the sentinel that suspends a run, so that the
// plumbing which waits for a person (internal/waiting, under approval and
// interact) can return it and recognise it without importing agent.
// agent.ErrSuspended is this very value: errors.Is treats the two as one.
//
// The package imports nothing of the module.
package suspend

import "errors"

// ErrSuspended is agent.ErrSuspended; agent's doc comment says what it
// means to a run.
var ErrSuspended = errors.New("agent: run suspended at a pending approval")
