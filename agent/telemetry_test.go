package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/oteltest"
	"github.com/planround/planround/memory"
)

// recording is a tracer provider and a meter provider that record in
// memory, for an agent's Config.
type recording struct {
	tp *oteltest.TracerProvider
	mp *oteltest.MeterProvider
}

func newRecording(*testing.T) *recording {
	return &recording{tp: &oteltest.TracerProvider{}, mp: &oteltest.MeterProvider{}}
}

// config sets the recording's providers in c.
func (rec *recording) config(c *agent.Config) {
	c.TracerProvider, c.MeterProvider = rec.tp, rec.mp
}

// tree renders the ended spans as an indented tree, children in start
// order: "invoke_agent", "  chat test-model", ...
func (rec *recording) tree() []string {
	spans := rec.tp.Ended()
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = true
	}
	var out []string
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range spans {
			p := ""
			if s.Parent.IsValid() && ids[s.Parent.SpanID().String()] {
				p = s.Parent.SpanID().String()
			}
			if p == parent {
				out = append(out, strings.Repeat("  ", depth)+s.Name)
				walk(s.SpanContext.SpanID().String(), depth+1)
			}
		}
	}
	walk("", 0)
	return out
}

// named returns the ended spans called name, in start order.
func (rec *recording) named(name string) []oteltest.Ended {
	var out []oteltest.Ended
	for _, s := range rec.tp.Ended() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span called name.
func (rec *recording) one(t *testing.T, name string) oteltest.Ended {
	t.Helper()
	spans := rec.named(name)
	require.Len(t, spans, 1, "spans named %q in %v", name, rec.tree())
	return spans[0]
}

// attrs returns a span's attributes by key, as their values' Go form.
func attrs(s oteltest.Ended) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

// events returns the names of a span's events.
func events(s oteltest.Ended) []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// metrics returns the recorded metrics by name.
func (rec *recording) metrics(*testing.T) map[string]oteltest.Metric {
	return rec.mp.Metrics()
}

// points renders the points of a histogram or a sum as
// "attr=value,...: count/sum" (an int64 histogram), "...: count" (a
// float64 histogram) or "...: sum" (an int64 counter or up-down counter),
// sorted.
func points(t *testing.T, m oteltest.Metric) []string {
	t.Helper()
	render := func(set attribute.Set) string {
		var kvs []string
		for _, kv := range set.ToSlice() {
			kvs = append(kvs, string(kv.Key)+"="+kv.Value.String())
		}
		return strings.Join(kvs, ",")
	}
	if m.Instrument == "" {
		t.Fatalf("no such metric")
	}
	var out []string
	for _, p := range m.Points {
		switch m.Instrument {
		case "Int64Histogram":
			out = append(out, fmt.Sprintf("%s: %d/%d", render(p.Attributes), p.Count, p.Int))
		case "Float64Histogram":
			out = append(out, fmt.Sprintf("%s: %d", render(p.Attributes), p.Count))
		case "Int64Counter", "Int64UpDownCounter":
			out = append(out, fmt.Sprintf("%s: %d", render(p.Attributes), p.Int))
		default:
			t.Fatalf("unexpected instrument %q of %s", m.Instrument, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// noContent checks that no span records content.
func noContent(t *testing.T, rec *recording) {
	t.Helper()
	for _, s := range rec.tp.Ended() {
		for _, key := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			assert.NotContains(t, attrs(s), key, "span %s records content without the opt-in", s.Name)
		}
	}
}

func TestTelemetryNoToolRun(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("It is noon.").Usage(20, 5).Finish("stop"))
	rec := newRecording(t)
	a := newAgent(t, srv, rec.config)
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "What time is it?"}))
	require.NoError(t, err)

	assert.Equal(t, []string{"invoke_agent", "  chat test-model", "  chat test-model"}, rec.tree())
	run := rec.one(t, "invoke_agent")
	assert.Equal(t, map[string]any{
		"gen_ai.operation.name":     "invoke_agent",
		"gen_ai.request.model":      "test-model",
		"gen_ai.conversation.id":    "s1",
		"planround.resumed":         false,
		"planround.outcome":         "answered",
		"planround.round":           int64(1),
		"planround.intent":          "no_tool",
		"gen_ai.usage.input_tokens": int64(20), "gen_ai.usage.output_tokens": int64(5),
	}, attrs(run))
	assert.Equal(t, codes.Unset, run.Status.Code)

	chats := rec.named("chat test-model")
	require.Len(t, chats, 2)
	plan := attrs(chats[0])
	assert.Equal(t, "chat", plan["gen_ai.operation.name"])
	assert.Equal(t, "test-model", plan["gen_ai.request.model"])
	assert.NotContains(t, plan, "gen_ai.provider.name", "a local server's provider cannot be told")
	assert.Equal(t, int64(0), plan["planround.round"])
	assert.Equal(t, "no_tool", plan["planround.intent"])
	assert.Equal(t, []string{"stop"}, plan["gen_ai.response.finish_reasons"])
	assert.Equal(t, []string{"first_token"}, events(chats[0]))
	answer := attrs(chats[1])
	assert.Equal(t, int64(1), answer["planround.round"])
	assert.NotContains(t, answer, "planround.intent")
	assert.Equal(t, int64(20), answer["gen_ai.usage.input_tokens"])
	assert.Equal(t, int64(5), answer["gen_ai.usage.output_tokens"])
	noContent(t, rec)

	m := rec.metrics(t)
	assert.Equal(t, []string{"gen_ai.operation.name=chat,gen_ai.request.model=test-model: 2"}, points(t, m["gen_ai.client.operation.duration"]))
	assert.Equal(t, []string{
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=input: 1/20",
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=output: 1/5",
	}, points(t, m["gen_ai.client.token.usage"]))
	assert.Equal(t, []string{"gen_ai.operation.name=invoke_agent,planround.outcome=answered,planround.resumed=false: 1"}, points(t, m["planround.runs"]))
}

