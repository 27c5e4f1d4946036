package approval

import (
	"context"
	"slices"
	"sync"

	"github.com/planround/planround/agent"
)

// AllowList remembers which tools may run without asking: tools allowed
// always, and tools allowed for the rest of one session.
//
// Grants come from the host ([AllowList.Allow], [AllowList.AllowInSession])
// or from decisions: the Approver returned by [AllowList.Wrap] records the
// tool of every approval whose Scope is [agent.ScopeSession] or
// [agent.ScopeAlways].
//
// Session grants live until [AllowList.ForgetSession]; a host calls it when a
// session ends. The zero AllowList is not usable; use [NewAllowList]. All
// methods are safe for concurrent use.
type AllowList struct {
	mu       sync.RWMutex
	always   map[string]struct{}            // guarded by mu: tool names
	sessions map[string]map[string]struct{} // guarded by mu: session id -> tool names
}

// NewAllowList returns an AllowList that always allows the named tools.
func NewAllowList(tools ...string) *AllowList {
	return &AllowList{always: toSet(tools), sessions: make(map[string]map[string]struct{})}
}

// Allow allows tool from now on, in every session.
func (l *AllowList) Allow(tool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.always[tool] = struct{}{}
}

// AllowInSession allows tool for the rest of session sessionID. An empty
// sessionID is a session of its own, shared by every run without one.
func (l *AllowList) AllowInSession(sessionID, tool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[sessionID]
	if s == nil {
		s = make(map[string]struct{})
		l.sessions[sessionID] = s
	}
	s[tool] = struct{}{}
}

// Revoke removes the always-grant of tool and its grants in every session.
func (l *AllowList) Revoke(tool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.always, tool)
	for id, s := range l.sessions {
		delete(s, tool)
		if len(s) == 0 {
			delete(l.sessions, id)
		}
	}
}

// ForgetSession drops the grants of session sessionID.
func (l *AllowList) ForgetSession(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.sessions, sessionID)
}

// Allowed reports whether tool may run in session sessionID without asking.
func (l *AllowList) Allowed(sessionID, tool string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if _, ok := l.always[tool]; ok {
		return true
	}
	_, ok := l.sessions[sessionID][tool]
	return ok
}

// Tools returns the tools allowed in session sessionID, sorted.
func (l *AllowList) Tools(sessionID string) []string {
	l.mu.RLock()
	names := make([]string, 0, len(l.always)+len(l.sessions[sessionID]))
	for n := range l.always {
		names = append(names, n)
	}
	for n := range l.sessions[sessionID] {
		if _, dup := l.always[n]; !dup {
			names = append(names, n)
		}
	}
	l.mu.RUnlock()
	slices.Sort(names)
	return names
}

// Policy returns a [Policy] that approves the calls the list allows and
// abstains on the others.
func (l *AllowList) Policy() Policy {
	return func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, bool) {
		if l.Allowed(req.SessionID, req.Call.Name) {
			return agent.Decision{Approved: true, By: "policy:allowlist", Via: ViaPolicy}, true
		}
		return agent.Decision{}, false
	}
}

// Record remembers the grant a decision carries: an approval with
// [agent.ScopeSession] allows req's tool in req's session, one with
// [agent.ScopeAlways] allows it always. Other decisions change nothing.
func (l *AllowList) Record(req agent.ApprovalRequest, d agent.Decision) {
	if !d.Approved {
		return
	}
	switch d.Scope {
	case agent.ScopeSession:
		l.AllowInSession(req.SessionID, req.Call.Name)
	case agent.ScopeAlways:
		l.Allow(req.Call.Name)
	}
}

// Wrap returns an [agent.Approver] that approves the calls the list allows
// at once (no approval card) and asks next about the others, recording the
// grants of next's decisions (see [AllowList.Record]). It is
// [Chain](next, l.Policy()) plus the recording.
func (l *AllowList) Wrap(next agent.Approver) agent.Approver {
	return &chain{next: next, policies: []Policy{l.Policy()}, after: l.Record}
}
