package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// forecastArgs has a field of every kind the inferred schema treats
// differently.
type forecastArgs struct {
	City   string `json:"city" jsonschema:"the city, for example Paris"`
	Days   *int   `json:"days" jsonschema:"how many days; 1 when absent"`
	Units  string `json:"units,omitempty"`
	Detail struct {
		Hourly *bool `json:"hourly"`
		Step   int   `json:"step"`
	} `json:"detail"`
	Internal string `json:"-"`
}

func forecastTool(opts ...agent.ToolOption) agent.Tool {
	return agent.NewTool("forecast", "Weather forecast for a city.",
		func(ctx context.Context, in forecastArgs, _ agent.Progress) (string, error) {
			days := 1
			if in.Days != nil {
				days = *in.Days
			}
			return fmt.Sprintf("%d days of sun in %s, step %d", days, in.City, in.Detail.Step), nil
		}, opts...)
}

// TestNewToolSchema: the schema the model gets is inferred from the Go type:
// json names, jsonschema descriptions, pointer and omitempty fields
// optional, unknown properties refused, and a struct without fields is an
// empty object.
func TestNewToolSchema(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Text("No tool needed.").Finish("stop"))
	ping := agent.NewTool("ping", "Answers pong.", func(context.Context, struct{}, agent.Progress) (string, error) {
		return "pong", nil
	}, agent.WithSkipApproval(), agent.WithNoTruncate())
	a := newAgent(t, srv, nil, forecastTool(), ping)
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)

	tools := srv.Requests()[1].Tools
	require.Len(t, tools, 2)
	assert.Equal(t, "forecast", tools[0].Name)
	assert.Equal(t, "Weather forecast for a city.", tools[0].Description)
	assert.JSONEq(t, `{
		"type": "object",
		"properties": {
			"city": {"type": "string", "description": "the city, for example Paris"},
			"days": {"type": ["null", "integer"], "description": "how many days; 1 when absent"},
			"units": {"type": "string"},
			"detail": {
				"type": "object",
				"properties": {"hourly": {"type": ["null", "boolean"]}, "step": {"type": "integer"}},
				"required": ["step"],
				"additionalProperties": false
			}
		},
		"required": ["city", "detail"],
		"additionalProperties": false
	}`, string(tools[0].Parameters))
	assert.Equal(t, "ping", tools[1].Name)
	assert.JSONEq(t, `{"type":"object","properties":{},"additionalProperties":false}`, string(tools[1].Parameters))

	def := ping.Definition()
	assert.True(t, def.SkipApproval)
	assert.True(t, def.NoTruncate)

	override := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	assert.Equal(t, override, forecastTool(agent.WithParameters(override)).Definition().Parameters)
}