// TestUsageCachedAndReasoningTokens: the cached and reasoning tokens the
// server reports reach each round's round_end chunk, the turn's usage, the
// chat spans and the run span (summed); the token metric keeps only the
// conventions' input and output types, cached tokens counted in the input.
func TestUsageCachedAndReasoningTokens(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Text("Hello! I can ", "answer that.<no_", "tool>").Usage(100, 20).CachedTokens(64).ReasoningTokens(8).Finish("stop"),
		agenttest.Reply().Text("It is noon.").UsageInFinish().ReasoningTokens(12).CachedTokens(128).Usage(150, 30).Finish("stop"),
	)
	rec := newRecording(t)
	a := newAgent(t, srv, rec.config)
	turn := a.NewTurn(agent.Input{SessionID: "s1", Message: "What time is it?"})
	chunks, err := collect(turn.Run(context.Background()))
	require.NoError(t, err)

	plan := agent.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CacheReadTokens: 64, ReasoningTokens: 8}
	answer := agent.Usage{PromptTokens: 150, CompletionTokens: 30, TotalTokens: 180, CacheReadTokens: 128, ReasoningTokens: 12}
	var rounds []agent.Usage
	for _, c := range chunks {
		if c.Kind == agent.KindRoundEnd {
			require.NotNil(t, c.Usage, "round %d reports usage", c.Round)
			rounds = append(rounds, *c.Usage)
		}
	}
	assert.Equal(t, []agent.Usage{plan, answer}, rounds)
	assert.Equal(t, plan.Add(answer), turn.Usage())

	run := attrs(rec.one(t, "invoke_agent"))
	assert.Equal(t, int64(250), run["gen_ai.usage.input_tokens"])
	assert.Equal(t, int64(192), run["gen_ai.usage.cache_read.input_tokens"])
	assert.Equal(t, int64(20), run["gen_ai.usage.reasoning.output_tokens"])
	assert.NotContains(t, run, "gen_ai.usage.cache_creation.input_tokens", "no cache writes reported")
	chats := rec.named("chat test-model")
	require.Len(t, chats, 2)
	for i, want := range []agent.Usage{plan, answer} {
		got := attrs(chats[i])
		assert.Equal(t, want.PromptTokens, got["gen_ai.usage.input_tokens"], "chat %d", i)
		assert.Equal(t, want.CacheReadTokens, got["gen_ai.usage.cache_read.input_tokens"], "chat %d", i)
		assert.Equal(t, want.ReasoningTokens, got["gen_ai.usage.reasoning.output_tokens"], "chat %d", i)
	}

	m := rec.metrics(t)
	assert.Equal(t, []string{
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=input: 2/250",
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=output: 2/50",
	}, points(t, m["gen_ai.client.token.usage"]))
}

