package memory

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
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

// validateMessages implements storekit.ValidateMessages: what
// [Store.Append] refuses.
func validateMessages(msgs []Message) error {
	for i, m := range msgs {
		if !validRole(m.Role) {
			return fmt.Errorf("message %d: invalid role %q", i, m.Role)
		}
		if m.SummaryID != 0 {
			return fmt.Errorf("message %d: SummaryID is set; messages are archived by Summarize, not appended archived", i)
		}
		for k, c := range m.ToolCalls {
			if len(c.Arguments) > 0 && !IsObject(c.Arguments) {
				return fmt.Errorf("message %d: tool call %d (%q): arguments are not a JSON object (ValidArguments makes them one): %.40q", i, k, c.ID, c.Arguments)
			}
		}
		if err := checkOutcome(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if err := checkImages(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if err := checkTime(fmt.Sprintf("message %d: created_at", i), m.CreatedAt); !m.CreatedAt.IsZero() && err != nil {
			return err
		}
	}
	return nil
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

// validateSummary implements storekit.ValidateSummary: what
// [Store.Summarize] refuses before it looks at the session.
func validateSummary(s Summary) error {
	if strings.TrimSpace(s.Content) == "" {
		return errors.New("empty summary content")
	}
	if s.FirstID <= 0 || s.LastID < s.FirstID {
		return fmt.Errorf("invalid message range [%d, %d]", s.FirstID, s.LastID)
	}
	if !s.CreatedAt.IsZero() {
		return checkTime("created_at", s.CreatedAt)
	}
	return nil
}

// validateSession implements storekit.ValidateSession: what
// [Store.CreateSession] refuses.
func validateSession(s Session) error {
	for _, t := range []struct {
		what string
		t    time.Time
	}{{"created_at", s.CreatedAt}, {"updated_at", s.UpdatedAt}} {
		if !t.t.IsZero() {
			if err := checkTime(t.what, t.t); err != nil {
				return err
			}
		}
	}
	return nil
}

// newSessionID implements storekit.NewSessionID: a random 128-bit id in
// hex.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics on failure itself)
	return hex.EncodeToString(b[:])
}

// cloneMessages implements storekit.CloneMessages: a deep copy of msgs,
// sharing no memory with it.
func cloneMessages(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.clone()
	}
	return out
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
