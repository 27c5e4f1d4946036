// Package bridge hands the store helpers that package memory implements to
// package memory/storekit, which exports them.
//
// storekit imports memory for its types, so memory cannot import storekit;
// and this package imports nothing from memory, so it cannot name memory's
// types. Each variable therefore holds a function typed as any: memory
// sets them all in its init, before any package that imports memory
// initializes, and storekit asserts each once to the type written beside
// it, in its package-level variables. A missing or mistyped function makes
// storekit's initialization panic, in every program and test that imports
// it, never a later call. Nothing else reads or writes them.
package bridge

// The helpers, in storekit's order; the comment gives each one's type, with
// memory's types.
var (
	ValidateSession     any // func(memory.Session) error
	NewSessionID        any // func() string
	ValidateMessages    any // func([]memory.Message) error
	CloneMessages       any // func([]memory.Message) []memory.Message
	ValidateSummary     any // func(memory.Summary) error
	ValidateOpenCall    any // func(memory.OpenCall) error
	ValidateAppendCalls any // func([]memory.OpenCall, []memory.Message) error
	ValidateApproval    any // func(memory.Approval) error
	ValidateNote        any // func(channel, payload string) error
	ValidateEvents      any // func([]memory.Event) error
	ValidateKV          any // func(namespace, key string, value []byte) error
	ValidateAPICall     any // func(memory.APICall) error
)
