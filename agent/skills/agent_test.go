package skills_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

const systemPrompt = "You are a careful assistant."

func testSkills(t *testing.T) *skills.Set {
	t.Helper()
	s, err := skills.Load(fstest.MapFS{
		"alpha/SKILL.md": skillFile("alpha", "Use for alpha tasks.", "Alpha instructions. "+strings.Repeat("Step. ", 200)),
		"alpha/ref.md":   {Data: []byte("alpha reference")},
		"beta/SKILL.md":  skillFile("beta", "Use for beta tasks.", "Beta instructions."),
	})
	require.NoError(t, err)
	return s
}

// newServer starts a test model on 127.0.0.1 that refuses what strict
// providers refuse.
func newServer(t *testing.T) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	srv.Enforce(agenttest.CheckArguments | agenttest.CheckEmptyAssistant)
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
	})
	return srv
}

func newAgent(t *testing.T, srv *agenttest.Server, set *skills.Set, mut func(*agent.Config), tools ...agent.Tool) *agent.Agent {
	t.Helper()
	reg, err := agent.NewToolRegistry(append([]agent.Tool{set.Tool()}, tools...)...)
	require.NoError(t, err)
	cfg := agent.Config{
		BaseURL:      srv.URL(),
		HTTPClient:   srv.Client(),
		MaxRetries:   -1,
		Model:        "test-model",
		SystemPrompt: systemPrompt,
		Tools:        reg,
		// get_skill skips approval: were it asked for, its calls would be
		// rejected, and the tests would see it.
		Approver: agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
			if req.Call.Name == skills.ToolName {
				return agent.Decision{Reason: "get_skill must not ask for approval"}, nil
			}
			return agent.Decision{Approved: true}, nil
		}),
		Layers:          []memory.Layer{set.Layer(), memory.TextLayer{"Known documents: none."}},
		DisablePlanning: true,
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)
	return a
}

// run ranges over a run and returns its chunks, failing on an error.
func run(t *testing.T, ctx context.Context, a *agent.Agent, in agent.Input) []agent.Chunk {
	t.Helper()
	var chunks []agent.Chunk
	for c, err := range a.Run(ctx, in) {
		require.NoError(t, err)
		chunks = append(chunks, c)
	}
	return chunks
}

// toolResult returns the result or the rejection reason of the call id.
func toolResult(chunks []agent.Chunk, id string) (result string, ok bool) {
	for _, c := range chunks {
		if c.Tool != nil && c.Tool.ID == id && (c.Tool.State == agent.StateResult || c.Tool.State == agent.StateRejected) {
			return c.Tool.Result + c.Tool.Reason, c.Tool.State == agent.StateResult
		}
	}
	return "", false
}

