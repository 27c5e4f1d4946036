package memory

import (
	"bytes"
	"encoding/json"
)

// InvalidArgumentsKey is the key under which [ValidArguments] keeps
// tool-call arguments that were not a JSON object.
const InvalidArgumentsKey = "invalid_arguments"

// ValidArguments returns tool-call arguments that are always a JSON object:
// args itself when it is one, "{}" when it is empty or white space, and
// otherwise an object holding the text under [InvalidArgumentsKey], such as
// {"invalid_arguments":"{\"city\": \"Par"} for arguments cut short.
//
// Providers that parse the arguments of every earlier call to render their
// chat template (vLLM, llama.cpp) refuse a request whose history holds
// anything else, and keep refusing every later request of the
// conversation. Invalid UTF-8 in args becomes U+FFFD in the wrapper.
func ValidArguments(args []byte) json.RawMessage {
	if IsObject(args) {
		return args
	}
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage("{}")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{InvalidArgumentsKey: string(args)}) // a map of strings cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// IsObject reports whether b is a JSON object (white space around it
// allowed).
func IsObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
