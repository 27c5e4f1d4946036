package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// DefaultTelemetryContentLimit is the size in bytes at which a recorded
// piece of content is cut when [Config.TelemetryContentLimit] is zero.
const DefaultTelemetryContentLimit = 4 << 10

// instrumentationName names the tracer and the meter of the agent.
const instrumentationName = "github.com/planround/planround/agent"

// Outcomes of runs, tool calls and approval waits, the value of the
// planround.outcome attribute of their spans and metrics.
const (
	outcomeAnswered    = "answered"
	outcomeInterrupted = "interrupted"
	outcomeRejected    = "rejected"
	outcomeError       = "error"
	outcomeMaxRounds   = "max_rounds"
	outcomeSuspended   = "suspended"
	outcomeAbandoned   = "abandoned"
	outcomeResult      = "result"
	outcomeStopped     = "stopped"
	outcomeApproved    = "approved"
	outcomeTimedOut    = "timed_out"
)

// Attribute keys: the GenAI semantic conventions', then planround's own.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyConversation  = attribute.Key("gen_ai.conversation.id")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	// The parts of the input and output tokens (semantic conventions
	// v1.41.0's registry; each is included in input or output tokens).
	keyCacheReadTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	keyCacheWriteTokens = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	keyReasoningTokens  = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	keyTokenType        = attribute.Key("gen_ai.token.type")
	keyToolName         = attribute.Key("gen_ai.tool.name")
	keyToolCallID       = attribute.Key("gen_ai.tool.call.id")
	keyToolType         = attribute.Key("gen_ai.tool.type")
	keyToolArgs         = attribute.Key("gen_ai.tool.call.arguments")
	keyToolResult       = attribute.Key("gen_ai.tool.call.result")
	keyInputMessages    = attribute.Key("gen_ai.input.messages")
	keyOutput           = attribute.Key("gen_ai.output.messages")
	keyErrorType        = attribute.Key("error.type")

	keyRound      = attribute.Key("planround.round")
	keySummary    = attribute.Key("planround.summary")
	keyIntent     = attribute.Key("planround.intent")
	keyOutcome    = attribute.Key("planround.outcome")
	keyResumed    = attribute.Key("planround.resumed")
	keyCause      = attribute.Key("planround.cause")
	keyApprovalID = attribute.Key("planround.approval.id")
	keyWaited     = attribute.Key("planround.approval.waited")
	keyApproved   = attribute.Key("planround.approval.approved")
	keyDecidedBy  = attribute.Key("planround.approval.by")
	keyDecidedVia = attribute.Key("planround.approval.via")
	keyEdited     = attribute.Key("planround.approval.edited")
)

// eventDecision is the name of the span event that records an approval's
// decision.
const eventDecision = "planround.approval.decision"

// telemetry is an Agent's tracer and instruments, made once in New.
type telemetry struct {
	tracer   trace.Tracer
	content  bool
	limit    int
	provider string // gen_ai.provider.name, "" when it cannot be told
	model    string
	chatName string // "chat {model}", the name of every chat span

	instruments

	// common are the attributes of every chat span and metric:
	// gen_ai.request.model and gen_ai.provider.name when known.
	common []attribute.KeyValue
}

// instruments are the metric instruments of a telemetry, made from one
// MeterProvider.
type instruments struct {
	tokens       metric.Int64Histogram
	opDuration   metric.Float64Histogram
	toolDuration metric.Float64Histogram
	approvalWait metric.Float64Histogram
	runs         metric.Int64Counter
	// Of a Config.RequestLimit: requests waiting, and each one's wait.
	queueLen  metric.Int64UpDownCounter
	queueWait metric.Float64Histogram
}

// observer is where a run's spans, metrics and log records go.
type observer struct {
	tel    *telemetry
	logger *slog.Logger
	api    apiLogger
}

// inheritance says which of the providers and the Logger a sub-agent's
// run takes from the run that called it: those its Config left nil.
type inheritance struct {
	tracer, meter, logger, apiLog bool
}

