package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// apiLogSecret is a secret the agent's Config holds beside the API key: a
// header of every request.
const apiLogSecret = "sk-header-secret-7f3a9c"

// apiLogRun runs one turn of session "s" with a planning round, a tool
// round whose call a person approves, the answering tool round and the
// summary that follows, recording to a MemStore's API log, and returns the
// records oldest first and the requests the server got.
func apiLogRun(t *testing.T, mut func(*agent.Config)) ([]memory.APICall, []*agenttest.Request) {
	t.Helper()
	srv := newServer(t)
	srv.Enqueue(planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Usage(30, 6).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny in Oslo.").Usage(40, 4).Finish("stop"),
		agenttest.Reply().Text("The user asked about Oslo.").Usage(50, 6).Finish("stop"))
	st := &memory.MemStore{}
	// An earlier turn, for the summary to take (it never takes the
	// current one).
	_, err := st.CreateSession(t.Context(), memory.Session{ID: "s"})
	require.NoError(t, err)
	_, err = st.Append(t.Context(), "s", memory.Message{Role: memory.RoleUser, Content: "Hello"},
		memory.Message{Role: memory.RoleAssistant, Content: "Hi! How can I help?"})
	require.NoError(t, err)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.SummarizeAt = 2
		c.APILog = st
		c.RequestOptions = append(c.RequestOptions, option.WithHeader("X-Upstream-Token", apiLogSecret))
		if mut != nil {
			mut(c)
		}
	}, weatherTool())
	chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "Weather in Oslo?"}))
	require.NoError(t, err)
	approvals := 0
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			approvals++
		}
	}
	require.Equal(t, 1, approvals, "the tool call waited for an approval")
	calls, err := st.APICalls(context.Background(), memory.APICallQuery{})
	require.NoError(t, err)
	for i, j := 0, len(calls)-1; i < j; i, j = i+1, j-1 {
		calls[i], calls[j] = calls[j], calls[i]
	}
	return calls, srv.Requests()
}

// TestAPILogEveryCall: one record per request the server got, the
// summary's included, with the purposes in order, the exact bodies sent,
// the replies, usage and timings.
func TestAPILogEveryCall(t *testing.T) {
	leaktest.Check(t)
	calls, reqs := apiLogRun(t, nil)
	require.Len(t, reqs, 4, "planning, two tool rounds, the summary")
	require.Len(t, calls, len(reqs), "one record per request")
	var purposes []memory.APICallPurpose
	var rounds []int
	for i, c := range calls {
		purposes = append(purposes, c.Purpose)
		rounds = append(rounds, c.Round)
		assert.Equal(t, "s", c.SessionID)
		assert.Equal(t, "test-model", c.Model)
		assert.Equal(t, memory.APICallOK, c.Status)
		assert.Empty(t, c.Error)
		assert.JSONEq(t, string(reqs[i].Raw), string(c.Request), "record %d holds the body sent", i)
		assert.Equal(t, string(reqs[i].Raw), string(c.Request), "byte for byte")
		assert.Positive(t, c.FirstToken, "record %d", i)
		assert.GreaterOrEqual(t, c.Latency, c.FirstToken, "record %d", i)
		assert.False(t, c.Started.IsZero())
		require.NotNil(t, c.Reply, "record %d", i)
	}
	assert.Equal(t, []memory.APICallPurpose{memory.PurposePlanning, memory.PurposeToolRound, memory.PurposeToolRound, memory.PurposeSummary}, purposes)
	assert.Equal(t, []int{0, 1, 2, 2}, rounds, "the summary comes in the run's last round")

	assert.Equal(t, "Let me look that up. <need_tool>", calls[0].Reply.Text)
	assert.Equal(t, memory.APIUsage{InputTokens: 10, OutputTokens: 4}, calls[0].Usage)
	assert.Equal(t, []memory.APIToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}, calls[1].Reply.ToolCalls)
	assert.Equal(t, "tool_calls", calls[1].FinishReason)
	assert.Equal(t, memory.APIUsage{InputTokens: 30, OutputTokens: 6}, calls[1].Usage)
	assert.Equal(t, "Sunny in Oslo.", calls[2].Reply.Text)
	assert.Equal(t, "The user asked about Oslo.", calls[3].Reply.Text)
	assert.Equal(t, memory.APIUsage{InputTokens: 50, OutputTokens: 6}, calls[3].Usage)
	assert.Contains(t, string(calls[1].Request), `"get_weather"`, "the tools offered")
	assert.Contains(t, string(calls[3].Request), agent.SummaryPrompt[:40], "the summary's own request")
}

