package agent_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// settingKeys are the request fields that model settings set.
var settingKeys = []string{
	"temperature", "top_p", "max_completion_tokens", "max_tokens", "stop", "seed",
	"reasoning_effort", "parallel_tool_calls", "response_format", "service_tier", "x_custom",
	"prompt_cache_key", "prompt_cache_retention",
}

// body decodes the fields of a recorded request that settings set, each as
// compact JSON; absent fields are absent from the map.
func body(t *testing.T, req *agenttest.Request) map[string]string {
	t.Helper()
	var all map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(req.Raw, &all))
	out := map[string]string{}
	for _, k := range settingKeys {
		if v, ok := all[k]; ok {
			var buf map[string]any
			if json.Unmarshal(v, &buf) == nil { // objects: normalise key order
				v, _ = json.Marshal(buf)
			}
			out[k] = string(v)
		}
	}
	return out
}

// weatherAnswer is the structured answer of the tests.
type weatherAnswer struct {
	City  string  `json:"city" jsonschema:"the city asked about"`
	TempC float64 `json:"temp_c"`
}

const weatherSchema = `{"name":"weather","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string","description":"the city asked about"},"temp_c":{"type":"number"}},"required":["city","temp_c"],"additionalProperties":false}}`

// TestSettingsReachTheRequests: every setting of Config.Settings is sent,
// in the rounds it applies to: the response format not in the planning
// round, parallel_tool_calls only with tools.
func TestSettingsReachTheRequests(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Paris"}`).Finish("tool_calls"),
		agenttest.Reply().Text(`{"city":"Paris","temp_c":22}`).Finish("stop"),
	)
	format := agent.JSONSchema[weatherAnswer]("weather")
	format.Strict = true
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Settings = agent.ModelSettings{
			Temperature:          new(0.2),
			TopP:                 new(0.9),
			MaxCompletionTokens:  new(300),
			MaxTokens:            new(200),
			Stop:                 []string{"\nUser:"},
			Seed:                 new(int64(7)),
			ReasoningEffort:      "low",
			PromptCacheKey:       "user-42",
			PromptCacheRetention: "24h",
			ParallelToolCalls:    new(false),
			ResponseFormat:       format,
			ExtraBody:            map[string]any{"service_tier": "flex", "x_custom": map[string]any{"a": 1}},
		}
	}, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Paris?"}))
	require.NoError(t, err)

	every := map[string]string{
		"temperature":            `0.2`,
		"top_p":                  `0.9`,
		"max_completion_tokens":  `300`,
		"max_tokens":             `200`,
		"stop":                   `["\nUser:"]`,
		"seed":                   `7`,
		"reasoning_effort":       `"low"`,
		"prompt_cache_key":       `"user-42"`,
		"prompt_cache_retention": `"24h"`,
		"service_tier":           `"flex"`,
		"x_custom":               `{"a":1}`,
	}
	var schema map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"type":"json_schema","json_schema":`+weatherSchema+`}`), &schema))
	format1, _ := json.Marshal(schema)
	tools := map[string]string{"parallel_tool_calls": `false`, "response_format": string(format1)}

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, every, body(t, reqs[0]), "the planning round: no response format, no tools")
	for _, req := range reqs[1:] {
		want := map[string]string{}
		for k, v := range every {
			want[k] = v
		}
		for k, v := range tools {
			want[k] = v
		}
		assert.Equal(t, want, body(t, req), "a tool round: every setting")
	}
}

// TestSettingsUnsetSendNothing: an agent without settings leaves every
// one of them to the provider.
func TestSettingsUnsetSendNothing(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Text("ok").Finish("stop"))
	_, err := collect(newAgent(t, srv, nil, weatherTool()).Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	for _, req := range srv.Requests() {
		assert.Empty(t, body(t, req))
	}
}

// TestInputSettingsOverrideFieldByField: a field set in Input.Settings
// replaces the Config's for that run, a field left unset inherits it,
// ExtraBody merges key by key, an empty Stop and an empty ResponseFormat
// clear the Config's, and the next run is back to the Config.
func TestInputSettingsOverrideFieldByField(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Text("one").Finish("stop"),
		agenttest.Reply().Text("two").Finish("stop"),
	)
	cfg := agent.ModelSettings{
		Temperature:          new(0.2),
		Seed:                 new(int64(1)),
		PromptCacheKey:       "agent",
		PromptCacheRetention: "in_memory",
		Stop:                 []string{"END"},
		ResponseFormat:       agent.JSONSchema[weatherAnswer]("weather"),
		ExtraBody:            map[string]any{"x_custom": "config", "service_tier": "flex"},
	}
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true; c.Settings = cfg })
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "one", Settings: agent.ModelSettings{
		Temperature:     new(0.9),
		MaxTokens:       new(50),
		Stop:            []string{},
		ResponseFormat:  &agent.ResponseFormat{},
		ReasoningEffort: "high",
		PromptCacheKey:  "session-1",
		ExtraBody:       map[string]any{"x_custom": "input"},
	}}))
	require.NoError(t, err)
	_, err = collect(a.Run(context.Background(), agent.Input{Message: "two"}))
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, map[string]string{
		"temperature":            `0.9`,
		"seed":                   `1`,
		"max_tokens":             `50`,
		"reasoning_effort":       `"high"`,
		"prompt_cache_key":       `"session-1"`,
		"prompt_cache_retention": `"in_memory"`,
		"x_custom":               `"input"`,
		"service_tier":           `"flex"`,
	}, body(t, reqs[0]))
	second := body(t, reqs[1])
	delete(second, "response_format")
	assert.Equal(t, map[string]string{
		"temperature":            `0.2`,
		"seed":                   `1`,
		"stop":                   `["END"]`,
		"prompt_cache_key":       `"agent"`,
		"prompt_cache_retention": `"in_memory"`,
		"x_custom":               `"config"`,
		"service_tier":           `"flex"`,
	}, second, "the next run has the Config's settings again")
	assert.Contains(t, body(t, reqs[1]), "response_format")
	assert.Equal(t, "config", cfg.ExtraBody["x_custom"], "the Config's map is not changed")
}

// TestSummaryGetsConfigSettings: the summary request has the Config's
// settings, but no response format: a summary is prose.
func TestSummaryGetsConfigSettings(t *testing.T) {
	st := &memory.MemStore{}
	srv := newServer(t)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.SummarizeAt = 5
		c.Settings = agent.ModelSettings{Temperature: new(0.3), ResponseFormat: agent.JSONSchema[weatherAnswer]("weather")}
	})
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"), agenttest.Reply().Text("They said hello.").Finish("stop"))
	_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 5)
	sum := reqs[4]
	require.Equal(t, agent.SummaryPrompt, sum.Messages[0].Content, "the fifth request is the summary's")
	assert.Equal(t, map[string]string{"temperature": `0.3`}, body(t, sum))
}

// TestSettingsAreValidated: New refuses settings no provider accepts and a
// response format whose schema could not be made; Run refuses such
// Input.Settings before it does anything.
func TestSettingsAreValidated(t *testing.T) {
	tests := []struct {
		name string
		s    agent.ModelSettings
		want string
	}{
		{"NaN temperature", agent.ModelSettings{Temperature: new(math.NaN())}, "Temperature"},
		{"negative top_p", agent.ModelSettings{TopP: new(-0.1)}, "TopP"},
		{"zero max tokens", agent.ModelSettings{MaxTokens: new(0)}, "MaxTokens"},
		{"negative max completion tokens", agent.ModelSettings{MaxCompletionTokens: new(-5)}, "MaxCompletionTokens"},
		{"schema without name", agent.ModelSettings{ResponseFormat: &agent.ResponseFormat{Schema: map[string]any{"type": "object"}}}, "Name"},
		{"bad name", agent.ModelSettings{ResponseFormat: agent.JSONSchema[weatherAnswer]("the weather")}, "Name"},
		{"name without schema", agent.ModelSettings{ResponseFormat: &agent.ResponseFormat{Name: "x"}}, "Schema"},
		{"type without schema", agent.ModelSettings{ResponseFormat: agent.JSONSchema[chan int]("ch")}, "chan int"},
		{"reserved extra field", agent.ModelSettings{ExtraBody: map[string]any{"messages": []string{}}}, "messages"},
		{"extra field that is not JSON", agent.ModelSettings{ExtraBody: map[string]any{"f": func() {}}}, `"f"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.New(agent.Config{Model: "m", Settings: tt.s})
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), "Config.Settings")
				assert.Contains(t, err.Error(), tt.want)
			}

			srv := newServer(t)
			turn := newAgent(t, srv, nil).NewTurn(agent.Input{Message: "hi", Settings: tt.s})
			chunks, err := collect(turn.Run(context.Background()))
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), "Input.Settings")
				assert.Contains(t, err.Error(), tt.want)
			}
			assert.Empty(t, chunks)
			assert.Empty(t, srv.Requests(), "nothing was sent")
			assert.Empty(t, turn.Messages(), "nothing was recorded")
		})
	}
}

// TestConfigSettingsAreCopied: changing what the Config's settings point to
// after New does not change the agent's requests.
func TestConfigSettingsAreCopied(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(agenttest.Reply().Text("ok").Finish("stop"))
	temp := 0.2
	format := agent.JSONSchema[weatherAnswer]("weather")
	settings := agent.ModelSettings{Temperature: &temp, Stop: []string{"END"}, ResponseFormat: format, ExtraBody: map[string]any{"x_custom": 1}}
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true; c.Settings = settings })
	temp = 1.5
	settings.Stop[0] = "STOP"
	format.Name = "changed"
	settings.ExtraBody["x_custom"] = 2
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	got := body(t, srv.Requests()[0])
	assert.Equal(t, `0.2`, got["temperature"])
	assert.Equal(t, `["END"]`, got["stop"])
	assert.Equal(t, `1`, got["x_custom"])
	assert.Contains(t, got["response_format"], `"name":"weather"`)
}
