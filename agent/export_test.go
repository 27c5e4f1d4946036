package agent

import "net/http"

// DefaultClient is the SDK's default client, for the tests of package
// agent_test.
var DefaultClient = defaultClient

// DefaultTransport is the transport under the default client's pool.
func DefaultTransport() *http.Transport { return defaultClient().Transport.(*connPool).t }
