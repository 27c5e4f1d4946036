package demo

import "github.com/planround/planround/agent"

// Researcher returns the researcher: a sub-agent ([agent.NewSubAgent])
// named [ResearcherName] that the demo model calls when the user asks for
// research, to delegate or for a sub-agent. It runs a nested agent whose
// only tools are get_weather and get_time, on the task the model gives it,
// and answers with what they returned.
//
// cfg is the host's Config; the researcher uses its model, HTTP client,
// settings and logger, with its own tools, system prompt and no planning
// round, and without the host's Layers and Hooks (they are written for the
// user's conversation). Its Approver is left unset, so that the nested
// calls, which need approval, are asked of the Approver of the run that
// called the researcher, with that run's session: their approval_required
// chunks reach the host marked with the researcher's name and depth.
//
// The researcher's own call needs approval like any tool's; a host that
// asks only about the nested calls skips it with
// [agent.ToolRegistry.SetSkipApproval] (the examples do). Register the
// tool as it is returned: see [agent.NewSubAgent].
func Researcher(cfg agent.Config) (agent.Tool, error) {
	tools, err := agent.NewToolRegistry(GetWeather(), GetTime())
	if err != nil {
		return nil, err
	}
	cfg.Tools = tools
	cfg.Approver = nil
	cfg.Layers, cfg.Hooks = nil, nil
	cfg.DisablePlanning = true
	cfg.PlanningPrompt, cfg.ContinuationPrompt = "", ""
	cfg.SystemPrompt = "You are a researcher working for another assistant. Find what the task asks for with your tools " +
		"(the weather in a city, the time in a time zone), then answer briefly with what you found."
	return agent.NewSubAgent(ResearcherName,
		"Delegate research to a sub-agent that finds the weather in a city and the time in a time zone with tools of its own, "+
			"and answers with what it found. Give it the whole task: it does not see this conversation.",
		cfg)
}
