package agent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
)

func TestNewValidates(t *testing.T) {
	reg, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	_, err = agent.New(agent.Config{})
	assert.ErrorContains(t, err, "Model")
	_, err = agent.New(agent.Config{Model: "m", Tools: reg})
	assert.ErrorContains(t, err, "Approver")
	_, err = agent.NewToolRegistry(weatherTool(), weatherTool())
	assert.ErrorContains(t, err, "twice")
	_, err = agent.NewToolRegistry(agent.FuncTool{Def: agent.ToolDefinition{Name: "bad name"}})
	assert.Error(t, err)
}

func TestNewValidatesBaseURL(t *testing.T) {
	for _, bad := range []string{"localhost:11434/v1", "127.0.0.1:8080", "ftp://example.com/v1", "http:///v1", "http//localhost/v1", "https://exa mple.com"} {
		_, err := agent.New(agent.Config{Model: "m", BaseURL: bad})
		if assert.Error(t, err, "BaseURL %q", bad) {
			assert.Contains(t, err.Error(), "Config.BaseURL")
			assert.True(t, strings.Contains(err.Error(), "http://") || strings.Contains(err.Error(), "host"), "error %q says what is wanted", err)
		}
	}
	for _, good := range []string{"", "http://localhost:11434/v1", "https://api.openai.com/v1", "HTTP://127.0.0.1:8080/v1/"} {
		_, err := agent.New(agent.Config{Model: "m", BaseURL: good})
		assert.NoError(t, err, "BaseURL %q", good)
	}
}
