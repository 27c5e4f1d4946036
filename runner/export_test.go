package runner

// StopsOnStart reports whether an Interrupt found the session's run of
// this process looking at it without a turn (a resume, a sweep), and
// asked it to stop should it start one: what a test waits for instead of
// sleeping.
func StopsOnStart(r *Runner, sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ss := r.sessions[sessionID]
	return ss != nil && ss.run != nil && ss.run.stopOnStart
}
