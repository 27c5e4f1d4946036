// Package drive carries, in a run's context, what the process that drives
// a session's run knows and the agent must ask before it acts: whether the
// process still holds the session (its lease). The runner package puts a
// guard in the context of every run it drives; the agent asks it before a
// tool starts, so that a process that lost the session never runs a call
// that the process which took it over may run too.
package drive

import "context"

type guardKey struct{}

// WithGuard returns ctx carrying held, which reports whether this process
// still drives the session; it may renew what it checks (a lease) and is
// called from the run's goroutine, before each tool starts.
func WithGuard(ctx context.Context, held func(ctx context.Context) bool) context.Context {
	return context.WithValue(ctx, guardKey{}, held)
}

// Held reports whether the process still drives the session of the run
// whose context is ctx: true when ctx carries no guard.
func Held(ctx context.Context) bool {
	held, _ := ctx.Value(guardKey{}).(func(context.Context) bool)
	return held == nil || held(ctx)
}
