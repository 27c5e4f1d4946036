package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"

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

func ExampleConnectionError() {
	// A port nothing listens on: the connection is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	a, err := agent.New(agent.Config{
		BaseURL:    "http://" + addr + "/v1",
		Model:      "gpt-x",
		MaxRetries: -1, // with retries, a request that never reached the provider is sent again first
	})
	if err != nil {
		panic(err)
	}
	for _, err := range a.Run(context.Background(), agent.Input{Message: "Hello"}) {
		var ce *agent.ConnectionError
		if errors.As(err, &ce) {
			if ce.Sent {
				fmt.Println("the provider may have processed the request: do not send it blindly again")
			} else {
				fmt.Printf("the request never reached the provider (%d attempt): safe to send again\n", ce.Attempts)
			}
		}
	}
	// Output:
	// the request never reached the provider (1 attempt): safe to send again
}
