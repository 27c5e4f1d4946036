//go:build !unix

package main

// freeze cannot stop the process where there are no Unix signals: the call
// only waits until it is cancelled.
func freeze() {}
