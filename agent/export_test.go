package agent

// DefaultClient is the SDK's default client, for the tests of package
// agent_test.
var DefaultClient = defaultClient