// observer returns where a run of a started with ctx records: the
// Agent's own, except for a sub-agent's run (ctx is the context of the
// call that runs it), which takes from the calling run what its Config
// left nil. The tracer and the instruments taken are the caller's, the
// attributes (model, provider) and the content settings stay the
// sub-agent's. Called once per run.
func (a *Agent) observer(ctx context.Context) *observer {
	if a.inherit == (inheritance{}) {
		return &a.obs
	}
	v := callIn(ctx)
	if v == nil || v.obs == nil {
		return &a.obs // not run by a call of an agent's run
	}
	caller := v.obs
	o := &observer{tel: a.obs.tel, logger: a.obs.logger, api: a.obs.api}
	if a.inherit.logger {
		o.logger = caller.logger
	}
	if a.inherit.apiLog {
		o.api = caller.api
	}
	if a.inherit.tracer || a.inherit.meter {
		tel := *a.obs.tel
		if a.inherit.tracer {
			tel.tracer = caller.tel.tracer
		}
		if a.inherit.meter {
			tel.instruments = caller.tel.instruments
		}
		o.tel = &tel
	}
	return o
}

func newTelemetry(cfg Config) (*telemetry, error) {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	tel := &telemetry{
		tracer:   tp.Tracer(instrumentationName),
		content:  cfg.TelemetryContent,
		limit:    cfg.TelemetryContentLimit,
		provider: providerName(cfg.BaseURL),
		model:    cfg.Model,
		chatName: "chat " + cfg.Model,
	}
	if tel.limit == 0 {
		tel.limit = DefaultTelemetryContentLimit
	}
	tel.common = []attribute.KeyValue{keyRequestModel.String(cfg.Model)}
	if tel.provider != "" {
		tel.common = append(tel.common, keyProvider.String(tel.provider))
	}
	m := mp.Meter(instrumentationName)
	// The bucket boundaries the GenAI conventions advise.
	durations := metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
	var err error
	if tel.tokens, err = m.Int64Histogram("gen_ai.client.token.usage",
		metric.WithDescription("Number of input and output tokens used per model call."), metric.WithUnit("{token}"),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)); err != nil {
		return nil, fmt.Errorf("agent: creating metric gen_ai.client.token.usage: %w", err)
	}
	if tel.opDuration, err = m.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithDescription("Duration of a model call, from the request to the end of its stream."), metric.WithUnit("s"), durations); err != nil {
		return nil, fmt.Errorf("agent: creating metric gen_ai.client.operation.duration: %w", err)
	}
	if tel.toolDuration, err = m.Float64Histogram("planround.tool.duration",
		metric.WithDescription("Duration of a tool call's execution."), metric.WithUnit("s"), durations); err != nil {
		return nil, fmt.Errorf("agent: creating metric planround.tool.duration: %w", err)
	}
	if tel.approvalWait, err = m.Float64Histogram("planround.approval.wait",
		metric.WithDescription("Time from asking the Approver about a tool call to its decision."), metric.WithUnit("s"), durations); err != nil {
		return nil, fmt.Errorf("agent: creating metric planround.approval.wait: %w", err)
	}
	if tel.queueLen, err = m.Int64UpDownCounter("planround.model.queue.length",
		metric.WithDescription("Model requests waiting for a slot of their Agent's RequestLimit."), metric.WithUnit("{request}")); err != nil {
		return nil, fmt.Errorf("agent: creating metric planround.model.queue.length: %w", err)
	}
	if tel.queueWait, err = m.Float64Histogram("planround.model.queue.wait",
		metric.WithDescription("Time a model request waited for a slot of its Agent's RequestLimit (0 when one was free)."), metric.WithUnit("s"), durations); err != nil {
		return nil, fmt.Errorf("agent: creating metric planround.model.queue.wait: %w", err)
	}
	if tel.runs, err = m.Int64Counter("planround.runs",
		metric.WithDescription("Runs and resumed turns, by how they ended."), metric.WithUnit("{run}")); err != nil {
		return nil, fmt.Errorf("agent: creating metric planround.runs: %w", err)
	}
	return tel, nil
}

// providerName tells gen_ai.provider.name from Config.BaseURL: the hosts of
// the providers the conventions name, and OpenAI for the default URL. Any
// other host (a local server, a proxy) is not told: "".
func providerName(base string) string {
	if base == "" {
		return "openai"
	}
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case host == "api.openai.com":
		return "openai"
	case strings.HasSuffix(host, ".openai.azure.com"):
		return "azure.ai.openai"
	case host == "api.anthropic.com":
		return "anthropic"
	case host == "generativelanguage.googleapis.com":
		return "gcp.gemini"
	case host == "api.mistral.ai":
		return "mistral_ai"
	case host == "api.groq.com":
		return "groq"
	case host == "api.deepseek.com":
		return "deepseek"
	case host == "api.x.ai":
		return "x_ai"
	case host == "api.perplexity.ai":
		return "perplexity"
	}
	return ""
}

