package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
)

// TestTraceFile: -trace writes the spans of the run as JSON lines: the
// run, its model calls and its tool call, children of the run's span.
func TestTraceFile(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	r := runCLI(t, "", "-yes", "-trace", path, weatherPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	type span struct {
		Name        string
		SpanContext struct{ TraceID, SpanID string }
		Parent      struct{ SpanID string }
		Attributes  []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	var spans []span
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var s span
		require.NoError(t, json.Unmarshal([]byte(line), &s), "line %d is not a span: %q", i+1, line)
		spans = append(spans, s)
	}
	count := map[string]int{}
	var root span
	for _, s := range spans {
		name, _, _ := strings.Cut(s.Name, " ")
		count[name]++
		if s.Name == "invoke_agent" {
			root = s
		}
	}
	assert.Equal(t, map[string]int{"invoke_agent": 1, "chat": 3, "await_approval": 1, "execute_tool": 1}, count, "spans: %+v", spans)
	for _, s := range spans {
		if s.Name == "invoke_agent" {
			continue
		}
		assert.Equal(t, root.SpanContext.SpanID, s.Parent.SpanID, "%s is a child of the run", s.Name)
		assert.Equal(t, root.SpanContext.TraceID, s.SpanContext.TraceID)
	}
	var outcome any
	for _, a := range root.Attributes {
		if a.Key == "planround.outcome" {
			outcome = a.Value.Value
		}
	}
	assert.Equal(t, "answered", outcome)
}

func TestTraceFileCannotBeCreated(t *testing.T) {
	noModelEnv(t)
	r := runCLI(t, "", "-trace", filepath.Join(t.TempDir(), "no", "such", "dir", "t.jsonl"), helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cli: -trace: ")
}
