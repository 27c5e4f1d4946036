package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// ArgumentsDigest returns the digest of a call's arguments that binds a
// decision to what the person deciding saw: "sha256:" and the hex SHA-256
// of the arguments in canonical form (object keys sorted, no insignificant
// white space, strings escaped the same way, numbers as written). Two
// texts of the same JSON value that differ only in key order or spacing
// have the same digest. Arguments that are not valid JSON (also JSON with
// trailing bytes, or with strings that are not valid UTF-8) get the digest
// of their bytes without the JSON white space around them, so they still
// bind, and never share a digest with valid JSON. Nil, empty or blank
// arguments are taken as {}.
func ArgumentsDigest(args json.RawMessage) string {
	sum := sha256.Sum256(canonicalJSON(args))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// jsonSpace is JSON's insignificant white space.
const jsonSpace = " \t\r\n"

// canonicalJSON returns raw in canonical form, or raw without the white
// space around it when it is not valid JSON in valid UTF-8 (the decoder
// would drop trailing bytes after a value and replace invalid UTF-8, so
// that two different texts got one form).
func canonicalJSON(raw json.RawMessage) []byte {
	raw = bytes.Trim(raw, jsonSpace)
	if len(raw) == 0 {
		return []byte("{}")
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
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
