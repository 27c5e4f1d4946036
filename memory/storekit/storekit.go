package storekit

import "github.com/planround/planround/memory"

// ValidateSession reports whether s may be passed to
// [memory.Store.CreateSession]: its CreatedAt and UpdatedAt are zero or
// times a store can keep (years 1678 to 2262, the range of
// [time.Time.UnixNano]).
func ValidateSession(s memory.Session) error { return memory.ValidateSession(s) }

// NewSessionID returns a random 128-bit id in hex, for a session created
// without an id.
func NewSessionID() string { return memory.NewSessionID() }

// ValidateMessages reports whether msgs may be appended: each has a known
// role, no SummaryID (messages are archived by Summarize, never appended
// archived), a [memory.Outcome] only on a tool message and one this
// version knows (or none), a Cause only with [memory.OutcomeRejected],
// tool-call arguments that are empty or a JSON object (see
// [memory.ValidArguments]), images only on a user message and each valid
// (see [memory.ValidateImage]), and a CreatedAt a store can keep. A store
// calls it first in Append.
func ValidateMessages(msgs []memory.Message) error { return memory.ValidateMessages(msgs) }

// CloneMessages returns a deep copy of msgs, sharing no memory with it
// (tool calls, their arguments, images and their bytes are copied), for a
// store that returns copies of what it keeps.
func CloneMessages(msgs []memory.Message) []memory.Message { return memory.CloneMessages(msgs) }

// ValidateSummary reports whether s may be passed to
// [memory.Store.Summarize]: content that is not blank, a range with
// 0 < FirstID <= LastID, and a CreatedAt that is zero or a time a store can
// keep. Whether the range holds active messages of the session is the
// store's to check.
func ValidateSummary(s memory.Summary) error { return memory.ValidateSummary(s) }

// ValidateOpenCall reports whether c may be passed to
// [memory.CallLog.SaveCall]: a stored message's id (positive), a call id,
// Arguments that are empty or a JSON object, and a State of at most
// [memory.MaxCallState] bytes.
func ValidateOpenCall(c memory.OpenCall) error { return memory.ValidateOpenCall(c) }

// ValidateAppendCalls reports whether calls and msgs may be passed to
// [memory.CallLog.AppendCalls]: msgs are valid ([ValidateMessages]), the
// last of them is an assistant message, and each of calls names one of its
// tool calls, none twice, without Arguments and with a State of at most
// [memory.MaxCallState] bytes.
func ValidateAppendCalls(calls []memory.OpenCall, msgs []memory.Message) error {
	return memory.ValidateAppendCalls(calls, msgs)
}

// ValidateApproval reports whether a may be passed to
// [memory.ApprovalStore.CreateApproval]: an id, a session, a call id and a
// tool name; a Kind that is empty, [memory.KindApproval] or
// [memory.KindForm]; a Key of at most [memory.MaxApprovalKey] bytes and a
// Digest of at most 100. A record may be created decided.
func ValidateApproval(a memory.Approval) error { return memory.ValidateApproval(a) }

// ValidateNote reports whether a note may be passed to
// [memory.Notifier.Notify]: a channel name and a payload of 1 to
// [memory.MaxNotifyPayload] bytes.
func ValidateNote(channel, payload string) error { return memory.ValidateNote(channel, payload) }

// ValidateEvents reports whether evs may be passed to
// [memory.EventLog.AppendEvents], whatever the log holds: their Seq are
// consecutive and at least 1, each Kind is valid (see [memory.Event]), each
// Turn is between 0 and the event's own Seq, and each CreatedAt is zero or
// a time a store can keep. An error it returns does not wrap
// [memory.ErrEventSeq]: whether evs continue the log is the store's to
// check.
func ValidateEvents(evs []memory.Event) error { return memory.ValidateEvents(evs) }

// ValidateKV reports why namespace, key and value (nil for a method
// without one) cannot be stored in a [memory.KV], or nil when they can:
// namespace and key are UTF-8 text without NUL bytes, of 1 to
// [memory.MaxKVNamespace] and [memory.MaxKVKey] bytes, and value holds at
// most [memory.MaxKVValue] bytes.
func ValidateKV(namespace, key string, value []byte) error {
	return memory.ValidateKV(namespace, key, value)
}

// ValidateAPICall reports whether c may be passed to
// [memory.APILog.AppendAPICall]: a known Purpose and Status, an Error only
// with [memory.APICallError], a Request that is empty or JSON, durations
// and Round not negative, and a Started that is zero or a time a store can
// keep.
func ValidateAPICall(c memory.APICall) error { return memory.ValidateAPICall(c) }