func TestTelemetryToolRunWithApproval(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Usage(30, 6).Finish("tool_calls"),
		agenttest.Reply().Text("Sunny in Oslo.").Finish("stop"))
	rec := newRecording(t)
	a := newAgent(t, srv, rec.config, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Oslo?"}))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"invoke_agent",
		"  chat test-model",
		"  chat test-model",
		"  await_approval get_weather",
		"  execute_tool get_weather",
		"  chat test-model",
	}, rec.tree())
	assert.Equal(t, "answered", attrs(rec.one(t, "invoke_agent"))["planround.outcome"])
	assert.NotContains(t, attrs(rec.one(t, "invoke_agent")), "gen_ai.conversation.id", "a run without a session has none")
	wait := attrs(rec.one(t, "await_approval get_weather"))
	assert.Equal(t, "approved", wait["planround.outcome"])
	assert.Equal(t, true, wait["planround.approval.waited"], "the ticket was pending: a person was waited for")
	assert.Equal(t, "call_1", wait["gen_ai.tool.call.id"])
	assert.Equal(t, map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "get_weather",
		"gen_ai.tool.call.id":   "call_1",
		"gen_ai.tool.type":      "function",
		"planround.round":       int64(1),
		"planround.outcome":     "result",
	}, attrs(rec.one(t, "execute_tool get_weather")))
	chats := rec.named("chat test-model")
	assert.Equal(t, "need_tool", attrs(chats[0])["planround.intent"])
	assert.Equal(t, []string{"tool_calls"}, attrs(chats[1])["gen_ai.response.finish_reasons"])
	assert.Equal(t, []string{"first_token"}, events(chats[1]), "a tool call is the first token of a response without text")
	noContent(t, rec)

	m := rec.metrics(t)
	assert.Equal(t, []string{"gen_ai.operation.name=execute_tool,gen_ai.tool.name=get_weather,planround.outcome=result: 1"}, points(t, m["planround.tool.duration"]))
	assert.Equal(t, []string{"gen_ai.tool.name=get_weather,planround.outcome=approved: 1"}, points(t, m["planround.approval.wait"]))
	assert.Equal(t, []string{
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=input: 2/40",
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=output: 2/10",
	}, points(t, m["gen_ai.client.token.usage"]))
}

func TestTelemetryRejection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision agent.Decision
		want     string
	}{
		{"rejected", agent.Decision{Reason: "no"}, "rejected"},
		{"timed out", agent.Decision{Cause: agent.CauseTimeout}, "timed_out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
			rec := newRecording(t)
			no := personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) { return tc.decision, nil })
			a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Approver = no }, weatherTool())
			_, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Oslo?"}))
			require.NoError(t, err)

			assert.Equal(t, []string{"invoke_agent", "  chat test-model", "  chat test-model", "  await_approval get_weather"}, rec.tree())
			assert.Equal(t, "rejected", attrs(rec.one(t, "invoke_agent"))["planround.outcome"])
			assert.Equal(t, tc.want, attrs(rec.one(t, "await_approval get_weather"))["planround.outcome"])
			assert.Equal(t, []string{"gen_ai.operation.name=invoke_agent,planround.outcome=rejected,planround.resumed=false: 1"}, points(t, rec.metrics(t)["planround.runs"]))
		})
	}
}

func TestTelemetryInterrupt(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := personFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
		cancel() // the user presses stop while the card waits
		<-ctx.Done()
		return agent.Decision{}, ctx.Err()
	})
	rec := newRecording(t)
	a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Approver = stop }, weatherTool())
	_, err := collect(a.Run(ctx, agent.Input{Message: "go"}))
	require.NoError(t, err)

	assert.Equal(t, []string{"invoke_agent", "  chat test-model", "  chat test-model", "  await_approval get_weather"}, rec.tree())
	run := rec.one(t, "invoke_agent")
	assert.Equal(t, "interrupted", attrs(run)["planround.outcome"])
	assert.Equal(t, codes.Unset, run.Status.Code, "an interrupt is not an error")
	assert.Equal(t, "interrupted", attrs(rec.one(t, "await_approval get_weather"))["planround.outcome"])
}

