package agent

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestZeroSettingsLeaveTheBodyAlone: applying settings that set nothing
// leaves the request body byte for byte as it was, with tools or without;
// a prompt-caching field set adds that field alone.
func TestZeroSettingsLeaveTheBodyAlone(t *testing.T) {
	base := func() openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}
	}
	p := base()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tools := range []bool{false, true} {
		p := base()
		(&ModelSettings{}).apply(&p, tools)
		got, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("tools %v: body = %s, want %s", tools, got, want)
		}
	}

	p = base()
	(&ModelSettings{PromptCacheKey: "s1", PromptCacheRetention: "24h"}).apply(&p, true)
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(got, &fields); err != nil {
		t.Fatal(err)
	}
	if len(fields) != 4 || string(fields["prompt_cache_key"]) != `"s1"` || string(fields["prompt_cache_retention"]) != `"24h"` {
		t.Errorf("body = %s, want model, messages, prompt_cache_key s1 and prompt_cache_retention 24h", got)
	}
}
