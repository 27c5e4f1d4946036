package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// scriptedModel is a modelAPI that is not chat completions: each request
// gets the next reply's deltas, then its end (nil: io.EOF). It records the
// requests and how each stream was closed.
type scriptedModel struct {
	replies [][]stream.Delta
	ends    []error
	reqs    []request
	closed  []bool
}

func (m *scriptedModel) open(_ context.Context, req request) (modelStream, error) {
	i := len(m.reqs)
	m.reqs = append(m.reqs, req)
	if i >= len(m.replies) {
		return nil, errors.New("no reply scripted")
	}
	return &scriptedStream{m: m, deltas: m.replies[i], end: m.ends[i]}, nil
}

type scriptedStream struct {
	m      *scriptedModel
	deltas []stream.Delta
	end    error
	d      stream.Delta
}

func (s *scriptedStream) next() (*stream.Delta, error) {
	if len(s.deltas) == 0 {
		if s.end == nil {
			return nil, io.EOF
		}
		return nil, s.end
	}
	s.d, s.deltas = s.deltas[0], s.deltas[1:]
	return &s.d, nil
}

func (s *scriptedStream) close(complete bool) { s.m.closed = append(s.m.closed, complete) }

// seamAgent returns an agent on m, with an echo tool that needs no
// approval and planning off.
func seamAgent(t *testing.T, m modelAPI) *Agent {
	t.Helper()
	reg, err := NewToolRegistry(FuncTool{
		Def: ToolDefinition{Name: "echo", SkipApproval: true},
		Fn: func(_ context.Context, args json.RawMessage, _ Progress) (string, error) {
			return "echo " + string(args), nil
		},
	})
	require.NoError(t, err)
	a, err := New(Config{Model: "m", Tools: reg, DisablePlanning: true})
	require.NoError(t, err)
	a.model = m
	return a
}

// TestModelSeam runs a turn on a model API other than chat completions:
// the run builds its requests and reads its deltas through the seam only.
func TestModelSeam(t *testing.T) {
	m := &scriptedModel{
		replies: [][]stream.Delta{{
			{Reasoning: "think"},
			{Content: "looking"},
			{ToolCalls: []stream.ToolCallDelta{{Index: 0, ID: "c1", Name: "echo", Arguments: `{"x"`}}},
			{ToolCalls: []stream.ToolCallDelta{{Index: 0, Arguments: `:1}`}}},
			{FinishReason: "tool_calls", Usage: &stream.Usage{PromptTokens: 10, CompletionTokens: 5}},
		}, {
			{Content: "done"},
			{FinishReason: "stop"},
			{Usage: &stream.Usage{PromptTokens: 20, CompletionTokens: 1}},
		}},
		ends: []error{nil, nil},
	}
	a := seamAgent(t, m)
	turn := a.NewTurn(Input{Message: "hi"})
	var kinds []string
	var texts []string
	for c, err := range turn.Run(t.Context()) {
		require.NoError(t, err)
		kinds = append(kinds, c.Kind.String())
		switch c.Kind {
		case KindText, KindReasoning:
			texts = append(texts, c.Text)
		case KindToolCall:
			require.NotNil(t, c.Tool)
			assert.Equal(t, "echo", c.Tool.Name)
		}
	}
	assert.Equal(t, []string{"think", "looking", "done"}, texts)
	assert.Contains(t, kinds, "tool_call")
	assert.Equal(t, []bool{true, true}, m.closed, "each stream closed once, complete")
	assert.Equal(t, Usage{PromptTokens: 30, CompletionTokens: 6}, turn.Usage())

	require.Len(t, m.reqs, 2)
	require.Len(t, m.reqs[0].tools, 1, "the tools go in the agent's vocabulary")
	assert.Equal(t, "echo", m.reqs[0].tools[0].Name)
	last := m.reqs[1].messages[len(m.reqs[1].messages)-1]
	assert.Equal(t, memory.RoleTool, last.Role)
	assert.Equal(t, "c1", last.ToolCallID)
	assert.Equal(t, `echo {"x":1}`, last.Content)
}

// TestModelSeamError ends a turn with the error a stream returned, after
// the text that came before it, and closes the stream as incomplete.
func TestModelSeamError(t *testing.T) {
	perr := &ProviderError{StatusCode: 200, Message: "overloaded"}
	m := &scriptedModel{replies: [][]stream.Delta{{{Content: "part"}}}, ends: []error{perr}}
	a := seamAgent(t, m)
	var texts []string
	var runErr error
	for c, err := range a.Run(t.Context(), Input{Message: "hi"}) {
		if err != nil {
			runErr = err
			break
		}
		if c.Kind == KindText {
			texts = append(texts, c.Text)
		}
	}
	var got *ProviderError
	require.ErrorAs(t, runErr, &got)
	assert.Same(t, perr, got)
	assert.Equal(t, []string{"part"}, texts)
	assert.Equal(t, []bool{false}, m.closed)
}