func TestTelemetryInterruptDuringExecution(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := weatherTool().(agent.FuncTool)
	slow.Fn = func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}
	rec := newRecording(t)
	a := newAgent(t, srv, rec.config, slow)
	_, err := collect(a.Run(ctx, agent.Input{Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, "interrupted", attrs(rec.one(t, "execute_tool get_weather"))["planround.outcome"])
	assert.Equal(t, "interrupted", attrs(rec.one(t, "invoke_agent"))["planround.outcome"])
}

func TestTelemetryModelError(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	srv.Enqueue(agenttest.HTTPError(500, "the model is down"))
	rec := newRecording(t)
	a := newAgent(t, srv, rec.config)
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.Error(t, err)

	assert.Equal(t, []string{"invoke_agent", "  chat test-model"}, rec.tree())
	run := rec.one(t, "invoke_agent")
	assert.Equal(t, "error", attrs(run)["planround.outcome"])
	assert.Equal(t, codes.Error, run.Status.Code)
	assert.Contains(t, run.Status.Description, "the model is down")
	chat := rec.one(t, "chat test-model")
	assert.Equal(t, codes.Error, chat.Status.Code)
	assert.Equal(t, "500", attrs(chat)["error.type"])
	assert.Contains(t, events(chat), "exception")

	m := rec.metrics(t)
	assert.Equal(t, []string{"error.type=500,gen_ai.operation.name=chat,gen_ai.request.model=test-model: 1"}, points(t, m["gen_ai.client.operation.duration"]))
	assert.Equal(t, []string{"gen_ai.operation.name=invoke_agent,planround.outcome=error,planround.resumed=false: 1"}, points(t, m["planround.runs"]))
}

func TestTelemetrySuspendAndResume(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	srv := newServer(t)
	openTurn(srv)
	k := newKeeper()
	rec := newRecording(t)
	a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Store = &memory.MemStore{}; c.Approver = k }, weatherTool())
	chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
	require.NoError(t, err)
	assert.Equal(t, "suspended", attrs(rec.one(t, "invoke_agent"))["planround.outcome"])
	assert.Equal(t, "suspended", attrs(rec.one(t, "await_approval get_weather"))["planround.outcome"])

	k.decide(chunks[len(chunks)-2].Tool.ApprovalID, agent.Decision{Approved: true})
	srv.Enqueue(agenttest.Reply().Text("Sunny in Lima.").Finish("stop"))
	rec.tp.Reset()
	_, err = collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"invoke_agent", "  await_approval get_weather", "  execute_tool get_weather", "  chat test-model"}, rec.tree())
	run := attrs(rec.one(t, "invoke_agent"))
	assert.Equal(t, true, run["planround.resumed"])
	assert.Equal(t, "answered", run["planround.outcome"])
	assert.Equal(t, "s1", run["gen_ai.conversation.id"])
	wait := attrs(rec.one(t, "await_approval get_weather"))
	assert.Equal(t, "approved", wait["planround.outcome"])
	assert.Equal(t, "appr-1", wait["planround.approval.id"])
	assert.Equal(t, []string{
		"gen_ai.operation.name=invoke_agent,planround.outcome=answered,planround.resumed=true: 1",
		"gen_ai.operation.name=invoke_agent,planround.outcome=suspended,planround.resumed=false: 1",
	}, points(t, rec.metrics(t)["planround.runs"]))
}

func TestTelemetryContentOptIn(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	long := strings.Repeat("é", 300) // 600 bytes: cut by the limit
	srv.Enqueue(planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.Reply().Text(long).Finish("stop"))
	rec := newRecording(t)
	a := newAgent(t, srv, func(c *agent.Config) {
		rec.config(c)
		c.TelemetryContent = true
		c.TelemetryContentLimit = 201
	}, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{Message: "Weather in Oslo?"}))
	require.NoError(t, err)

	tool := attrs(rec.one(t, "execute_tool get_weather"))
	assert.Equal(t, `{"city":"Oslo"}`, tool["gen_ai.tool.call.arguments"])
	assert.Equal(t, "sunny in Oslo", tool["gen_ai.tool.call.result"])
	chats := rec.named("chat test-model")
	require.Len(t, chats, 3)
	in := attrs(chats[0])["gen_ai.input.messages"].(string)
	assert.True(t, strings.HasPrefix(in, `[{"role":"user","parts":[{"type":"text","content":"Weather in Oslo?`), in)
	assert.Contains(t, in, "…[truncated: ", "the planning prompt makes the request longer than the limit")
	assert.Equal(t, `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"get_weather","arguments":{"city":"Oslo"}}],"finish_reason":"tool_calls"}]`,
		attrs(chats[1])["gen_ai.output.messages"])
	out := attrs(chats[2])["gen_ai.output.messages"].(string)
	head, marker, ok := strings.Cut(out, "…[truncated: ")
	require.True(t, ok, out)
	assert.True(t, len(head) == 200 || len(head) == 201, "cut at the limit: %d bytes", len(head))
	assert.True(t, utf8.ValidString(head), "cut on a character boundary: %q", head)
	assert.True(t, strings.HasSuffix(marker, "bytes]"), marker)
}

func TestTelemetryConfig(t *testing.T) {
	_, err := agent.New(agent.Config{Model: "m", TelemetryContentLimit: -1})
	assert.ErrorContains(t, err, "TelemetryContentLimit is -1")

}

// TestTelemetrySubAgentNests: a sub-agent's run is a child of the span of
// the call that started it, with its own chat and execute_tool spans under
// it, whatever provider the sub-agent's Config names: the nested run's
// spans come from the calling run's context.
func TestTelemetrySubAgentNests(t *testing.T) {
	leaktest.Check(t)
	rec := newRecording(t)
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
	research := newSubAgent(t, "research", subConfig(t, srv, subTools, rec.config))
	a := newAgent(t, srv, rec.config, research)
	_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"invoke_agent",
		"  chat test-model",
		"  chat test-model",
		"  await_approval research",
		"  execute_tool research",
		"    invoke_agent",
		"      chat sub-model",
		"      await_approval get_weather",
		"      execute_tool get_weather",
		"      chat sub-model",
		"  chat test-model",
	}, rec.tree())
}

