package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

func ExampleProviderError() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.HTTPError(404, "The model `gpt-x` does not exist or you do not have access to it."))

	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "gpt-x",
		MaxRetries: -1,
	})
	if err != nil {
		panic(err)
	}
	for _, err := range a.Run(context.Background(), agent.Input{Message: "Hello"}) {
		var pe *agent.ProviderError
		if errors.As(err, &pe) {
			fmt.Println(pe.StatusCode, pe.Message)
			fmt.Println(err)
		}
	}
	// Output:
	// 404 The model `gpt-x` does not exist or you do not have access to it.
	// agent: round 0: model request failed: 404 Not Found: The model `gpt-x` does not exist or you do not have access to it. (type invalid_request_error)
}
