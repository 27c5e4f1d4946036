package agent

import (
	"net/http"
	"time"
)

// DefaultClient is the SDK's default client, for the tests of package
// agent_test.
var DefaultClient = defaultClient

// DefaultTransport is the transport under the default client's pool.
func DefaultTransport() *http.Transport { return defaultClient().Transport.(*connPool).t }

// SetRetryBase sets the first backoff between attempts of a model request
// until the test ends.
func SetRetryBase(t interface{ Cleanup(func()) }, d time.Duration) {
	old := retryBase
	retryBase = d
	t.Cleanup(func() { retryBase = old })
}