// logCapture is a slog.Handler that keeps the records it handles; safe for
// concurrent use (a sub-agent's run logs from its call's goroutine).
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (*logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler     { return l }
func (l *logCapture) WithGroup(string) slog.Handler          { return l }

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// modelCalls returns the model attribute of each "model call" record, in
// order.
func (l *logCapture) modelCalls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if r.Message != "model call" {
			continue
		}
		model := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "model" {
				model = a.Value.String()
			}
			return true
		})
		out = append(out, model)
	}
	return out
}

// TestTelemetrySubAgentInherits: a sub-agent whose Config names no
// TracerProvider, MeterProvider or Logger records its run in the calling
// run's: its chat spans nest under the call in the host's tracer provider,
// its token metrics are in the host's meter provider, its model calls are
// logged by the host's Logger, each with the sub-agent's model. A sub-agent
// with providers and a Logger of its own keeps them.
func TestTelemetrySubAgentInherits(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather in Oslo?"}`).Usage(30, 3).Finish("tool_calls"),
			agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Usage(11, 2).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny in Oslo.").Usage(13, 4).Finish("stop"),
			agenttest.Reply().Text("Research says: sunny.").Usage(40, 5).Finish("stop"),
		)
	}
	subTree := []string{
		"invoke_agent",
		"  chat sub-model",
		"  await_approval get_weather",
		"  execute_tool get_weather",
		"  chat sub-model",
	}
	hostTree := []string{
		"invoke_agent",
		"  chat test-model",
		"  chat test-model",
		"  await_approval research",
		"  execute_tool research",
		"  chat test-model",
	}
	// tokens are the token usage points of n calls of model.
	tokens := func(model string, n, in, out int) []string {
		return []string{
			fmt.Sprintf("gen_ai.operation.name=chat,gen_ai.request.model=%s,gen_ai.token.type=input: %d/%d", model, n, in),
			fmt.Sprintf("gen_ai.operation.name=chat,gen_ai.request.model=%s,gen_ai.token.type=output: %d/%d", model, n, out),
		}
	}
	hostTokens := tokens("test-model", 3, 10+30+40, 4+3+5)
	subTokens := tokens("sub-model", 2, 11+13, 2+4)

	t.Run("inherited", func(t *testing.T) {
		leaktest.Check(t)
		srv := newServer(t)
		script(srv)
		rec, logs := newRecording(t), &logCapture{}
		subTools, err := agent.NewToolRegistry(weatherTool())
		require.NoError(t, err)
		research := newSubAgent(t, "research", subConfig(t, srv, subTools, nil))
		a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Logger = slog.New(logs) }, research)
		_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
		require.NoError(t, err)

		assert.Equal(t, []string{
			"invoke_agent",
			"  chat test-model",
			"  chat test-model",
			"  await_approval research",
			"  execute_tool research",
			"    invoke_agent",
			"      chat sub-model",
			"      await_approval get_weather",
			"      execute_tool get_weather",
			"      chat sub-model",
			"  chat test-model",
		}, rec.tree())
		m := rec.metrics(t)
		assert.ElementsMatch(t, append(hostTokens, subTokens...), points(t, m["gen_ai.client.token.usage"]))
		assert.Contains(t, points(t, m["gen_ai.client.operation.duration"]), "gen_ai.operation.name=chat,gen_ai.request.model=sub-model: 2")
		assert.Len(t, points(t, m["planround.runs"]), 1, "one point: the host's run and the sub-agent's both answered")
		assert.Equal(t, "gen_ai.operation.name=invoke_agent,planround.outcome=answered,planround.resumed=false: 2", points(t, m["planround.runs"])[0])
		assert.Equal(t, []string{"test-model", "test-model", "sub-model", "sub-model", "test-model"}, logs.modelCalls())
		assert.Len(t, srv.Requests(), 5)
	})

	t.Run("own", func(t *testing.T) {
		leaktest.Check(t)
		srv := newServer(t)
		script(srv)
		host, hostLogs := newRecording(t), &logCapture{}
		own, ownLogs := newRecording(t), &logCapture{}
		subTools, err := agent.NewToolRegistry(weatherTool())
		require.NoError(t, err)
		research := newSubAgent(t, "research", subConfig(t, srv, subTools, func(c *agent.Config) {
			own.config(c)
			c.Logger = slog.New(ownLogs)
		}))
		a := newAgent(t, srv, func(c *agent.Config) { host.config(c); c.Logger = slog.New(hostLogs) }, research)
		_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
		require.NoError(t, err)

		assert.Equal(t, hostTree, host.tree())
		assert.Equal(t, subTree, own.tree(), "the sub-agent's own provider has its run; its parent span is in the host's")
		assert.ElementsMatch(t, hostTokens, points(t, host.metrics(t)["gen_ai.client.token.usage"]))
		assert.ElementsMatch(t, subTokens, points(t, own.metrics(t)["gen_ai.client.token.usage"]))
		assert.Equal(t, []string{"test-model", "test-model", "test-model"}, hostLogs.modelCalls())
		assert.Equal(t, []string{"sub-model", "sub-model"}, ownLogs.modelCalls())
	})

	t.Run("two deep", func(t *testing.T) {
		// A sub-agent's sub-agent takes them from the sub-agent's run,
		// which took them from the host's.
		leaktest.Check(t)
		srv := newServer(t)
		srv.Enqueue(
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "research", `{"task":"weather in Oslo?"}`).Finish("tool_calls"),
			agenttest.Reply().Call(0, "call_2", "search", `{"task":"Oslo weather"}`).Finish("tool_calls"),
			agenttest.Reply().Call(0, "call_3", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny.").Finish("stop"),
			agenttest.Reply().Text("Sunny in Oslo.").Finish("stop"),
			agenttest.Reply().Text("Research says: sunny.").Finish("stop"),
		)
		rec, logs := newRecording(t), &logCapture{}
		searchTools, err := agent.NewToolRegistry(weatherTool())
		require.NoError(t, err)
		search := newSubAgent(t, "search", subConfig(t, srv, searchTools, func(c *agent.Config) { c.Model = "search-model" }))
		researchTools, err := agent.NewToolRegistry(search)
		require.NoError(t, err)
		research := newSubAgent(t, "research", subConfig(t, srv, researchTools, nil))
		a := newAgent(t, srv, func(c *agent.Config) { rec.config(c); c.Logger = slog.New(logs) }, research)
		_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
		require.NoError(t, err)

		assert.Equal(t, []string{
			"invoke_agent",
			"  chat test-model",
			"  chat test-model",
			"  await_approval research",
			"  execute_tool research",
			"    invoke_agent",
			"      chat sub-model",
			"      await_approval search",
			"      execute_tool search",
			"        invoke_agent",
			"          chat search-model",
			"          await_approval get_weather",
			"          execute_tool get_weather",
			"          chat search-model",
			"      chat sub-model",
			"  chat test-model",
		}, rec.tree())
		assert.Equal(t, []string{"test-model", "test-model", "sub-model", "search-model", "search-model", "sub-model", "test-model"}, logs.modelCalls())
		assert.Equal(t, "gen_ai.operation.name=invoke_agent,planround.outcome=answered,planround.resumed=false: 3", points(t, rec.metrics(t)["planround.runs"])[0])
	})

	t.Run("mixed", func(t *testing.T) {
		// A sub-agent with a MeterProvider and a Logger of its own
		// inherits the tracer provider only.
		leaktest.Check(t)
		srv := newServer(t)
		script(srv)
		host, hostLogs := newRecording(t), &logCapture{}
		own, ownLogs := newRecording(t), &logCapture{}
		subTools, err := agent.NewToolRegistry(weatherTool())
		require.NoError(t, err)
		research := newSubAgent(t, "research", subConfig(t, srv, subTools, func(c *agent.Config) {
			c.MeterProvider = own.mp
			c.Logger = slog.New(ownLogs)
		}))
		a := newAgent(t, srv, func(c *agent.Config) { host.config(c); c.Logger = slog.New(hostLogs) }, research)
		_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
		require.NoError(t, err)

		assert.Len(t, host.named("chat sub-model"), 2)
		assert.Empty(t, own.tree())
		assert.ElementsMatch(t, hostTokens, points(t, host.metrics(t)["gen_ai.client.token.usage"]))
		assert.ElementsMatch(t, subTokens, points(t, own.metrics(t)["gen_ai.client.token.usage"]))
		assert.Equal(t, []string{"test-model", "test-model", "test-model"}, hostLogs.modelCalls())
		assert.Equal(t, []string{"sub-model", "sub-model"}, ownLogs.modelCalls())
	})
}

