package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ArgumentsDigest returns the digest of a call's arguments that binds a
// decision to what the person deciding saw: "sha256:" and the hex SHA-256
// of the arguments in canonical form (object keys sorted, no insignificant
// white space, strings escaped the same way, numbers as written). Two
// texts of the same JSON value that differ only in key order or spacing
// have the same digest. Arguments that are not valid JSON get the digest of
// their bytes, so they still bind. Nil or empty arguments are taken as {}.
func ArgumentsDigest(args json.RawMessage) string {
	sum := sha256.Sum256(canonicalJSON(args))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON returns raw in canonical form, or raw itself when it is not
// valid JSON.
func canonicalJSON(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return raw
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Suspension is the error a [ToolDefinition.Resumable] tool returns (see
// [Suspend]) to suspend the run while its call waits for something from
// outside the run, such as a form's answers. It wraps [ErrSuspended].
type Suspension struct {
	// WaitID is the id of what the call waits for (a form's id), recorded
	// in the call's open-call record (memory.OpenCall.ApprovalID) so that
	// a sweeper knows the call waits for a person and resumes the turn
	// only once that is answered.
	WaitID string
}

func (s *Suspension) Error() string {
	return fmt.Sprintf("%v: the call waits for %s", ErrSuspended, s.WaitID)
}

// Unwrap returns [ErrSuspended].
func (s *Suspension) Unwrap() error { return ErrSuspended }

// Suspend returns the error with which a resumable tool's Execute suspends
// the run while its call waits for waitID (see [ToolDefinition.Resumable]).
func Suspend(waitID string) error { return &Suspension{WaitID: waitID} }

// suspendedWait returns the wait id of an error of Execute that suspends the
// run, and whether err is one.
func suspendedWait(err error) (string, bool) {
	var s *Suspension
	if errors.As(err, &s) {
		return s.WaitID, true
	}
	return "", errors.Is(err, ErrSuspended)
}