// TestArgumentsCheckedBeforeApproval: a call whose arguments do not match
// the tool's schema, or cannot be decoded into a typed tool's Args, never
// reaches the Approver or the tool. The model reads what is wrong, the other
// call of the round runs, and the run goes on.
func TestArgumentsCheckedBeforeApproval(t *testing.T) {
	var ran atomic.Int32
	counted := agent.NewTool("count", "Counts.",
		func(_ context.Context, in struct {
			N int `json:"n"`
		}, _ agent.Progress) (string, error) {
			ran.Add(1)
			return fmt.Sprint(in.N), nil
		},
		// A schema written by hand that lets through what an int cannot
		// hold and properties the Go type does not have.
		agent.WithParameters(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}))
	tests := []struct {
		name, tool, args string
		want             []string // in the tool message the model reads
	}{
		{"hand-written schema, wrong type", "get_weather", `{"city":5}`, []string{"at '/city': got number, want string"}},
		{"hand-written schema, missing property", "get_weather", `{}`, []string{"missing property 'city'"}},
		{"typed, wrong type and unknown property", "forecast", `{"city":true,"detail":{"step":1},"x":1}`,
			[]string{"at '/city': got boolean, want string", "additional properties 'x' not allowed"}},
		{"typed, nested", "forecast", `{"city":"Oslo","detail":{"step":"two"}}`, []string{"at '/detail/step': got string, want integer"}},
		{"typed, fraction for an int", "count", `{"n":2.0}`, []string{"field n: cannot use number 2.0 as int"}},
		{"typed, too big for an int", "count", `{"n":1e30}`, []string{"field n: cannot use number 1e30 as int"}},
		{"typed, property Args does not have", "count", `{"n":1,"m":2}`, []string{`unknown field "m"`}},
	}
	for _, tt := range tests {
		for _, parallel := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/parallel=%v", tt.name, parallel), func(t *testing.T) {
				leaktest.Check(t)
				ran.Store(0)
				srv := newServer(t)
				srv.Enqueue(
					planNeedTool(),
					agenttest.Reply().
						Call(0, "call_bad", tt.tool, tt.args).
						Call(1, "call_ok", "forecast", `{"city":"Oslo","days":null,"detail":{"step":3}}`).
						Finish("tool_calls"),
					agenttest.Reply().Text("Let me fix that.").Finish("stop"),
				)
				var mu sync.Mutex
				var asked []string
				a := newAgent(t, srv, func(c *agent.Config) {
					c.ParallelTools = parallel
					c.Approver = agent.ApproverFunc(func(_ context.Context, r agent.ApprovalRequest) (agent.Decision, error) {
						mu.Lock()
						asked = append(asked, r.Call.ID)
						mu.Unlock()
						return agent.Decision{Approved: true}, nil
					})
				}, weatherTool(), forecastTool(), counted)
				turn := a.NewTurn(agent.Input{Message: "go"})
				chunks, err := collect(turn.Run(context.Background()))
				require.NoError(t, err)

				assert.Equal(t, []string{"call_ok"}, asked, "only the valid call is asked for")
				assert.Zero(t, ran.Load(), "the invalid call never runs")
				res := results(chunks)
				assert.Equal(t, "1 days of sun in Oslo, step 3", res["call_ok"])
				msgs := srv.Requests()[2].Messages
				bad := msgs[len(msgs)-2]
				require.Equal(t, "call_bad", bad.ToolCallID)
				rej := rejection(t, chunks, "call_bad")
				assert.Equal(t, agent.CauseInvalidArguments, rej.Cause)
				assert.Equal(t, rej.Reason, bad.Content, "the chunk shows what the model reads")
				assert.Contains(t, bad.Content, "the arguments of "+tt.tool+" do not fit its parameters")
				for _, w := range tt.want {
					assert.Contains(t, bad.Content, w)
				}
				assert.Equal(t, "round_end", chunks[len(chunks)-1].Kind.String(), "the run goes on: %v", trace(chunks))
				validHistory(t, turn.Messages())
			})
		}
	}
}

