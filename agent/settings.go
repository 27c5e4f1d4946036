package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/planround/planround/internal/names"
)

// ModelSettings are the sampling and output settings of model requests.
// [Config.Settings] holds an agent's; [Input.Settings] overrides them for
// one run, field by field: a field the Input sets wins, a field it leaves
// unset (nil, or "" for a string) keeps the Config's. A setting set
// in neither is not sent, and the provider's default applies.
//
// Every request of a run gets the settings, with two exceptions:
// ResponseFormat shapes the answer, so the planning round (which answers
// in words and ends with an intent tag) goes without it; and
// ParallelToolCalls goes only with requests that offer tools (OpenAI
// refuses it in a request without tools). The summary requests of
// [Config.SummarizeAt] get the Config's settings without ResponseFormat.
//
// Fields that take a pointer read well with new: Temperature: new(0.2).
type ModelSettings struct {
	// Temperature is the sampling temperature (OpenAI: 0 to 2).
	Temperature *float64
	// TopP is the nucleus sampling probability mass (0 to 1).
	TopP *float64
	// MaxCompletionTokens bounds the tokens of each response, reasoning
	// tokens included, as "max_completion_tokens": OpenAI's name, and the
	// only one its reasoning models accept.
	MaxCompletionTokens *int
	// MaxTokens bounds the tokens of each response as "max_tokens": the
	// older name, which OpenAI deprecated but many OpenAI-compatible
	// servers still read instead of max_completion_tokens. Set the one
	// your provider reads; both are sent when both are set.
	MaxTokens *int
	// Stop lists sequences at which the model stops writing. A non-nil
	// empty Stop in an Input sends none, whatever the Config says.
	Stop []string
	// Seed asks for deterministic sampling, where the provider offers it.
	Seed *int64
	// ReasoningEffort is how much a reasoning model thinks before it
	// answers: "low", "medium", "high", and what else the model accepts
	// ("none", "minimal", "xhigh", ...).
	ReasoningEffort string
	// ParallelToolCalls, when false, asks the model for at most one tool
	// call per response. Whether the calls of one response run
	// concurrently is Config.ParallelTools.
	ParallelToolCalls *bool
	// PromptCacheKey is OpenAI's prompt_cache_key: requests with the same
	// key and the same long prefix (system prompt, tools, the history so
	// far) are routed to the same prompt cache, so more of the prompt is
	// read from it (Usage.CacheReadTokens) at a lower price. Set it to what
	// the requests sharing a prefix have in common: the session ID (in
	// Input.Settings) for a conversation's rounds and turns, the user for
	// sessions of one user, or one key in Config.Settings for an agent whose
	// many users share a long system prompt and tools. A key shared by far
	// more requests than share a prefix (one key for everything) spreads
	// nothing and may overflow one cache. Empty sends none: OpenAI then
	// caches by prefix alone.
	PromptCacheKey string
	// PromptCacheRetention is OpenAI's prompt_cache_retention, how long a
	// cached prefix is kept: "in_memory" (minutes) or "24h" (extended
	// caching, on the models that offer it). Empty sends none: the
	// provider's default applies.
	PromptCacheRetention string
	// ResponseFormat asks for an answer in JSON that follows a schema. A
	// ResponseFormat without a Schema (&ResponseFormat{}) in an Input asks
	// for plain text, whatever the Config says.
	ResponseFormat *ResponseFormat
	// ExtraBody holds provider-specific fields, merged into the request's
	// JSON object (a field of the same name set by the settings above is
	// replaced). An Input's ExtraBody is merged into the Config's key by
	// key. The fields the agent owns (model, messages, stream, tools) are
	// refused. Values must marshal to JSON.
	ExtraBody map[string]any
}

// ResponseFormat asks the model for a JSON answer that follows a JSON
// schema (OpenAI's structured outputs: a response_format of type
// json_schema). The answer is the text of the run's last round: decode it
// with encoding/json. Turn the planning round off
// ([Config.DisablePlanning]) when the host wants the JSON alone: the
// planning round answers in words.
type ResponseFormat struct {
	// Name names the format: letters, digits, '_' and '-', at most 64.
	// Required with a Schema.
	Name string
	// Description tells the model what the answer is for.
	Description string
	// Schema is the JSON schema of the answer, such as {"type": "object",
	// "properties": {...}}.
	Schema map[string]any
	// Strict asks the provider to follow the schema exactly. OpenAI's
	// strict mode accepts a subset of JSON Schema: among other rules, every
	// object lists all its properties as required and sets
	// additionalProperties to false.
	Strict bool

	// err is why JSONSchema could not make Schema.
	err error
}

