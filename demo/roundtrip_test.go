package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
)

// post sends a chat-completions request for msgs to m, through an HTTP
// client whose transport m is, and returns the status and the number of
// body bytes.
func post(t *testing.T, m demo.Model, stream bool, tools []string, msgs ...map[string]string) (int, int64) {
	t.Helper()
	body := map[string]any{"model": "demo", "messages": msgs, "stream": stream}
	var defs []map[string]any
	for _, name := range tools {
		defs = append(defs, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}})
	}
	if defs != nil {
		body["tools"] = defs
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, demo.BaseURL+"/chat/completions", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, n
}

func msg(role, content string) map[string]string {
	return map[string]string{"role": role, "content": content}
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestModelKeepsNoRequests: the demo model answers turn after turn of a
// long-running web chat without keeping the requests it answered.
func TestModelKeepsNoRequests(t *testing.T) {
	leaktest.Check(t)
	const turns, size = 300, 64 << 10 // 19 MB of requests in all
	filler := strings.Repeat("x", size)
	before := heapAlloc()
	for i := range turns {
		status, _ := post(t, demo.Model{}, true, nil, msg("user", fmt.Sprintf("hello %d %s", i, filler)))
		if status != http.StatusOK {
			t.Fatalf("turn %d: status %d", i, status)
		}
	}
	after := heapAlloc()
	if grown := int64(after) - int64(before); grown > 8<<20 {
		t.Errorf("the heap grew by %d MB over %d turns of %d KB: the requests are kept", grown>>20, turns, size>>10)
	}
}

// TestRepliesToHugeMessagesAreBounded: a message of a megabyte gets a reply
// of a few kilobytes, whatever the reply quotes of it.
func TestRepliesToHugeMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("blah ", 200<<10) // 1 MB
	const limit = 32 << 10
	for _, tc := range []struct {
		name  string
		tools []string
		msgs  []map[string]string
	}{
		{"plan", nil, []map[string]string{msg("user", "run `"+huge+"` and show a card about "+huge)}},
		{"answer", nil, []map[string]string{msg("user", huge), msg("assistant", "ok <no_tool>"), msg("user", "[continue]")}},
		{"tool calls", []string{"run_command", "show_card"}, []map[string]string{msg("user", "run `"+huge+"` and show a card about "+huge), msg("assistant", "ok <need_tool>"), msg("user", "[continue]")}},
	} {
		for _, stream := range []bool{true, false} {
			status, n := post(t, demo.Model{}, stream, tc.tools, tc.msgs...)
			if status != http.StatusOK {
				t.Fatalf("%s (stream %v): status %d", tc.name, stream, status)
			}
			if n > limit {
				t.Errorf("%s (stream %v): a reply of %d KB to a message of 1 MB", tc.name, stream, n>>10)
			}
		}
	}
}

// TestAgentRunsOnTheModel: an agent whose HTTP client is the demo model's
// runs a turn with the demo tools, run_command included, without a
// network: the base URL does not resolve. Nothing outlives the run.
func TestAgentRunsOnTheModel(t *testing.T) {
	leaktest.Check(t)
	tools, err := agent.NewToolRegistry(demo.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:    demo.BaseURL,
		HTTPClient: demo.Model{}.Client(),
		Model:      demo.ModelName,
		Tools:      tools,
		Approver:   approveAll,
	})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	var final strings.Builder
	for c, err := range a.Run(t.Context(), agent.Input{Message: "What's the weather in Oslo? And run `echo from-the-shell`."}) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult:
			results[c.Tool.Name] = c.Tool.Result
		case c.Kind == agent.KindText && c.Round == 2:
			final.WriteString(c.Text)
		}
	}
	if !strings.HasPrefix(results["get_weather"], "Oslo: ") || strings.TrimSpace(results["run_command"]) != "from-the-shell" {
		t.Errorf("results = %q", results)
	}
	if !strings.Contains(final.String(), "from-the-shell") {
		t.Errorf("the answer does not quote the results: %q", final.String())
	}
}

var approveAll = agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
	return agent.Decision{Approved: true}, nil
})