// bound cuts s at the content limit, on a character boundary, and says so.
func (tel *telemetry) bound(s string) string {
	if len(s) <= tel.limit {
		return s
	}
	cut := tel.limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[truncated: %d of %d bytes]", len(s)-cut, len(s))
}

// runTel is a run's telemetry: its invoke_agent span and what decides its
// outcome. Touched only by the run's goroutine.
type runTel struct {
	span    trace.Span
	resumed bool
	// err is the error the run ended with (see run.fail).
	err error
	// rejected is set by a rejection that ends the run, maxRounds by the
	// end of the tool loop.
	rejected, maxRounds bool
}

// noSpan is the span a run, a model call or a wait keeps when its own
// would record nothing and change nothing for what starts under it: it
// records nothing either.
var noSpan = trace.SpanFromContext(context.Background())

// inert reports whether span, just started under parent, records nothing
// and carries parent's span context (the global tracer before the host
// sets a provider, a no-op provider): it then changes nothing for the
// spans under it or what a propagator sends, and the caller goes on with
// parent instead of holding it.
func inert(span trace.Span, parent context.Context) bool {
	return !span.IsRecording() && span.SpanContext().Equal(trace.SpanContextFromContext(parent))
}

// startRun starts the invoke_agent span of a run (or a resumed turn) and
// returns ctx carrying it: the model calls and tool calls of the run are
// its children, and a sub-agent's run is a child of its call's span.
func (tel *telemetry) startRun(ctx context.Context, sessionID string, resumed bool) (context.Context, runTel) {
	parent := ctx
	ctx, span := tel.tracer.Start(ctx, "invoke_agent", trace.WithSpanKind(trace.SpanKindInternal))
	if inert(span, parent) {
		// The run goes on with its caller's context, so that a run that
		// waits for hours does not hold the span (about 0.3 KB).
		return parent, runTel{span: noSpan, resumed: resumed}
	}
	if span.IsRecording() {
		span.SetAttributes(keyOperation.String("invoke_agent"), keyResumed.Bool(resumed))
		span.SetAttributes(tel.common...)
		if sessionID != "" {
			span.SetAttributes(keyConversation.String(sessionID))
		}
	}
	return ctx, runTel{span: span, resumed: resumed}
}

// endRun ends the run's span with its outcome and counts the run.
func (r *run) endRun() {
	tel, rt := r.obs.tel, &r.tel
	outcome := outcomeAnswered
	switch {
	case rt.err != nil:
		outcome = outcomeError
	case r.suspended:
		outcome = outcomeSuspended
	case rt.rejected:
		outcome = outcomeRejected
	case r.over:
		outcome = outcomeInterrupted
	case r.stopped:
		outcome = outcomeAbandoned
	case rt.maxRounds:
		outcome = outcomeMaxRounds
	}
	// The attributes of a measurement cost allocations: none are made for
	// an instrument that measures nothing (no MeterProvider).
	if ctx := context.WithoutCancel(r.ctx); tel.runs.Enabled(ctx) {
		tel.runs.Add(ctx, 1, metric.WithAttributes(keyOperation.String("invoke_agent"), keyOutcome.String(outcome), keyResumed.Bool(rt.resumed)))
	}
	if !rt.span.IsRecording() {
		rt.span.End()
		return
	}
	rt.span.SetAttributes(keyOutcome.String(outcome), keyRound.Int(r.round))
	if r.intent != "" {
		rt.span.SetAttributes(keyIntent.String(string(r.intent)))
	}
	if u := r.t.usage; u != (usageOr(nil)) {
		setUsage(rt.span, u)
	}
	if rt.err != nil {
		rt.span.RecordError(rt.err)
		rt.span.SetStatus(codes.Error, rt.err.Error())
		rt.span.SetAttributes(keyErrorType.String(errorType(rt.err)))
	}
	rt.span.End()
}

// errorType is the error.type of err: its Go type, as the conventions
// suggest when there is no better code.
func errorType(err error) string {
	if pe, ok := errors.AsType[*ProviderError](err); ok && pe.StatusCode != 0 {
		return fmt.Sprint(pe.StatusCode)
	}
	return fmt.Sprintf("%T", err)
}

// chatTel is the chat span of one model call.
type chatTel struct {
	span  trace.Span
	start time.Time
	first bool // the first token has not been seen yet
	// firstAt is the time from start to the first token, once seen.
	firstAt time.Duration
}

