package memory

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// validRole reports whether r is one of the four chat roles.
func validRole(r Role) bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// minTime and maxTime bound the times a store can keep: the range of
// [time.Time.UnixNano].
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// checkTime reports an error for a time outside what a store can keep.
func checkTime(what string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("%s %v is out of range (years 1678 to 2262)", what, t)
	}
	return nil
}

// normTime returns t in UTC without a monotonic reading, or now when t is
// zero.
func normTime(t, now time.Time) time.Time {
	if t.IsZero() {
		return now.UTC()
	}
	return t.UTC()
}

// checkOutcome reports whether m's outcome and cause are valid: an outcome
// only on a tool message, one of the known ones, and a cause only on a
// rejected call.
func checkOutcome(m Message) error {
	switch {
	case m.Outcome != "" && m.Role != RoleTool:
		return fmt.Errorf("outcome %q on a %s message: only tool messages say how their call ended", m.Outcome, m.Role)
	case m.Outcome != "" && m.Outcome != OutcomeResult && m.Outcome != OutcomeRejected:
		return fmt.Errorf("unknown outcome %.40q, want %q, %q or none (unknown)", m.Outcome, OutcomeResult, OutcomeRejected)
	case m.Cause != "" && m.Outcome != OutcomeRejected:
		return fmt.Errorf("cause %.40q without the outcome %q: only a rejected call has a cause", m.Cause, OutcomeRejected)
	}
	return nil
}

// checkImages reports whether m's images are valid and on a user message.
func checkImages(m Message) error {
	if len(m.Images) > 0 && m.Role != RoleUser {
		return fmt.Errorf("images on a %s message: only user messages carry images", m.Role)
	}
	for k, img := range m.Images {
		if err := ValidateImage(img); err != nil {
			return fmt.Errorf("image %d: %w", k, err)
		}
	}
	return nil
}

// clone returns a copy of m that shares no memory with it.
func (m Message) clone() Message {
	if m.ToolCalls != nil {
		m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		for i, c := range m.ToolCalls {
			m.ToolCalls[i].Arguments = bytes.Clone(c.Arguments)
		}
	}
	m.Images = cloneImages(m.Images)
	return m
}
