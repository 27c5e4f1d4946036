package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
)

// A whole turn against a scripted model: the planning reply, a tool call,
// the answer. The test then reads what the agent sent. In a test,
// agenttest.Start(t) starts the server, closes it when the test ends and
// fails the test when the script does not match the run's requests.
func Example() {
	srv := agenttest.NewServer()
	defer srv.Close()
	// Plan, then call: the planning round offers no tools.
	srv.Enqueue(agenttest.Plan("I'll check the weather."), agenttest.CallTool("get_weather", `{"city":"Paris"}`))
	srv.Enqueue(agenttest.Reply().Text("Sunny in Paris.").Finish("stop"))

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

	// The requests: planning (no tools, the planning prompt last), then the
	// tool rounds, after the planning reply and the agent's "[continue]".
	for _, req := range srv.Requests() {
		last := req.LastMessage()
		content := fmt.Sprintf("%q", last.Content)
		if last.Role == "system" {
			content = "(the planning prompt)"
		}
		user, _ := req.UserMessage()
		fmt.Printf("request %d: tools %v, last %s %s, user's %q\n", req.Seq, req.ToolNames(), last.Role, content, user.Content)
	}
	// Output:
	// round 0: "I'll check the weather."
	// round 1: get_weather start
	// round 1: get_weather executing
	// round 1: get_weather result
	// round 2: "Sunny in Paris."
	// request 1: tools [], last system (the planning prompt), user's "Weather in Paris?"
	// request 2: tools [get_weather], last user "[continue]", user's "Weather in Paris?"
	// request 3: tools [get_weather], last tool "sunny, 22 C", user's "Weather in Paris?"
}

// A script whose first reply calls a tool, as if the run began with the
// tool loop: the planning round offers no tools, so the server does not
// serve that reply, and the run fails with words that say what to do. The
// script of this run needs agenttest.Plan before the call, or the agent
// Config.DisablePlanning.
func Example_callWithoutPlan() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.CallTool("get_weather", `{"city":"Paris"}`), agenttest.Reply().Text("Sunny.").Finish("stop"))

	weather := agent.NewTool("get_weather", "Current weather for a city.",
		func(ctx context.Context, args struct{ City string }, _ agent.Progress) (string, error) {
			return "sunny, 22 C", nil
		})
	tools, _ := agent.NewToolRegistry(weather)
	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "any",
		Tools:      tools,
		Approver:   approval.ApproveAll(),
	})
	if err != nil {
		panic(err)
	}
	for _, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println(strings.ReplaceAll(err.Error(), ". ", ".\n")) // a sentence a line
		}
	}
	fmt.Println("requests:", len(srv.Requests()), "left in the script:", srv.Pending())
	// Output:
	// agent: round 0: model request failed: 500 Internal Server Error: agenttest: request 1 offers no tools, but the script's next response is a reply calling get_weather.
	// An agent's run starts with a planning round, a request without tools, and ignores the tool calls of its reply: the tool would never run (and an agent without tools offers none in any round).
	// Enqueue a planning reply before it (agenttest.Plan), or set agent.Config.DisablePlanning.
	// Response.Unsolicited serves such a reply anyway.
	// (type server_error)
	// requests: 1 left in the script: 1
}

// A model in process, without a listening port: the function tells the
// run's requests apart and answers each. The planning round offers no
// tools; a tool round after a tool ran ends with its result; the first
// tool round finds the user's words before the agent's "[continue]".
func ExampleRespondFunc() {
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		switch last := req.LastMessage(); {
		case !req.HasTools(): // the planning round
			return agenttest.Plan("Let me shout it.")
		case last.Role == "tool":
			return agenttest.Reply().Text("Done: " + last.Content).Finish("stop")
		default:
			user, _ := req.UserMessage()
			args, _ := json.Marshal(map[string]string{"text": user.Content})
			return agenttest.CallTool("shout", string(args))
		}
	})
	shout := agent.NewTool("shout", "Writes text in capitals.",
		func(_ context.Context, args struct {
			Text string `json:"text"`
		}, _ agent.Progress) (string, error) {
			return strings.ToUpper(args.Text), nil
		})
	tools, _ := agent.NewToolRegistry(shout)
	a, err := agent.New(agent.Config{
		BaseURL:    model.URL(), // never dialled
		HTTPClient: model.Client(),
		Model:      "any",
		Tools:      tools,
		Approver:   approval.ApproveAll(),
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "hello"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch {
		case c.Kind == agent.KindText:
			fmt.Printf("round %d: %q\n", c.Round, c.Text)
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			fmt.Printf("round %d: %s = %s\n", c.Round, c.Tool.Name, c.Tool.Result)
		}
	}
	// Output:
	// round 0: "Let me shout it."
	// round 1: shout = HELLO
	// round 2: "Done: HELLO"
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
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"}),
		},
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

// The same scripted reply answers the Responses API (POST /v1/responses)
// as an Open Responses event stream: here openai-go's Responses client
// reads its reasoning, text, tool call and usage.
func Example_responses() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.Reply().Reasoning("The user wants weather.").Text("Let me check.").
		Call(0, "call_1", "get_weather", `{"city":`, `"Paris"}`).
		Usage(20, 9).CachedTokens(16).Finish("tool_calls"))

	client := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithHTTPClient(srv.Client()), option.WithAPIKey("k"))
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "any",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name:       "get_weather",
			Parameters: map[string]any{"type": "object"},
		}}},
	})
	defer stream.Close()
	var args strings.Builder
	for stream.Next() {
		switch e := stream.Current().AsAny().(type) {
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			fmt.Println("reasoning:", e.Delta)
		case responses.ResponseTextDeltaEvent:
			fmt.Println("text:", e.Delta)
		case responses.ResponseOutputItemAddedEvent:
			if e.Item.Type == "function_call" {
				fmt.Println("call:", e.Item.AsFunctionCall().CallID, e.Item.AsFunctionCall().Name)
			}
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			args.WriteString(e.Delta)
		case responses.ResponseCompletedEvent:
			u := e.Response.Usage
			fmt.Println("arguments:", args.String())
			fmt.Println("usage:", u.InputTokens, "in,", u.InputTokensDetails.CachedTokens, "cached,", u.OutputTokens, "out")
		}
	}
	if err := stream.Err(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("responses request:", srv.Requests()[0].Responses)
	// Output:
	// reasoning: The user wants weather.
	// text: Let me check.
	// call: call_1 get_weather
	// arguments: {"city":"Paris"}
	// usage: 20 in, 16 cached, 9 out
	// responses request: true
}