// TestTelemetrySummary: the summary request of Config.SummarizeAt is a
// model call like the others: a chat span (with planround.summary) under
// the run's span, its duration and token metrics, and a "model call" log
// record. Every request the server received has its span and its record.
func TestTelemetrySummary(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	rec, logs := newRecording(t), &logCapture{}
	a := newAgent(t, srv, func(c *agent.Config) {
		rec.config(c)
		c.Logger = slog.New(logs)
		c.Store = &memory.MemStore{}
		c.SummarizeAt = 6
	})
	for i := range 2 {
		srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Usage(20, 5).Finish("stop"))
		if i == 1 {
			srv.Enqueue(agenttest.Reply().Text("The user said ", "hello twice.").Usage(50, 6).Finish("stop"))
		}
		_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
		require.NoError(t, err)
	}

	requests := len(srv.Requests())
	require.Equal(t, 5, requests, "two runs of two rounds, and the summary")
	chats := rec.named("chat test-model")
	assert.Len(t, chats, requests, "a chat span per model request")
	assert.Len(t, logs.modelCalls(), requests, "a log record per model request")
	assert.Equal(t, []string{
		"invoke_agent",
		"  chat test-model",
		"  chat test-model",
		"invoke_agent",
		"  chat test-model",
		"  chat test-model",
		"  chat test-model",
	}, rec.tree())

	sum := chats[4]
	got := attrs(sum)
	assert.Equal(t, true, got["planround.summary"])
	assert.NotContains(t, got, "planround.round", "a summary is no round")
	assert.Equal(t, "chat", got["gen_ai.operation.name"])
	assert.Equal(t, "test-model", got["gen_ai.request.model"])
	assert.Equal(t, "s", got["gen_ai.conversation.id"])
	assert.Equal(t, []string{"stop"}, got["gen_ai.response.finish_reasons"])
	assert.Equal(t, int64(50), got["gen_ai.usage.input_tokens"])
	assert.Equal(t, int64(6), got["gen_ai.usage.output_tokens"])
	assert.Equal(t, []string{"first_token"}, events(sum))
	for _, c := range chats[:4] {
		assert.NotContains(t, attrs(c), "planround.summary")
	}
	noContent(t, rec)

	m := rec.metrics(t)
	assert.Equal(t, []string{"gen_ai.operation.name=chat,gen_ai.request.model=test-model: 5"}, points(t, m["gen_ai.client.operation.duration"]))
	assert.Equal(t, []string{
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=input: 3/90",
		"gen_ai.operation.name=chat,gen_ai.request.model=test-model,gen_ai.token.type=output: 3/16",
	}, points(t, m["gen_ai.client.token.usage"]))

	logs.mu.Lock()
	defer logs.mu.Unlock()
	var summary map[string]any
	for _, r := range logs.records {
		if r.Message != "model call" {
			continue
		}
		kv := map[string]any{}
		r.Attrs(func(a slog.Attr) bool { kv[a.Key] = a.Value.Any(); return true })
		if kv["summary"] == true {
			require.Nil(t, summary, "one summary record")
			summary = kv
		}
	}
	require.NotNil(t, summary)
	assert.Equal(t, "s", summary["session"])
	assert.Equal(t, "ok", summary["outcome"])
	assert.Equal(t, "stop", summary["finish_reason"])
	assert.Equal(t, int64(50), summary["prompt_tokens"])
	assert.Equal(t, int64(6), summary["completion_tokens"])
}

