package stream

import "testing"

// TestUsageAddSumsEveryCount holds Add to summing every field: a count
// added later and forgotten in Add would show here.
func TestUsageAddSumsEveryCount(t *testing.T) {
	a := Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CacheReadTokens: 64, CacheWriteTokens: 8, ReasoningTokens: 5}
	b := Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CacheReadTokens: 4, CacheWriteTokens: 5, ReasoningTokens: 6}
	want := Usage{PromptTokens: 101, CompletionTokens: 22, TotalTokens: 123, CacheReadTokens: 68, CacheWriteTokens: 13, ReasoningTokens: 11}
	if got := a.Add(b); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	if got := (Usage{}).Add(a); got != a {
		t.Errorf("zero.Add(a) = %+v, want %+v", got, a)
	}
}
