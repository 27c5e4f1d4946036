package memory

// For store authors: the functions a [Store] implementation calls inside its
// methods (the checks of its input, the id of a session created without
// one, copies of messages). MemStore calls them, and so do the stores in
// packages memory/sqlitestore and memory/pgstore, so that every store
// refuses the same input with the same error. The package documentation's
// "For store authors" says which method calls which; a program that only
// uses a store never calls them.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ValidateSession reports whether s may be created: its CreatedAt and
// UpdatedAt are zero or times a store can keep (years 1678 to 2262, the
// range of [time.Time.UnixNano]). A store calls it first in
// [Store.CreateSession], and then gives a session without an id
// [NewSessionID].
func ValidateSession(s Session) error {
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

// NewSessionID returns a random 128-bit id in hex. A store calls it in
// [Store.CreateSession] for a session created without an id, so that every
// store's generated ids look alike.
func NewSessionID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics on failure itself)
	return hex.EncodeToString(b[:])
}

// ValidateMessages reports whether msgs may be appended: each has a known
// role, no SummaryID (messages are archived by Summarize, never appended
// archived), an [Outcome] only on a tool message and one this version
// knows (or none), a Cause only with [OutcomeRejected], tool-call arguments
// that are empty or a JSON object (see [ValidArguments]), images only on a
// user message and each valid (see [ValidateImage]), and a CreatedAt a
// store can keep. A store calls it first in [Store.Append], before it
// writes anything, and then writes all the messages or none.
func ValidateMessages(msgs []Message) error {
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

// CloneMessages returns a deep copy of msgs, sharing no memory with it
// (tool calls, their arguments, images and their bytes are copied). A store
// that keeps messages in memory calls it in [Store.Append] on what it keeps
// and on what it returns, and in [Store.Messages] on what it returns, so
// that neither its caller nor it sees the other's changes.
func CloneMessages(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.clone()
	}
	return out
}

// ValidateSummary reports whether s may be stored: content that is not
// blank, a range with 0 < FirstID <= LastID, and a CreatedAt that is zero
// or a time a store can keep. A store calls it first in [Store.Summarize];
// whether the range holds active messages of the session is the store's to
// check after it.
func ValidateSummary(s Summary) error {
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

// ValidateOpenCall reports whether c may be saved: a stored message's id
// (positive), a call id, Arguments that are empty or a JSON object, and a
// State of at most [MaxCallState] bytes. A store calls it first in
// [CallLog.SaveCall], before it looks at the session.
func ValidateOpenCall(c OpenCall) error {
	switch {
	case c.MessageID <= 0:
		return fmt.Errorf("memory: open call %q: message id %d, want a stored message's", c.CallID, c.MessageID)
	case c.CallID == "":
		return fmt.Errorf("memory: open call of message %d without a call id", c.MessageID)
	case len(c.Arguments) > 0 && !IsObject(c.Arguments):
		return fmt.Errorf("memory: open call %q: arguments are not a JSON object: %.40q", c.CallID, c.Arguments)
	case len(c.State) > MaxCallState:
		return fmt.Errorf("memory: open call %q: state of %d bytes, at most %d", c.CallID, len(c.State), MaxCallState)
	}
	return nil
}

// ValidateAppendCalls reports whether calls and msgs may be appended
// together: msgs are valid ([ValidateMessages]), the last of them is an
// assistant message, and each of calls names one of its tool calls, none
// twice, without Arguments and with a State of at most [MaxCallState]
// bytes. A store calls it first in [CallLog.AppendCalls], instead of
// ValidateMessages.
func ValidateAppendCalls(calls []OpenCall, msgs []Message) error {
	if err := ValidateMessages(msgs); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return errors.New("no messages: the calls' assistant message comes last")
	}
	last := msgs[len(msgs)-1]
	if last.Role != RoleAssistant {
		return fmt.Errorf("the last message is a %s message, want the calls' assistant message", last.Role)
	}
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if c.CallID == "" || seen[c.CallID] || !slices.ContainsFunc(last.ToolCalls, func(tc ToolCall) bool { return tc.ID == c.CallID }) {
			return fmt.Errorf("open call %q: want each of the last message's tool call ids once", c.CallID)
		}
		if len(c.Arguments) > 0 {
			return fmt.Errorf("open call %q: arguments in a record of AppendCalls: the appended message holds them", c.CallID)
		}
		if len(c.State) > MaxCallState {
			return fmt.Errorf("open call %q: state of %d bytes, at most %d", c.CallID, len(c.State), MaxCallState)
		}
		seen[c.CallID] = true
	}
	return nil
}