// JSONSchema returns a response format named name whose schema is generated
// from the Go type T, as encoding/json encodes it (by
// github.com/google/jsonschema-go): struct fields are required unless
// tagged omitempty or omitzero, objects allow no other properties, and a
// field's jsonschema tag is its description. When T has no JSON schema (a
// channel, a func, a cycle), [New] and [Agent.Run] report the error. Set
// Strict on the result for OpenAI's strict mode when T follows its rules.
func JSONSchema[T any](name string) *ResponseFormat {
	f := &ResponseFormat{Name: name}
	s, err := jsonschema.For[T](nil)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(s); err == nil {
			err = json.Unmarshal(b, &f.Schema)
		}
	}
	if err != nil {
		f.err = fmt.Errorf("the schema of %s: %w", name, err)
	}
	return f
}

// merge returns s with the fields over sets replacing s's, and ExtraBody
// merged key by key. It does not modify s's map.
func (s ModelSettings) merge(over ModelSettings) ModelSettings {
	s.Temperature = cmp.Or(over.Temperature, s.Temperature)
	s.TopP = cmp.Or(over.TopP, s.TopP)
	s.MaxCompletionTokens = cmp.Or(over.MaxCompletionTokens, s.MaxCompletionTokens)
	s.MaxTokens = cmp.Or(over.MaxTokens, s.MaxTokens)
	s.Seed = cmp.Or(over.Seed, s.Seed)
	s.ParallelToolCalls = cmp.Or(over.ParallelToolCalls, s.ParallelToolCalls)
	s.ResponseFormat = cmp.Or(over.ResponseFormat, s.ResponseFormat)
	if over.Stop != nil {
		s.Stop = over.Stop
	}
	s.ReasoningEffort = cmp.Or(over.ReasoningEffort, s.ReasoningEffort)
	s.PromptCacheKey = cmp.Or(over.PromptCacheKey, s.PromptCacheKey)
	s.PromptCacheRetention = cmp.Or(over.PromptCacheRetention, s.PromptCacheRetention)
	if len(over.ExtraBody) > 0 {
		extra := make(map[string]any, len(s.ExtraBody)+len(over.ExtraBody))
		maps.Copy(extra, s.ExtraBody)
		maps.Copy(extra, over.ExtraBody)
		s.ExtraBody = extra
	}
	return s
}

// clone returns a deep enough copy of s that changing what s's pointers,
// slice and map hold (as a host may do with its Config after New) does not
// change the copy.
func (s ModelSettings) clone() ModelSettings {
	s.Temperature = clonePtr(s.Temperature)
	s.TopP = clonePtr(s.TopP)
	s.MaxCompletionTokens = clonePtr(s.MaxCompletionTokens)
	s.MaxTokens = clonePtr(s.MaxTokens)
	s.Seed = clonePtr(s.Seed)
	s.ParallelToolCalls = clonePtr(s.ParallelToolCalls)
	if rf := s.ResponseFormat; rf != nil {
		c := *rf
		c.Schema = maps.Clone(rf.Schema)
		s.ResponseFormat = &c
	}
	s.Stop = slices.Clone(s.Stop)
	s.ExtraBody = maps.Clone(s.ExtraBody)
	return s
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// reservedFields are the request fields the agent sets itself, which
// ExtraBody may not replace.
var reservedFields = []string{"model", "messages", "stream", "tools"}

// check reports settings no provider accepts; field names the settings in
// errors ("Config.Settings").
func (s ModelSettings) check(field string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("agent: %s.%s", field, fmt.Sprintf(format, args...))
	}
	for _, f := range [...]struct {
		name string
		v    *float64
	}{{"Temperature", s.Temperature}, {"TopP", s.TopP}} {
		if f.v != nil && !(*f.v >= 0 && !math.IsInf(*f.v, 1)) { // also refuses NaN
			return bad("%s is %v, want a number >= 0", f.name, *f.v)
		}
	}
	for _, f := range [...]struct {
		name string
		v    *int
	}{{"MaxCompletionTokens", s.MaxCompletionTokens}, {"MaxTokens", s.MaxTokens}} {
		if f.v != nil && *f.v < 1 {
			return bad("%s is %d, want >= 1", f.name, *f.v)
		}
	}
	if rf := s.ResponseFormat; rf != nil {
		switch {
		case rf.err != nil:
			return bad("ResponseFormat: %v", rf.err)
		case rf.Schema == nil && rf.Name != "":
			return bad("ResponseFormat %q has no Schema", rf.Name)
		case rf.Schema != nil && !names.Valid(rf.Name, 64):
			return bad("ResponseFormat.Name %q: want 1 to 64 letters, digits, '_' or '-'", rf.Name)
		}
		if _, err := json.Marshal(rf.Schema); err != nil {
			return bad("ResponseFormat.Schema: %v", err)
		}
	}
	for k, v := range s.ExtraBody {
		if slices.Contains(reservedFields, k) {
			return bad("ExtraBody[%q]: the agent sets %s itself", k, k)
		}
		if _, err := json.Marshal(v); err != nil {
			return bad("ExtraBody[%q]: %v", k, err)
		}
	}
	return nil
}
