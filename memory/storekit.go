package memory

import "github.com/planround/planround/memory/internal/bridge"

// The helpers a Store implementation calls are exported by package
// memory/storekit, not here, so that this package's API is what a host
// uses. MemStore needs them too, and storekit imports this package, so
// they are implemented here, unexported, and handed to storekit through the
// internal package bridge before any package that imports this one
// initializes.
func init() {
	bridge.ValidateSession = validateSession
	bridge.NewSessionID = newSessionID
	bridge.ValidateMessages = validateMessages
	bridge.CloneMessages = cloneMessages
	bridge.ValidateSummary = validateSummary
	bridge.ValidateOpenCall = validateOpenCall
	bridge.ValidateAppendCalls = validateAppendCalls
	bridge.ValidateApproval = validateApproval
	bridge.ValidateNote = validateNote
	bridge.ValidateEvents = validateEvents
	bridge.ValidateKV = validateKV
	bridge.ValidateAPICall = validateAPICall
}
