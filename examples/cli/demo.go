package main

import (
	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
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

// hostTools are the tools the CLI offers, with the demo model or a real
// one: the demo tools (get_weather, get_time, run_command, show_card),
// ask_user_question, whose forms are answered on the terminal (through
// the asker each turn's context carries), and the researcher sub-agent, which runs on cfg's model with
// get_weather and get_time. cfg is the agent's Config without its tools.
func hostTools(cfg agent.Config) ([]agent.Tool, error) {
	researcher, err := demo.Researcher(cfg)
	if err != nil {
		return nil, err
	}
	return append(demo.Tools(), interact.AskUserQuestion(), researcher), nil
}
