package agent

import "testing"

func TestProviderName(t *testing.T) {
	for base, want := range map[string]string{
		"":                                    "openai",
		"https://api.openai.com/v1":           "openai",
		"https://API.OpenAI.com:443/v1":       "openai",
		"https://me.openai.azure.com/openai":  "azure.ai.openai",
		"https://api.mistral.ai/v1":           "mistral_ai",
		"https://api.groq.com/openai/v1":      "groq",
		"http://127.0.0.1:11434/v1":           "",
		"https://openai-proxy.example.com/v1": "",
	} {
		if got := providerName(base); got != want {
			t.Errorf("providerName(%q) = %q, want %q", base, got, want)
		}
	}
}

func TestBound(t *testing.T) {
	tel := &telemetry{limit: 5}
	for s, want := range map[string]string{
		"":       "",
		"hello":  "hello",
		"hello!": "hello…[truncated: 1 of 6 bytes]",
		"héllo":  "héll…[truncated: 1 of 6 bytes]",
		"ééé":    "éé…[truncated: 2 of 6 bytes]",
	} {
		if got := tel.bound(s); got != want {
			t.Errorf("bound(%q) = %q, want %q", s, got, want)
		}
	}
}