// TestToolSchemaErrorsAtRegistration: a tool whose schema is not valid, or
// cannot be inferred from its Go type, cannot be registered.
func TestToolSchemaErrorsAtRegistration(t *testing.T) {
	noop := func(context.Context, json.RawMessage, agent.Progress) (string, error) { return "", nil }
	hand := func(params map[string]any) agent.Tool {
		return agent.FuncTool{Def: agent.ToolDefinition{Name: "t", Parameters: params}, Fn: noop}
	}
	tests := []struct {
		name string
		tool agent.Tool
		want string
	}{
		{"unknown type", hand(map[string]any{"type": "strin"}), "not a valid JSON schema"},
		{"bad keyword value", hand(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"minimum": "zero"}}}), "not a valid JSON schema"},
		{"reference to another document", hand(map[string]any{"$ref": "https://example.com/schema.json"}), "cannot refer to other documents"},
		{"unmarshalable schema", hand(map[string]any{"type": func() {}}), "not a valid JSON schema"},
		{"typed, channel field", agent.NewTool("t", "", func(context.Context, struct{ C chan int }, agent.Progress) (string, error) { return "", nil }), "unsupported"},
		{"typed, not an object", agent.NewTool("t", "", func(context.Context, string, agent.Progress) (string, error) { return "", nil }), "must be a struct"},
		{"typed, nil function", agent.NewTool[struct{}]("t", "", nil), "nil function"},
		{"typed, bad override", agent.NewTool("t", "", func(context.Context, struct{}, agent.Progress) (string, error) { return "", nil },
			agent.WithParameters(map[string]any{"required": "all"})), "not a valid JSON schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.NewToolRegistry(tt.tool)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `agent: tool "t"`)
			assert.Contains(t, err.Error(), tt.want)

			reg, err := agent.NewToolRegistry()
			require.NoError(t, err)
			require.Error(t, reg.Add(tt.tool))
			assert.Empty(t, reg.Names(), "nothing was registered")
		})
	}
	// Pointer Args are fine: the arguments are still an object.
	ptr := agent.NewTool("p", "", func(_ context.Context, in *struct{ A int }, _ agent.Progress) (string, error) {
		return fmt.Sprint(in.A), nil
	})
	_, err := agent.NewToolRegistry(ptr)
	require.NoError(t, err)
	assert.Equal(t, "object", ptr.Definition().Parameters["type"])
	out, err := ptr.Execute(context.Background(), json.RawMessage(`{"A":7}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "7", out)
	out, err = ptr.Execute(context.Background(), nil, nil)
	require.NoError(t, err, "no arguments are an empty object")
	assert.Equal(t, "0", out)
}

// callRecorder is a tool that records the CallInfo of its SideMessage and
// Execute contexts.
type callRecorder struct {
	name string
	skip bool
	mu   sync.Mutex
	side []agent.CallInfo
	exec []agent.CallInfo
}

func (c *callRecorder) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{Name: c.name, SkipApproval: c.skip}
}

func (c *callRecorder) SideMessage(ctx context.Context, _ agent.ToolCall) (any, error) {
	info, ok := agent.CallFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("no call in the context")
	}
	c.mu.Lock()
	c.side = append(c.side, info)
	c.mu.Unlock()
	return nil, nil
}

func (c *callRecorder) Execute(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
	info, ok := agent.CallFromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no call in the context")
	}
	c.mu.Lock()
	c.exec = append(c.exec, info)
	c.mu.Unlock()
	return "ok", nil
}

// TestCallFromContext: a tool's Execute and SideMessage contexts carry the
// call: session, call id, tool name, round and the prepared approval's id.
func TestCallFromContext(t *testing.T) {
	_, ok := agent.CallFromContext(context.Background())
	assert.False(t, ok)
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "deploy", `{}`).Call(1, "call_2", "show", `{}`).Finish("tool_calls"),
				agenttest.Reply().Call(0, "call_3", "deploy", `{}`).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"),
			)
			deploy := &callRecorder{name: "deploy"}
			show := &callRecorder{name: "show", skip: true}
			approver := &recorder{decide: func(context.Context) (agent.Decision, error) { return agent.Decision{Approved: true}, nil }}
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Approver = approver
				c.ParallelTools = parallel
			}, deploy, show)
			chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "deploy"}))
			require.NoError(t, err)
			approvals := map[string]string{}
			for _, c := range chunks {
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
					approvals[c.Tool.ID] = c.Tool.ApprovalID
				}
			}
			require.Len(t, approvals, 2)

			want := []agent.CallInfo{
				{SessionID: "s1", CallID: "call_1", Tool: "deploy", Round: 1, ApprovalID: approvals["call_1"]},
				{SessionID: "s1", CallID: "call_3", Tool: "deploy", Round: 2, ApprovalID: approvals["call_3"]},
			}
			assert.Equal(t, want, deploy.exec)
			assert.Equal(t, want, deploy.side, "SideMessage gets the same")
			assert.NotEmpty(t, want[0].ApprovalID)
			assert.NotEqual(t, want[0].ApprovalID, want[1].ApprovalID)
			wantShow := []agent.CallInfo{{SessionID: "s1", CallID: "call_2", Tool: "show", Round: 1}}
			assert.Equal(t, wantShow, show.exec, "no approval was prepared for a tool that skips it")
		})
	}
}

// TestCallFromContextInSubAgent: a tool that runs an agent of its own (a
// sub-agent) passes its context on; the sub-agent's tools see their own call
// with the outer call as its parent.
func TestCallFromContextInSubAgent(t *testing.T) {
	leaktest.Check(t)
	innerSrv := newServer(t)
	innerSrv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "inner_1", "leaf", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Inner done.").Finish("stop"),
	)
	leaf := &callRecorder{name: "leaf", skip: true}
	inner := newAgent(t, innerSrv, nil, leaf)
	delegate := agent.NewTool("delegate", "Delegates to a sub-agent.",
		func(ctx context.Context, in struct {
			Task string `json:"task"`
		}, _ agent.Progress) (string, error) {
			outer, _ := agent.CallFromContext(ctx)
			var answer string
			for c, err := range inner.Run(ctx, agent.Input{SessionID: outer.SessionID + "/" + outer.CallID, Message: in.Task}) {
				if err != nil {
					return "", err
				}
				if c.Kind == agent.KindText && c.Round == 2 {
					answer += c.Text
				}
			}
			return answer, nil
		})

	srv := newServer(t)
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "outer_1", "delegate", `{"task":"do it"}`).Finish("tool_calls"),
		agenttest.Reply().Text("All done.").Finish("stop"),
	)
	chunks, err := collect(newAgent(t, srv, nil, delegate).Run(context.Background(), agent.Input{SessionID: "s1", Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, "Inner done.", results(chunks)["outer_1"])

	require.Len(t, leaf.exec, 1)
	got := leaf.exec[0]
	require.NotNil(t, got.Parent)
	assert.Equal(t, agent.CallInfo{SessionID: "s1", CallID: "outer_1", Tool: "delegate", Round: 1}, *got.Parent)
	got.Parent = nil
	assert.Equal(t, agent.CallInfo{SessionID: "s1/outer_1", CallID: "inner_1", Tool: "leaf", Round: 1}, got)
}
