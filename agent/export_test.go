package agent

import "time"

// DefaultClient is the SDK's default client, for the tests of package
// agent_test.
var DefaultClient = defaultClient

// SetRetryBase sets the first backoff between attempts of a model request
// until the test ends.
func SetRetryBase(t interface{ Cleanup(func()) }, d time.Duration) {
	old := retryBase
	retryBase = d
	t.Cleanup(func() { retryBase = old })
}
