package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
)

// A structured answer: the schema comes from a Go type, the planning round
// is off so that the answer is the JSON alone, and the text of the run
// decodes into the type.
func ExampleJSONSchema() {
	srv := agenttest.NewServer() // stands in for a real model
	defer srv.Close()
	srv.Enqueue(agenttest.Reply().Text(`{"city":"Paris",`, `"temp_c":22}`).Finish("stop"))

	type Weather struct {
		City  string  `json:"city" jsonschema:"the city asked about"`
		TempC float64 `json:"temp_c"`
	}
	format := agent.JSONSchema[Weather]("weather")
	format.Strict = true // OpenAI's strict mode: Weather follows its rules
	a, err := agent.New(agent.Config{
		BaseURL:         srv.URL(),
		HTTPClient:      srv.Client(),
		Model:           "gpt-4o-mini",
		DisablePlanning: true,
		Settings:        agent.ModelSettings{ResponseFormat: format},
	})
	if err != nil {
		fmt.Println(err) // also when Weather had no JSON schema
		return
	}
	var answer strings.Builder
	for c, err := range a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch c.Kind {
		case agent.KindText:
			answer.WriteString(c.Text)
		case agent.KindRoundEnd:
			fmt.Println("round_end", c.Round, c.FinishReason)
		}
	}
	var w Weather
	if err := json.Unmarshal([]byte(answer.String()), &w); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", w)
	schema, _ := json.Marshal(format.Schema)
	fmt.Println(string(schema))
	// Output:
	// round_end 1 stop
	// {City:Paris TempC:22}
	// {"additionalProperties":false,"properties":{"city":{"description":"the city asked about","type":"string"},"temp_c":{"type":"number"}},"required":["city","temp_c"],"type":"object"}
}

// Settings on the Config apply to every run; an Input overrides them field
// by field for one run, and ExtraBody carries what only one provider knows.
func ExampleModelSettings() {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.Reply().Text("Hello!").Finish("stop"))

	a, err := agent.New(agent.Config{
		BaseURL:         srv.URL(),
		HTTPClient:      srv.Client(),
		Model:           "qwen3",
		DisablePlanning: true,
		Settings: agent.ModelSettings{
			Temperature:         new(0.7),
			MaxCompletionTokens: new(1024),
			ExtraBody:           map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// This run is more deterministic; its token limit is the Config's.
	in := agent.Input{Message: "hi", Settings: agent.ModelSettings{Temperature: new(0.0), Seed: new(int64(42))}}
	for _, err := range a.Run(context.Background(), in) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
	}
	var sent map[string]any
	_ = json.Unmarshal(srv.Requests()[0].Raw, &sent)
	for _, k := range []string{"temperature", "seed", "max_completion_tokens", "chat_template_kwargs"} {
		fmt.Println(k, sent[k])
	}
	// Output:
	// temperature 0
	// seed 42
	// max_completion_tokens 1024
	// chat_template_kwargs map[enable_thinking:false]
}