// startChat starts the chat span of a model call of the session
// sessionID, as a child of the span ctx carries (a run's), and returns the
// context the request is sent with. which says what the call is:
// planround.round for a round's, planround.summary for a summary's.
func (tel *telemetry) startChat(ctx context.Context, sessionID string, req request, which attribute.KeyValue) (context.Context, *chatTel) {
	parent := ctx
	ctx, span := tel.tracer.Start(ctx, tel.chatName, trace.WithSpanKind(trace.SpanKindClient))
	if inert(span, parent) {
		// A request that streams for minutes does not hold it.
		ctx, span = parent, noSpan
	}
	ct := &chatTel{span: span, start: time.Now(), first: true}
	if span.IsRecording() {
		span.SetAttributes(keyOperation.String("chat"), which)
		span.SetAttributes(tel.common...)
		if sessionID != "" {
			span.SetAttributes(keyConversation.String(sessionID))
		}
		if tel.content {
			span.SetAttributes(keyInputMessages.String(tel.bound(messagesJSON(req.messages))))
		}
	}
	return ctx, ct
}

// startChat starts the chat span of the current round's model call, as a
// child of the run's span, and returns the context the request is sent
// with.
func (r *run) startChat(req request) (context.Context, *chatTel) {
	return r.obs.tel.startChat(r.ctx, r.t.in.SessionID, req, keyRound.Int(r.round))
}

// startSummary starts the chat span of a summary request (see
// Agent.summarize): a chat span like a round's, with planround.summary
// instead of planround.round.
func (tel *telemetry) startSummary(ctx context.Context, sessionID string, req request) (context.Context, *chatTel) {
	return tel.startChat(ctx, sessionID, req, keySummary.Bool(true))
}

// firstToken marks the first token of the response on the chat span.
func (ct *chatTel) firstToken() {
	ct.first = false
	ct.firstAt = time.Since(ct.start)
	ct.span.AddEvent("first_token")
}

// measure records the duration and the token usage (when the response
// reported it) of the model call of ct. failure is the call's error when
// it failed, nil when it answered or was interrupted.
func (tel *telemetry) measure(ctx context.Context, ct *chatTel, usage *stream.Usage, failure error) {
	durations, tokens := tel.opDuration.Enabled(ctx), usage != nil && tel.tokens.Enabled(ctx)
	if !durations && !tokens {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, keyOperation.String("chat"))
	attrs = append(attrs, tel.common...)
	if failure != nil {
		attrs = append(attrs, keyErrorType.String(errorType(failure)))
	}
	if durations {
		tel.opDuration.Record(ctx, time.Since(ct.start).Seconds(), metric.WithAttributes(attrs...))
	}
	if tokens {
		// The conventions' gen_ai.token.type has only input and output:
		// cached and reasoning tokens are inside them and on the spans.
		tel.tokens.Record(ctx, usage.PromptTokens, metric.WithAttributes(append(attrs, keyTokenType.String("input"))...))
		tel.tokens.Record(ctx, usage.CompletionTokens, metric.WithAttributes(append(attrs, keyTokenType.String("output"))...))
	}
}

// end ends the chat span of ct with what every chat span says: the finish
// reason, the token usage, and the error of a call that failed (failure)
// or the outcome interrupted.
func (ct *chatTel) end(usage *stream.Usage, finish string, failure error, interrupted bool) {
	span := ct.span
	if !span.IsRecording() {
		span.End()
		return
	}
	if finish != "" {
		span.SetAttributes(keyFinishReasons.StringSlice([]string{finish}))
	}
	if usage != nil {
		setUsage(span, *usage)
	}
	switch {
	case failure != nil:
		span.RecordError(failure)
		span.SetStatus(codes.Error, failure.Error())
		span.SetAttributes(keyErrorType.String(errorType(failure)))
	case interrupted:
		span.SetAttributes(keyOutcome.String(outcomeInterrupted))
	}
	span.End()
}

// setUsage sets the token usage u on span: input and output tokens always,
// their cached and reasoning parts when the provider reported any (a
// provider that reports none cannot be told from one that reports 0).
func setUsage(span trace.Span, u stream.Usage) {
	span.SetAttributes(keyInputTokens.Int64(u.PromptTokens), keyOutputTokens.Int64(u.CompletionTokens))
	if u.CacheReadTokens != 0 {
		span.SetAttributes(keyCacheReadTokens.Int64(u.CacheReadTokens))
	}
	if u.CacheWriteTokens != 0 {
		span.SetAttributes(keyCacheWriteTokens.Int64(u.CacheWriteTokens))
	}
	if u.ReasoningTokens != 0 {
		span.SetAttributes(keyReasoningTokens.Int64(u.ReasoningTokens))
	}
}

