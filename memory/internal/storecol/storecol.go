// Package storecol holds what the SQL stores (memory/sqlitestore and
// memory/pgstore) share to write and read their columns the same way: times
// as Unix nanoseconds in UTC, and tool calls and images as JSON kept byte for
// byte.
package storecol

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/planround/planround/memory"
)

// Now returns the current time in UTC, without a monotonic reading.
func Now() time.Time { return time.Now().UTC() }

// NormTime returns t in UTC without a monotonic reading, or now when t is
// zero.
func NormTime(t, now time.Time) time.Time {
	if t.IsZero() {
		return now.UTC()
	}
	return t.UTC()
}

// FromNanos returns the time of a column of Unix nanoseconds, in UTC.
func FromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// Bound returns t as Unix nanoseconds for a comparison with a time column,
// clamped to the range of int64: a time before 1678 or after 2262, which
// UnixNano cannot give, compares as the first or last instant a column
// holds.
func Bound(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// The first and last instants of Unix nanoseconds in an int64.
var minNanos, maxNanos = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// EncodeJSON returns the JSON of a tool_calls or images column. Characters
// that json.Marshal escapes for HTML are kept as they are, so compact
// tool-call arguments read back byte for byte.
func EncodeJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// SetArguments returns the tool_calls column calls (a JSON array of
// memory.ToolCall) with the arguments of the call callID set to args, for
// memory.CallLog.SaveCall with an approver's edit. The other calls keep
// their bytes. No such call is an error.
func SetArguments(calls []byte, callID string, args json.RawMessage) (string, error) {
	var tcs []memory.ToolCall
	if err := json.Unmarshal(calls, &tcs); err != nil {
		return "", fmt.Errorf("tool calls: %w", err)
	}
	found := false
	for i := range tcs {
		if tcs[i].ID == callID {
			tcs[i].Arguments, found = args, true
		}
	}
	if !found {
		return "", fmt.Errorf("the message has no call %q", callID)
	}
	return EncodeJSON(tcs)
}