// TestTelemetrySummaryContent: with Config.TelemetryContent, the summary's
// chat span records the request it sent and the summary it got.
func TestTelemetrySummaryContent(t *testing.T) {
	srv := newServer(t)
	rec := newRecording(t)
	a := newAgent(t, srv, func(c *agent.Config) {
		rec.config(c)
		c.TelemetryContent = true
		c.Store = &memory.MemStore{}
		c.SummarizeAt = 6
	})
	for i := range 2 {
		srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
		if i == 1 {
			srv.Enqueue(agenttest.Reply().Text("The user said hello.").Finish("stop"))
		}
		_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
		require.NoError(t, err)
	}
	chats := rec.named("chat test-model")
	require.Len(t, chats, 5)
	got := attrs(chats[4])
	assert.Equal(t, true, got["planround.summary"])
	assert.Contains(t, got["gen_ai.input.messages"], "Summarise the conversation transcript")
	assert.Contains(t, got["gen_ai.output.messages"], "The user said hello.")
}

// TestTelemetrySummaryFailure: a summary request that fails is a chat span
// with the error, an operation duration with error.type and an error log
// record; the run goes on to its warning.
func TestTelemetrySummaryFailure(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	rec, logs := newRecording(t), &logCapture{}
	a := newAgent(t, srv, func(c *agent.Config) {
		rec.config(c)
		c.Logger = slog.New(logs)
		c.Store = &memory.MemStore{}
		c.SummarizeAt = 5
	})
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"), agenttest.HTTPError(500, "summary down"))
	_, err = collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)

	chats := rec.named("chat test-model")
	require.Len(t, chats, len(srv.Requests()))
	sum := chats[len(chats)-1]
	assert.Equal(t, true, attrs(sum)["planround.summary"])
	assert.Equal(t, codes.Error, sum.Status.Code)
	assert.Equal(t, "500", attrs(sum)["error.type"])
	assert.Contains(t, points(t, rec.metrics(t)["gen_ai.client.operation.duration"]),
		"error.type=500,gen_ai.operation.name=chat,gen_ai.request.model=test-model: 1")
	assert.Len(t, logs.modelCalls(), len(srv.Requests()))
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var levels []slog.Level
	for _, r := range logs.records {
		if r.Message == "model call" {
			levels = append(levels, r.Level)
		}
	}
	assert.Equal(t, slog.LevelError, levels[len(levels)-1])
}