// endChat ends the chat span of the round's model call and records its
// duration and token usage.
func (r *run) endChat(ct *chatTel, res roundResult, finish string, err error) {
	tel := r.obs.tel
	var failure error
	if err != nil && r.ctx.Err() == nil {
		failure = err
	}
	tel.measure(context.WithoutCancel(r.ctx), ct, res.usage, failure)
	if span := ct.span; span.IsRecording() {
		if r.round == 0 && err == nil && !r.a.cfg.DisablePlanning {
			// The planning round's intent, as planningRound will read it.
			in := IntentNone
			if det := r.a.cfg.Intents.Detect(r.parser.Raw()); det.Found {
				in = Intent(det.Intent)
			}
			span.SetAttributes(keyIntent.String(string(in)))
		}
		if tel.content {
			span.SetAttributes(keyOutput.String(tel.bound(outputJSON(r.parser.Raw(), r.acc.Calls(), finish))))
		}
	}
	ct.end(res.usage, finish, failure, err != nil || r.stopped)
}

// startTool starts the execute_tool span of cs, a child of the run's span,
// and returns ctx (the call's context) carrying it.
func (r *run) startTool(ctx context.Context, cs *callState) context.Context {
	tel := r.obs.tel
	ctx, cs.span = tel.tracer.Start(ctx, "execute_tool "+cs.call.Name, trace.WithSpanKind(trace.SpanKindInternal))
	cs.started = time.Now()
	if cs.span.IsRecording() {
		cs.span.SetAttributes(keyOperation.String("execute_tool"), keyToolName.String(cs.call.Name),
			keyToolCallID.String(cs.call.ID), keyToolType.String("function"), keyRound.Int(r.round))
		if tel.content {
			cs.span.SetAttributes(keyToolArgs.String(tel.bound(string(cs.args))))
		}
	}
	return ctx
}

// endTool ends the execute_tool span of cs with its outcome (result,
// error, interrupted) and records the tool's duration.
func (r *run) endTool(cs *callState, outcome, content string) {
	if cs.span == nil {
		return
	}
	if ctx := context.WithoutCancel(r.ctx); r.obs.tel.toolDuration.Enabled(ctx) {
		r.obs.tel.toolDuration.Record(ctx, time.Since(cs.started).Seconds(),
			metric.WithAttributes(keyOperation.String("execute_tool"), keyToolName.String(cs.call.Name), keyOutcome.String(outcome)))
	}
	if cs.span.IsRecording() {
		cs.span.SetAttributes(keyOutcome.String(outcome))
		if outcome == outcomeError {
			cs.span.SetStatus(codes.Error, cs.err.Error())
			cs.span.SetAttributes(keyErrorType.String("tool_error"))
		}
		if r.obs.tel.content {
			cs.span.SetAttributes(keyToolResult.String(r.obs.tel.bound(content)))
		}
	}
	cs.span.End()
	cs.span = nil
}

// stoppedTool records, as an execute_tool span without duration, a call a
// resumed turn found executing: its process stopped while it ran.
func (r *run) stoppedTool(cs *callState) {
	r.startTool(r.ctx, cs)
	r.endTool(cs, outcomeStopped, cs.open.Partial)
}

// approvalTel is the await_approval span of one call.
type approvalTel struct {
	span  trace.Span
	start time.Time
}

// startApproval starts the await_approval span of cs.
func (r *run) startApproval(cs *callState) approvalTel {
	_, span := r.obs.tel.tracer.Start(r.ctx, "await_approval "+cs.call.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		// Nothing starts under it and ending it does nothing: a wait of
		// hours does not hold it.
		return approvalTel{span: noSpan, start: time.Now()}
	}
	span.SetAttributes(keyToolName.String(cs.call.Name), keyToolCallID.String(cs.call.ID), keyRound.Int(r.round))
	return approvalTel{span: span, start: time.Now()}
}