// Two runs of one agent with different skills enabled on their contexts:
// each request carries one skills block, right after the system prompt,
// listing only that run's skills, and get_skill serves only them.
func TestEnabledPerRunInRequests(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	set := testSkills(t)
	a := newAgent(t, srv, set, nil)

	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "get_skill", `{"name":"alpha"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done with alpha.").Finish("stop"),
		agenttest.Reply().Call(0, "call_2", "get_skill", `{"name":"alpha"}`).Finish("tool_calls"),
		agenttest.Reply().Text("Alpha is not mine here.").Finish("stop"),
	)
	ctx := context.Background()
	chunks := run(t, skills.WithEnabled(ctx, "alpha"), a, agent.Input{Message: "Do the alpha task."})
	res, ok := toolResult(chunks, "call_1")
	require.True(t, ok, "get_skill ran without approval: %s", res)
	assert.True(t, strings.HasPrefix(res, "Alpha instructions."))
	assert.Contains(t, res, "get_skill with \"file\" returns one): ref.md")
	chunks = run(t, skills.WithEnabled(ctx, "beta"), a, agent.Input{Message: "Do the alpha task again."})
	res, ok = toolResult(chunks, "call_2")
	require.True(t, ok, "a refused skill is an error result, not a rejection")
	assert.Equal(t, `error: the skill "alpha" is not enabled in this conversation; the enabled skills are: beta`, res)

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	for i, want := range []string{"alpha", "alpha", "beta", "beta"} {
		msgs := reqs[i].Messages
		require.GreaterOrEqual(t, len(msgs), 4, "request %d", i+1)
		assert.Equal(t, "system", msgs[0].Role)
		assert.Equal(t, systemPrompt, msgs[0].Content)
		assert.Equal(t, "system", msgs[1].Role, "request %d: the skills block follows the system prompt", i+1)
		assert.Equal(t, skills.Intro+"\n\n- "+want+": Use for "+want+" tasks.", msgs[1].Content, "request %d", i+1)
		assert.Equal(t, "Known documents: none.", msgs[2].Content, "request %d: the next layer comes after", i+1)
		blocks := 0
		for _, m := range msgs {
			if strings.HasPrefix(m.Content, skills.Intro) {
				blocks++
			}
		}
		assert.Equal(t, 1, blocks, "request %d: one skills block", i+1)
		assert.True(t, reqs[i].HasTool("get_skill"))
	}
}

// With every skill disabled there is no block at all, and with a strict
// request shape the block is part of the one leading system message.
func TestLayerShapes(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enforce(agenttest.CheckAll)
	set := testSkills(t)
	a := newAgent(t, srv, set, func(c *agent.Config) { c.RequestShape = agent.ShapeStrict })
	srv.Enqueue(agenttest.Reply().Text("Hi.").Finish("stop"), agenttest.Reply().Text("Hi.").Finish("stop"))

	run(t, context.Background(), a, agent.Input{Message: "Hello"})
	run(t, skills.WithEnabled(context.Background()), a, agent.Input{Message: "Hello"})
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, systemPrompt+"\n\n"+skills.Intro+"\n\n- alpha: Use for alpha tasks.\n- beta: Use for beta tasks.\n\nKnown documents: none.", reqs[0].Messages[0].Content)
	assert.Equal(t, systemPrompt+"\n\nKnown documents: none.", reqs[1].Messages[0].Content)
}

// Agent.Preview shows the block where a run sends it: right after the
// system prompt.
func TestPreviewPlacesBlockAfterSystemPrompt(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	set := testSkills(t)
	perSession := map[string][]string{"s-beta": {"beta"}}
	sel, err := skills.Load(fstest.MapFS{
		"alpha/SKILL.md": skillFile("alpha", "Use for alpha tasks.", "A."),
		"beta/SKILL.md":  skillFile("beta", "Use for beta tasks.", "B."),
	}, skills.WithSelector(func(_ context.Context, sessionID string) []string { return perSession[sessionID] }))
	require.NoError(t, err)

	msgs, err := newAgent(t, srv, set, func(c *agent.Config) { c.DisablePlanning = false }).
		Preview(skills.WithEnabled(context.Background(), "beta", "alpha"), agent.Input{Message: "hi"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(msgs), 3)
	assert.Equal(t, systemPrompt, msgs[0].Content)
	assert.Equal(t, skills.Intro+"\n\n- alpha: Use for alpha tasks.\n- beta: Use for beta tasks.", msgs[1].Content)

	// A host's selector picks per session.
	a := newAgent(t, srv, sel, nil)
	msgs, err = a.Preview(context.Background(), agent.Input{SessionID: "s-beta", Message: "hi"})
	require.NoError(t, err)
	assert.Equal(t, skills.Intro+"\n\n- beta: Use for beta tasks.", msgs[1].Content)
	msgs, err = a.Preview(context.Background(), agent.Input{SessionID: "s-none", Message: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "Known documents: none.", msgs[1].Content, "no skill enabled: no block")
}

// A tool's selector gets the run's session: get_skill asks it with the
// session of the call (agent.CallFromContext).
func TestSelectorSeesSessionOfCall(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	sel, err := skills.Load(fstest.MapFS{
		"alpha/SKILL.md": skillFile("alpha", "Use for alpha tasks.", "Alpha instructions."),
		"beta/SKILL.md":  skillFile("beta", "Use for beta tasks.", "Beta instructions."),
	}, skills.WithSelector(func(_ context.Context, sessionID string) []string {
		if sessionID == "s-alpha" {
			return []string{"alpha"}
		}
		return nil
	}))
	require.NoError(t, err)
	a := newAgent(t, srv, sel, func(c *agent.Config) { c.Store = &memory.MemStore{} })
	srv.Enqueue(
		agenttest.Reply().Call(0, "c1", "get_skill", `{"name":"alpha"}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
		agenttest.Reply().Call(0, "c2", "get_skill", `{"name":"alpha"}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	res, ok := toolResult(run(t, context.Background(), a, agent.Input{SessionID: "s-alpha", Message: "go"}), "c1")
	assert.True(t, ok)
	assert.Equal(t, "Alpha instructions.", res)
	res, _ = toolResult(run(t, context.Background(), a, agent.Input{SessionID: "s-other", Message: "go"}), "c2")
	assert.Equal(t, `error: the skill "alpha" is not enabled in this conversation; no skill is enabled`, res)
}

// What get_skill returned stays whole in the requests of later turns,
// where another tool's long result is truncated.
func TestGetSkillNeverTruncated(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	set := testSkills(t)
	long := strings.Repeat("echo ", 200)
	echo := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "echo", Description: "Echoes.", SkipApproval: true},
		Fn: func(context.Context, json.RawMessage, agent.Progress) (string, error) {
			return long, nil
		},
	}
	a := newAgent(t, srv, set, func(c *agent.Config) { c.Store = &memory.MemStore{} }, echo)
	srv.Enqueue(
		agenttest.Reply().
			Call(0, "call_skill", "get_skill", `{"name":"alpha"}`).
			Call(1, "call_echo", "echo", `{}`).
			Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
		agenttest.Reply().Text("Second turn.").Finish("stop"),
	)
	first := run(t, context.Background(), a, agent.Input{SessionID: "s", Message: "Do the alpha task."})
	skillText, ok := toolResult(first, "call_skill")
	require.True(t, ok)
	require.Greater(t, len([]rune(skillText)), memory.DefaultTruncateLimit, "the test needs a text the default limit would cut")
	run(t, context.Background(), a, agent.Input{SessionID: "s", Message: "And now?"})

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	later := reqs[2]
	var skillMsg, echoMsg *agenttest.Message
	for i, m := range later.Messages {
		switch m.ToolCallID {
		case "call_skill":
			skillMsg = &later.Messages[i]
		case "call_echo":
			echoMsg = &later.Messages[i]
		}
	}
	require.NotNil(t, skillMsg)
	require.NotNil(t, echoMsg)
	assert.Equal(t, skillText, skillMsg.Content, "get_skill's result is whole in a later turn")
	assert.Contains(t, echoMsg.Content, "…[truncated", "another tool's long result is truncated in the same request")

	// The same through memory.Truncate and the definition's NoTruncate.
	msgs := []memory.Message{
		{Role: memory.RoleUser, Content: "old"},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: skills.ToolName, Arguments: json.RawMessage(`{"name":"alpha"}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c", Content: skillText},
		{Role: memory.RoleUser, Content: "new"},
	}
	var keep []string
	if set.Tool().Definition().NoTruncate {
		keep = append(keep, set.Tool().Definition().Name)
	}
	assert.Equal(t, skillText, memory.Truncate(msgs, memory.TruncateOptions{Keep: keep})[2].Content)
	assert.NotEqual(t, skillText, memory.Truncate(msgs, memory.TruncateOptions{})[2].Content, "the check above can fail")
}
