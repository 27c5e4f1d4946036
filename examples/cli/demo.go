package main

import (
	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/demo"
)

// demoModel is the built-in demo model; it streams at a pace a person can
// follow (tests set Delay to zero).
var demoModel = demo.Model{Delay: demo.DefaultDelay}

// startDemo starts the demo model on 127.0.0.1 and returns its base URL,
// the API key it requires and the function that stops it.
func startDemo() (baseURL, apiKey string, stop func()) {
	srv := demoModel.NewServer()
	return srv.URL(), srv.APIKey(), srv.Close
}

// demoTools are the tools the CLI offers: get_weather, get_time,
// run_command and show_card.
func demoTools() []agent.Tool { return demo.Tools() }
