package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// A whole turn against a scripted model: the planning reply, a tool call,
// the answer. The test then reads what the agent sent.
func Example() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(
		agenttest.Reply().Text("I'll check the weather.", " <need_tool>").Finish("stop"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":`, `"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny in Paris.").Finish("stop"),
	)

	weather := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "get_weather", Description: "Current weather for a city."},
		Fn: func(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			return "sunny, 22 C", nil
		},
	}
	tools, _ := agent.NewToolRegistry(weather)
	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "any",
		Tools:      tools,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch c.Kind {
		case agent.KindText:
			fmt.Printf("round %d: %q\n", c.Round, c.Text)
		case agent.KindToolCall:
			fmt.Printf("round %d: %s %s\n", c.Round, c.Tool.Name, c.Tool.State)
		}
	}

	for _, req := range srv.Requests() {
		fmt.Println("request", req.Seq, "tools", req.ToolNames(), "last", req.LastMessage().Role)
	}
	// Output:
	// round 0: "I'll check the weather."
	// round 0: " "
	// round 1: get_weather start
	// round 1: get_weather executing
	// round 1: get_weather result
	// round 2: "Sunny in Paris."
	// request 1 tools [] last system
	// request 2 tools [get_weather] last user
	// request 3 tools [get_weather] last tool
}

// A model in process, without a listening port: the function answers each
// request from what it holds, here a planning reply first and then the
// answer.
func ExampleRespondFunc() {
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		if _, planned := req.LastMessageWithRole("assistant"); planned {
			return agenttest.Reply().Text("How can I help?").Finish("stop")
		}
		return agenttest.Reply().Text("Hello! <no_tool>").Finish("stop")
	})
	a, err := agent.New(agent.Config{
		BaseURL:    "http://model.invalid/v1", // never dialled
		HTTPClient: &http.Client{Transport: model},
		Model:      "any",
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "hi"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if c.Kind == agent.KindText {
			fmt.Printf("%q\n", c.Text)
		}
	}
	// Output:
	// "Hello! "
	// "How can I help?"
}

// A stream cut in the middle: the agent delivers the text that arrived,
// then ends the run with agent.ErrTruncated.
func ExampleResponse_CutAfter() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.Reply().Text("Hel", "lo", " there").Finish("stop").CutAfter(2))

	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "any",
		MaxRetries: -1,
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "hi"}) {
		if err != nil {
			fmt.Println("truncated:", errors.Is(err, agent.ErrTruncated))
			return
		}
		if c.Kind == agent.KindText {
			fmt.Printf("%q\n", c.Text)
		}
	}
	// Output:
	// "Hel"
	// "lo"
	// truncated: true
}

// A server that refuses what a strict chat template refuses, as some
// providers do: a system message after the first one.
func ExampleServer_Enforce() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enforce(agenttest.CheckTemplate)

	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("k"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "any",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Hi"),
			openai.SystemMessage("Answer briefly."),
		},
	})
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Message)
	}
	// Output:
	// 400 agenttest: strict chat template: messages[1]: System message must be at the beginning.
}

// The server speaks the OpenAI protocol, so any client can use it: here
// openai-go's own streaming client, then a rate limit.
func ExampleServer() {
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