// TestTelemetryApprovalDecision: a decision is a planround.approval.decision
// event on the call's await_approval span, saying what was decided (approved,
// the call's cause, whether the arguments were edited), who decided, through
// what, and the approval id. An approval without a decision (the run
// suspended) has no event.
func TestTelemetryApprovalDecision(t *testing.T) {
	pending := func(d agent.Decision) agent.Approver {
		return approverFunc(func(context.Context, agent.ApprovalRequest) (agent.Ticket, error) {
			return agent.Pending("appr-7", func(context.Context) (agent.Decision, error) { return d, nil }), nil
		})
	}
	for _, tc := range []struct {
		name     string
		approver agent.Approver
		want     map[string]any // nil: no event
	}{
		{
			name:     "approved by a person",
			approver: pending(agent.Decision{Approved: true, By: "alice", Via: "http"}),
			want: map[string]any{"planround.approval.approved": true, "planround.approval.edited": false,
				"planround.approval.by": "alice", "planround.approval.via": "http", "planround.approval.id": "appr-7"},
		},
		{
			name:     "approved with an edit",
			approver: pending(agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":"Tromsø"}`), By: "bob", Via: "terminal"}),
			want: map[string]any{"planround.approval.approved": true, "planround.approval.edited": true,
				"planround.approval.by": "bob", "planround.approval.via": "terminal", "planround.approval.id": "appr-7"},
		},
		{
			name:     "an edit that does not fit",
			approver: pending(agent.Decision{Approved: true, Arguments: json.RawMessage(`{"city":42}`), By: "bob", Via: "http"}),
			want: map[string]any{"planround.approval.approved": true, "planround.approval.edited": false, "planround.cause": "approval_failed",
				"planround.approval.by": "bob", "planround.approval.via": "http", "planround.approval.id": "appr-7"},
		},
		{
			name:     "rejected by a person",
			approver: pending(agent.Decision{Reason: "not now", By: "alice", Via: "http"}),
			want: map[string]any{"planround.approval.approved": false, "planround.approval.edited": false, "planround.cause": "user",
				"planround.approval.by": "alice", "planround.approval.via": "http", "planround.approval.id": "appr-7"},
		},
		{
			name:     "timed out",
			approver: pending(agent.Decision{Cause: agent.CauseTimeout, By: "timeout", Via: "timeout"}),
			want: map[string]any{"planround.approval.approved": false, "planround.approval.edited": false, "planround.cause": "timeout",
				"planround.approval.by": "timeout", "planround.approval.via": "timeout", "planround.approval.id": "appr-7"},
		},
		{
			name: "refused by a policy at once",
			approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Reason: "read-only", By: "policy:readonly", Via: "policy"}, nil
			}),
			want: map[string]any{"planround.approval.approved": false, "planround.approval.edited": false, "planround.cause": "policy",
				"planround.approval.by": "policy:readonly", "planround.approval.via": "policy"},
		},
		{
			name:     "approver that does not say who",
			approver: pending(agent.Decision{Approved: true}),
			want:     map[string]any{"planround.approval.approved": true, "planround.approval.edited": false, "planround.approval.id": "appr-7"},
		},
		{
			name:     "suspended",
			approver: newKeeper(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"))
			rec := newRecording(t)
			a := newAgent(t, srv, func(c *agent.Config) {
				rec.config(c)
				c.Approver = tc.approver
				c.Store = &memory.MemStore{}
				c.OnReject = agent.RejectContinue
			}, weatherTool())
			_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
			require.NoError(t, err)

			span := rec.one(t, "await_approval get_weather")
			var got []map[string]any
			for _, e := range span.Events {
				if e.Name != "planround.approval.decision" {
					continue
				}
				m := map[string]any{}
				for _, kv := range e.Attributes {
					m[string(kv.Key)] = kv.Value.AsInterface()
				}
				got = append(got, m)
			}
			if tc.want == nil {
				assert.Empty(t, got, "no decision, no event")
				return
			}
			require.Len(t, got, 1, "one decision event")
			assert.Equal(t, tc.want, got[0])
		})
	}
}