// endApproval ends the await_approval span of cs: approved, rejected,
// timed_out, interrupted or suspended, with the time it took and whether a
// person was waited for (the ticket was pending). When the Approver gave a
// decision, the span gets a planround.approval.decision event that says
// what it was and where it came from, for the audit: approved, the call's
// cause (a rejection's, or not_run for an approval that an interrupt
// overtook), who decided and through what (Decision.By, Decision.Via),
// whether the decision's arguments replaced the call's (edited), and the
// approval id.
func (r *run) endApproval(at approvalTel, cs *callState, approved bool) {
	outcome := outcomeRejected
	switch {
	case r.suspended:
		outcome = outcomeSuspended
	case approved:
		outcome = outcomeApproved
	case cs.cause == CauseTimeout:
		outcome = outcomeTimedOut
	case r.ctx.Err() != nil || r.stopped:
		outcome = outcomeInterrupted
	}
	waited := time.Since(at.start)
	if ctx := context.WithoutCancel(r.ctx); r.obs.tel.approvalWait.Enabled(ctx) {
		r.obs.tel.approvalWait.Record(ctx, waited.Seconds(),
			metric.WithAttributes(keyToolName.String(cs.call.Name), keyOutcome.String(outcome)))
	}
	if at.span.IsRecording() {
		at.span.SetAttributes(keyOutcome.String(outcome), keyWaited.Bool(cs.pending))
		id := cs.chunk.ApprovalID
		if id == "" && cs.open != nil {
			id = cs.open.ApprovalID // a resumed call's approval, decided meanwhile
		}
		if id != "" {
			at.span.SetAttributes(keyApprovalID.String(id))
		}
		if cs.cause != "" {
			at.span.SetAttributes(keyCause.String(string(cs.cause)))
		}
		if cs.answered {
			at.span.AddEvent(eventDecision, trace.WithAttributes(decisionAttrs(cs, id)...))
		}
	}
	at.span.End()
}

// decisionAttrs are the attributes of the decision event of cs, whose
// approval id is id: approved and edited always, the others when known.
func decisionAttrs(cs *callState, id string) []attribute.KeyValue {
	d := cs.decision
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, keyApproved.Bool(d.Approved), keyEdited.Bool(cs.edited))
	if cs.cause != "" {
		attrs = append(attrs, keyCause.String(string(cs.cause)))
	}
	if d.By != "" {
		attrs = append(attrs, keyDecidedBy.String(d.By))
	}
	if d.Via != "" {
		attrs = append(attrs, keyDecidedVia.String(d.Via))
	}
	if id != "" {
		attrs = append(attrs, keyApprovalID.String(id))
	}
	return attrs
}

// chatMessage is a message as the GenAI conventions record it in
// gen_ai.input.messages and gen_ai.output.messages.
type chatMessage struct {
	Role         string     `json:"role"`
	Parts        []chatPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type chatPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

// messagesJSON renders a request's messages for gen_ai.input.messages.
// Images are named, not included.
func messagesJSON(msgs []memory.Message) string {
	out := make([]chatMessage, 0, len(msgs))
	for _, m := range msgs {
		cm := chatMessage{Role: string(m.Role)}
		switch {
		case m.Role == memory.RoleTool:
			cm.Parts = append(cm.Parts, chatPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			cm.Parts = append(cm.Parts, chatPart{Type: "text", Content: m.Content})
		}
		for _, img := range m.Images {
			cm.Parts = append(cm.Parts, chatPart{Type: "image", Name: img.String()})
		}
		for _, tc := range m.ToolCalls {
			cm.Parts = append(cm.Parts, chatPart{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: validJSON(tc.Arguments)})
		}
		out = append(out, cm)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// outputJSON renders a model response for gen_ai.output.messages.
func outputJSON(raw string, calls []stream.Call, finish string) string {
	cm := chatMessage{Role: "assistant", FinishReason: finish, Parts: []chatPart{}}
	if raw != "" {
		cm.Parts = append(cm.Parts, chatPart{Type: "text", Content: raw})
	}
	for _, c := range calls {
		cm.Parts = append(cm.Parts, chatPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: validJSON([]byte(c.Arguments))})
	}
	b, _ := json.Marshal([]chatMessage{cm})
	return string(b)
}

// validJSON returns b when it is JSON, else b as a JSON string.
func validJSON(b []byte) json.RawMessage {
	if len(b) == 0 || json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

// queueLength adds n to the requests waiting for a RequestLimit's slot.
func (tel *telemetry) queueLength(ctx context.Context, n int64) {
	if ctx := context.WithoutCancel(ctx); tel.queueLen.Enabled(ctx) {
		tel.queueLen.Add(ctx, n, metric.WithAttributes(tel.common...))
	}
}

// queued records how long a request waited for a RequestLimit's slot.
func (tel *telemetry) queued(ctx context.Context, waited time.Duration) {
	if ctx := context.WithoutCancel(ctx); tel.queueWait.Enabled(ctx) {
		tel.queueWait.Record(ctx, waited.Seconds(), metric.WithAttributes(tel.common...))
	}
}
