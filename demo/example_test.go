package demo_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
)

// An agent on the demo model and the demo tools: no API key, no network,
// no listening port.
func Example() {
	tools, err := agent.NewToolRegistry(demo.Tools()...)
	if err != nil {
		panic(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:    demo.BaseURL,
		HTTPClient: demo.Model{}.Client(), // demo.Model{Delay: demo.DefaultDelay} for a person to watch
		Model:      demo.ModelName,
		Tools:      tools,
		Approver:   approval.ApproveAll(),
	})
	if err != nil {
		panic(err)
	}
	text := map[int]string{}
	for c, err := range a.Run(context.Background(), agent.Input{Message: "What's the weather in Paris?"}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch c.Kind {
		case agent.KindText:
			text[c.Round] += c.Text
		case agent.KindToolCall:
			if c.Tool.State == agent.StateResult {
				fmt.Println(c.Tool.Name, "→", c.Tool.Result)
			}
		}
	}
	fmt.Println(strings.TrimSpace(text[0]))
	fmt.Println(text[2])
	// Output:
	// get_weather → Paris: cloudy, 11 °C, humidity 44%, wind 39 km/h (demo data)
	// Sure! I'll check the weather in Paris for you.
	// Here is what I found:
	// - get_weather: Paris: cloudy, 11 °C, humidity 44%, wind 39 km/h (demo data)
	// That's everything you asked for.
}
