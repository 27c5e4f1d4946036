package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
)

// A typed tool: the schema the model sees comes from the Go type, and the
// function gets the arguments decoded. Arguments that do not fit are
// refused before anyone is asked to approve the call.
func ExampleNewTool() {
	type weatherArgs struct {
		City string  `json:"city" jsonschema:"the city, for example Paris"`
		Unit *string `json:"unit" jsonschema:"celsius (the default) or fahrenheit"`
	}
	getWeather := agent.NewTool("get_weather", "Current weather for a city.",
		func(ctx context.Context, in weatherArgs, progress agent.Progress) (string, error) {
			if in.Unit != nil && *in.Unit == "fahrenheit" {
				return "sunny, 72 F in " + in.City, nil
			}
			return "sunny, 22 C in " + in.City, nil
		})
	schema, _ := json.Marshal(getWeather.Definition().Parameters)
	fmt.Println(string(schema))

	srv := exampleServer() // a local model that calls get_weather for Paris
	defer srv.Close()
	tools, err := agent.NewToolRegistry(getWeather)
	if err != nil {
		panic(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:    srv.URL(),
		HTTPClient: srv.Client(),
		Model:      "gpt-4o-mini",
		Tools:      tools,
		Approver:   approval.ApproveAll(),
	})
	if err != nil {
		panic(err)
	}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			fmt.Println(c.Tool.Name, string(c.Tool.Arguments), "->", c.Tool.Result)
		}
	}
	// Output:
	// {"additionalProperties":false,"properties":{"city":{"description":"the city, for example Paris","type":"string"},"unit":{"description":"celsius (the default) or fahrenheit","type":["null","string"]}},"required":["city"],"type":"object"}
	// get_weather {"city":"Paris"} -> sunny, 22 C in Paris
}
