package agenttest_test

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent/agenttest"
)

func Example() {
	s := agenttest.NewServer()
	defer s.Close()
	s.Enqueue(
		agenttest.Reply().Text("Let me check. ").
			Call(0, "call_1", "get_weather", `{"ci`, `ty":"Paris"}`).
			Usage(12, 5).Finish("tool_calls"),
		agenttest.HTTPError(429, "slow down").RetryAfter(0),
	)

	client := openai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("k"),
		option.WithHTTPClient(s.Client()), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "any",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
	}

	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var text, args string
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
	}
	fmt.Printf("%q %s %v\n", text, args, stream.Err())

	stream = client.Chat.Completions.NewStreaming(context.Background(), params)
	for stream.Next() {
	}
	fmt.Println(stream.Err() != nil, len(s.Requests()), s.Requests()[0].LastMessage().Content)
	// Output:
	// "Let me check. " {"city":"Paris"} <nil>
	// true 2 Weather in Paris?
}