// ValidateApproval reports whether a may be created: an id, a session, a
// call id and a tool name; a Kind that is empty, [KindApproval] or
// [KindForm]; a Key of at most [MaxApprovalKey] bytes and a Digest of at
// most 100. A record may be created decided. A store calls it first in
// [ApprovalStore.CreateApproval].
func ValidateApproval(a Approval) error {
	switch {
	case a.ID == "":
		return fmt.Errorf("memory: approval without an id")
	case a.SessionID == "":
		return fmt.Errorf("memory: approval %q without a session", a.ID)
	case a.CallID == "" || a.Tool == "":
		return fmt.Errorf("memory: approval %q without its call id or tool", a.ID)
	case a.Kind != "" && a.Kind != KindApproval && a.Kind != KindForm:
		return fmt.Errorf("memory: approval %q of kind %.40q, want %q or %q", a.ID, a.Kind, KindApproval, KindForm)
	case len(a.Key) > MaxApprovalKey:
		return fmt.Errorf("memory: approval %q: key of %d bytes, more than %d", a.ID, len(a.Key), MaxApprovalKey)
	case len(a.Digest) > maxApprovalDigest:
		return fmt.Errorf("memory: approval %q: digest of %d bytes, more than %d", a.ID, len(a.Digest), maxApprovalDigest)
	}
	return nil
}

// ValidateNote reports whether a note may be sent: a channel name and a
// payload of 1 to [MaxNotifyPayload] bytes. A store calls it first in
// [Notifier.Notify].
func ValidateNote(channel, payload string) error {
	switch {
	case channel == "":
		return fmt.Errorf("memory: notify: empty channel name")
	case payload == "":
		return fmt.Errorf("memory: notify %q: empty payload", channel)
	case len(payload) > MaxNotifyPayload:
		return fmt.Errorf("memory: notify %q: payload of %d bytes, more than %d", channel, len(payload), MaxNotifyPayload)
	}
	return nil
}

// ValidateEvents reports whether evs may be appended to a session's log,
// whatever the log holds: their Seq are consecutive and at least 1, each
// Kind is valid (see [Event]), each Turn is between 0 and the event's own
// Seq, and each CreatedAt is zero or a time a store can keep. A store
// calls it first in [EventLog.AppendEvents], then checks that evs continue
// the log: an error ValidateEvents returns does not wrap [ErrEventSeq].
func ValidateEvents(evs []Event) error {
	for i, ev := range evs {
		switch {
		case ev.Seq < 1:
			return fmt.Errorf("event %d: seq %d, want 1 or more", i, ev.Seq)
		case i > 0 && ev.Seq != evs[i-1].Seq+1:
			return fmt.Errorf("event %d: seq %d after %d, want consecutive numbers", i, ev.Seq, evs[i-1].Seq)
		case ev.Turn < 0 || ev.Turn > ev.Seq:
			return fmt.Errorf("event %d (seq %d): turn %d, want 0 to the event's own seq", i, ev.Seq, ev.Turn)
		}
		if err := checkEventKind(ev.Kind); err != nil {
			return fmt.Errorf("event %d (seq %d): %w", i, ev.Seq, err)
		}
		if !ev.CreatedAt.IsZero() {
			if err := checkTime(fmt.Sprintf("event %d (seq %d): created_at", i, ev.Seq), ev.CreatedAt); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateKV reports why namespace, key and value (nil for a method
// without one) cannot be stored in a [KV], or nil when they can: namespace
// and key are UTF-8 text without NUL bytes, of 1 to [MaxKVNamespace] and
// [MaxKVKey] bytes, and value holds at most [MaxKVValue] bytes. A store
// calls it first in every method of [KV], with a nil value in
// [KV.GetValue] and [KV.DeleteValue].
func ValidateKV(namespace, key string, value []byte) error {
	check := func(what, s string, max int) error {
		switch {
		case s == "":
			return fmt.Errorf("memory: empty %s", what)
		case len(s) > max:
			return fmt.Errorf("memory: %s of %d bytes, more than %d", what, len(s), max)
		case !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0:
			return fmt.Errorf("memory: %s %.40q is not UTF-8 text without NUL bytes", what, s)
		}
		return nil
	}
	if err := check("namespace", namespace, MaxKVNamespace); err != nil {
		return err
	}
	if err := check("key", key, MaxKVKey); err != nil {
		return err
	}
	if len(value) > MaxKVValue {
		return fmt.Errorf("memory: value of %d bytes, more than %d", len(value), MaxKVValue)
	}
	return nil
}

// ValidateAPICall reports whether c may be logged: a known Purpose and
// Status, an Error only with [APICallError], a Request that is empty or
// JSON, durations and Round not negative, and a Started that is zero or a
// time a store can keep. A store calls it first in
// [APILog.AppendAPICall].
func ValidateAPICall(c APICall) error {
	switch c.Purpose {
	case PurposePlanning, PurposeContinuation, PurposeToolRound, PurposeSummary, PurposeSubAgent:
	default:
		return fmt.Errorf("api call: unknown purpose %q", c.Purpose)
	}
	switch {
	case c.Status != APICallOK && c.Status != APICallError:
		return fmt.Errorf("api call: unknown status %q", c.Status)
	case c.Error != "" && c.Status != APICallError:
		return errors.New("api call: an error with status ok")
	case len(c.Request) > 0 && !json.Valid(c.Request):
		return errors.New("api call: the request is not JSON")
	case c.FirstToken < 0 || c.Latency < 0:
		return fmt.Errorf("api call: negative duration (first token %v, latency %v)", c.FirstToken, c.Latency)
	case c.Round < 0:
		return fmt.Errorf("api call: round %d", c.Round)
	}
	if !c.Started.IsZero() {
		return checkTime("api call: started", c.Started)
	}
	return nil
}