// TestAPILogNoSecrets: neither the API key nor a secret header of the
// Config reaches a record, though both reached the server.
func TestAPILogNoSecrets(t *testing.T) {
	leaktest.Check(t)
	calls, reqs := apiLogRun(t, nil)
	require.NotEmpty(t, calls)
	for _, r := range reqs {
		require.Equal(t, "Bearer test-key", r.Header.Get("Authorization"), "the key was sent")
		require.Equal(t, apiLogSecret, r.Header.Get("X-Upstream-Token"), "the secret was sent")
	}
	for _, c := range calls {
		raw, err := json.Marshal(c)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "test-key", "record %d", c.ID)
		assert.NotContains(t, string(raw), apiLogSecret, "record %d", c.ID)
	}
}

// TestAPILogMetadataOnly: with APILogMetadataOnly the records keep no
// request and no reply, and all the rest.
func TestAPILogMetadataOnly(t *testing.T) {
	leaktest.Check(t)
	calls, reqs := apiLogRun(t, func(c *agent.Config) { c.APILogMetadataOnly = true })
	require.Len(t, calls, len(reqs))
	for _, c := range calls {
		assert.Nil(t, c.Request, "record %d", c.ID)
		assert.Nil(t, c.Reply, "record %d", c.ID)
		raw, err := json.Marshal(c)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "Oslo", "no content in record %d", c.ID)
	}
	assert.Equal(t, memory.PurposeSummary, calls[3].Purpose)
	assert.Equal(t, "tool_calls", calls[1].FinishReason)
	assert.Equal(t, memory.APIUsage{InputTokens: 30, OutputTokens: 6}, calls[1].Usage)
}

// TestAPILogProviderError: a call the provider refused is recorded with
// its error.
func TestAPILogProviderError(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(agenttest.HTTPError(429, "rate limit reached for test-model"))
	st := &memory.MemStore{}
	a := newAgent(t, srv, func(c *agent.Config) { c.APILog = st })
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hi"}))
	require.Error(t, err)
	calls, err := st.APICalls(context.Background(), memory.APICallQuery{})
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, memory.APICallError, calls[0].Status)
	assert.Contains(t, calls[0].Error, "rate limit reached")
	assert.Equal(t, memory.PurposePlanning, calls[0].Purpose)
	assert.True(t, strings.HasPrefix(string(calls[0].Request), "{"), "the request sent is kept: %s", calls[0].Request)
}

// TestAPILogSubAgent: a sub-agent whose Config leaves APILog nil records
// its calls to the calling run's log, as sub_agent calls of the calling
// run's session, between the host's.
func TestAPILogSubAgent(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather in Oslo?"}`).Finish("tool_calls"),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny in Oslo.").Finish("stop"),
		agenttest.Reply().Text("Research says: sunny.").Finish("stop"),
	)
	subTools, err := agent.NewToolRegistry(weatherTool())
	require.NoError(t, err)
	research := newSubAgent(t, "research", subConfig(t, srv, subTools, nil))
	st := &memory.MemStore{}
	a := newAgent(t, srv, func(c *agent.Config) { c.APILog = st }, research)
	_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
	require.NoError(t, err)

	calls, err := st.APICalls(context.Background(), memory.APICallQuery{SessionIDs: []string{"s1"}})
	require.NoError(t, err)
	var got []string
	for i := len(calls) - 1; i >= 0; i-- {
		got = append(got, string(calls[i].Purpose)+" "+calls[i].Model)
	}
	assert.Equal(t, []string{
		"planning test-model", "tool_round test-model",
		"sub_agent sub-model", "sub_agent sub-model",
		"tool_round test-model",
	}, got)
	assert.Len(t, srv.Requests(), len(calls))
}
