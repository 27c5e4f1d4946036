package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/examples/tracefile"
	"github.com/planround/planround/internal/leaktest"
)

// TestTraceFile: the provider of -trace gets the spans of a turn with an
// approval as JSON lines, each a child of the run's span, once the server
// is closed and the provider shut down.
func TestTraceFile(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	tp, stop, err := tracefile.Start(path, "planround-webchat")
	require.NoError(t, err)
	h := newHarness(t, Options{TracerProvider: tp})
	s1 := h.newSession(t)
	ev, _ := h.openEvents(t, s1)
	h.chat(t, s1, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	h.decide(t, s1, call, true)
	done, _ := ev.runDone(t)
	require.Equal(t, runDone{Status: "finished"}, done)
	ev.close()
	h.close()
	require.NoError(t, stop())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	type span struct {
		Name        string
		SpanContext struct{ TraceID, SpanID string }
		Parent      struct{ SpanID string }
	}
	count := map[string]int{}
	var spans []span
	var root span
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var s span
		require.NoError(t, json.Unmarshal([]byte(line), &s), "line %d is not a span: %q", i+1, line)
		spans = append(spans, s)
		name, _, _ := strings.Cut(s.Name, " ")
		count[name]++
		if s.Name == "invoke_agent" {
			root = s
		}
	}
	assert.Equal(t, map[string]int{"invoke_agent": 1, "chat": 3, "await_approval": 1, "execute_tool": 1}, count, "spans: %+v", spans)
	for _, s := range spans {
		if s.Name != "invoke_agent" {
			assert.Equal(t, root.SpanContext.SpanID, s.Parent.SpanID, "%s is a child of the run", s.Name)
		}
	}
}
