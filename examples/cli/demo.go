package main

import (
	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
)

// demoModel is the built-in demo model; it streams at a pace a person can
// follow (tests set Delay to zero).
var demoModel = demo.Model{Delay: demo.DefaultDelay}

// useDemo points cfg at the demo model, which answers in process: no
// network, no listening port.
func useDemo(cfg *agent.Config) {
	cfg.BaseURL, cfg.APIKey, cfg.HTTPClient = demo.BaseURL, "", demoModel.Client()
	if cfg.Model == "" {
		cfg.Model = demo.ModelName
	}
}

// demoTools are the tools the CLI offers: get_weather, get_time,
// run_command and show_card.
func demoTools() []agent.Tool { return demo.Tools() }
