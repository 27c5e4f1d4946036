package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/planround/planround/intent"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// RejectAction says what a rejected tool call does to the run.
type RejectAction uint8

const (
	// RejectEndRun ends the run after a rejection: a tool_rejected chunk,
	// then interrupted. It is the default.
	RejectEndRun RejectAction = iota
	// RejectContinue tells the model about the rejection (as the call's
	// tool message) and goes on.
	RejectContinue
)

// RequestShape is how the agent lays out the messages of each model
// request.
type RequestShape uint8

const (
	// ShapeDefault sends the system prompt and the context layers' blocks
	// as system messages first, then the conversation as it is stored (an
	// assistant message may follow another, as a planning reply and the
	// answer of the same turn do), and each temporary prompt (planning,
	// continuation) as a system message after the last message. OpenAI and
	// most providers accept it. It is the default.
	ShapeDefault RequestShape = iota
	// ShapeStrict satisfies strict chat templates (Mistral-family models,
	// Gemma, some vLLM templates), which refuse a system message that is
	// not first or user and assistant turns that do not alternate. The
	// messages go through [memory.Strict]: all system content becomes one
	// leading system message, consecutive user messages are merged, and
	// placeholders fill the gaps ("[continue]" between two assistant
	// messages, "[no reply]" between tool results and a user message).
	// Each temporary prompt is added, after a blank line, to the last user
	// message (a user message of its own when the request ends with
	// another role), so the system message stays the same in every round
	// and the instruction stays at the end. The stored history is the same
	// for both shapes.
	ShapeStrict
)

// DefaultMaxToolRounds is the number of tool rounds a run may take when
// [Config.MaxToolRounds] is zero.
const DefaultMaxToolRounds = 8

// Config configures an [Agent]. Its zero value is not enough (Model is
// required), but every other field has a default, given in its comment.
type Config struct {
	// BaseURL is the OpenAI-compatible API, such as
	// "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1" (the
	// default is OpenAI's). New refuses a URL that is not http or https
	// or has no host ("localhost:11434/v1"). Environment variables are not
	// read: the host decides where settings come from.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none.
	APIKey string
	// HTTPClient makes the requests; nil means the SDK's default client,
	// shared by every Agent that leaves it nil: no overall timeout (a
	// stream may take long: bound a run with its context), over a copy of
	// http.DefaultTransport (proxy from the environment, HTTP/2 when the
	// server offers it) that keeps 64 idle connections per host instead
	// of 2, gives each HTTP/1.1 connection 1 KiB read and write buffers
	// instead of 4 KiB each, and shares a host's HTTP/2 connections under
	// bursts (see [NewPooledTransport]). When http.DefaultTransport is not
	// a *http.Transport (a host wrapped it), it is used as it is.
	//
	// A host that brings its own client keeps full control. For many
	// conversations at once against one provider, its Transport should
	// keep about as many idle connections per host (MaxIdleConnsPerHost)
	// as runs overlap over HTTP/1.1 (a local server, a plain http:// URL),
	// else most rounds dial a new connection; ReadBufferSize and
	// WriteBufferSize bound what each HTTP/1.1 connection holds while a
	// run streams. Over HTTPS, http.Transport starts a TLS handshake for
	// every request that finds the host's HTTP/2 connections full, so a
	// burst of resumed runs starts thousands: wrap the Transport with
	// [NewPooledTransport] to make them a few at a time. docs/BENCHMARKS.md
	// (Load harness, issue 25) has the figures.
	HTTPClient *http.Client
	// MaxRetries is how many times a model request is sent again when
	// that cannot make the provider process it twice: after a 408, 409,
	// 429 or 5xx status (the provider's x-should-retry header decides
	// instead when it has one), and after a connection error when the
	// request provably never reached the provider (the connection could
	// not be made). A request whose connection broke after it was written
	// is not sent again, nor one whose run was interrupted or whose
	// server's certificate was refused; the run then fails with a
	// [*ConnectionError] that says which. Each retry waits for the
	// provider's Retry-After (a response that asks for more than a minute
	// is not retried), else for a backoff of 0.5 s doubling up to 8 s,
	// less up to a quarter of jitter; the wait ends with the run's
	// context. Zero means 2 retries, openai-go's default; a negative value
	// turns retries off. A failure inside a streamed response is never
	// retried.
	//
	// The agent retries, not openai-go: an option.WithMaxRetries in
	// RequestOptions adds openai-go's retries around the agent's, and
	// openai-go sends again any request that failed without a response;
	// an option.WithRequestTimeout there bounds all the agent's attempts
	// of a request together.
	MaxRetries int
	// RequestLimit, when set, bounds the model requests in flight at once
	// among the Agents that share it: the others wait for a slot, within
	// their run's context (see [RequestLimit]). Nil: no bound.
	RequestLimit *RequestLimit
	// RequestOptions are extra openai-go options for every model request,
	// for what the fields above do not cover (headers, middleware, ...).
	// They apply after the agent's own options, so they can override any
	// of them. Their middlewares run once per attempt of a request, inside
	// the agent's retries (see MaxRetries).
	RequestOptions []option.RequestOption

	// Model is the model name. Required.
	Model string
	// Settings are the sampling and output settings of every model request
	// (temperature, token limits, structured output, provider-specific
	// fields, ...); Input.Settings overrides them field by field. The zero
	// value sends none: the provider's defaults apply.
	Settings ModelSettings
	// SystemPrompt, when not empty, is the first message of every request.
	SystemPrompt string

	// Tools are the tools offered in the tool loop; nil means none. The
	// registry may change while the agent is in use: each run works with
	// the tools it held when the run started.
	Tools *ToolRegistry
	// Approver decides on tool calls that do not skip approval. Required
	// when Tools holds such a tool. A tool that needs approval and is added
	// to Tools after New, on an agent without an Approver, never runs: its
	// calls are rejected with CauseNoApprover.
	Approver Approver
	// OnReject says what a rejection does; the default ends the run. A
	// call of an unknown tool or with invalid arguments is rejected too,
	// but never ends the run: the model reads why and may call again.
	OnReject RejectAction
	// ParallelTools lets approved calls of one round execute concurrently:
	// every approval of the round is asked first, in call order, then the
	// approved calls run together. Chunks are still yielded in call order,
	// and the history is the one a sequential run records for the same
	// decisions. A rejection that ends the run (RejectEndRun) is yielded
	// when it is decided; the calls approved before it still run, as they
	// would have in a sequential run, and the calls after it are not asked
	// and never run. The chunks of sub-agents' runs (see [NewSubAgent])
	// come as they are yielded, whichever call they belong to.
	ParallelTools bool
	// MaxToolRounds bounds the tool loop (default DefaultMaxToolRounds).
	MaxToolRounds int
	// StreamToolArguments yields a tool_input chunk ([KindToolInput]) for
	// each fragment of a call's arguments as the model streams them, after
	// the call's start chunk, so a front end can show a long argument
	// growing (and protocols that stream tool input can forward it). Off,
	// the default, nothing is done or allocated per fragment.
	StreamToolArguments bool

	// TextMode is how text is cut into chunks: stream.ModeDeltas (default)
	// or stream.ModeSentences (for speech synthesis).
	TextMode stream.Mode
	// Intents is the intent tag dictionary; the zero value is
	// intent.DefaultDictionary().
	Intents intent.Dictionary
	// DisablePlanning turns the planning round off: the run starts with the
	// tool loop, whose first round is round 1 (round 0 is always the
	// planning round, so a run without one has none), and no round_end
	// carries an intent. Sub-agents, agents with a structured output (see
	// ModelSettings.ResponseFormat) and hosts that need the first token
	// fast use it. The planning round is on by default.
	DisablePlanning bool
	// PlanningPrompt and ContinuationPrompt replace the default temporary
	// prompts of the planning and continuation rounds.
	PlanningPrompt     string
	ContinuationPrompt string
	// RequestShape is how the messages of each request are laid out:
	// ShapeDefault, or ShapeStrict for models whose chat template wants
	// one leading system message and alternating user and assistant turns.
	RequestShape RequestShape

	// Store, when set, keeps conversations: a run with an Input.SessionID
	// loads the session's active messages (creating the session when it is
	// new), appends the user's message before its first model request,
	// the messages of each round when the round ends (before its
	// round_end chunk), and the rest of the turn when it ends, however it
	// ends. A Store that implements memory.CallLog makes runs durable (see
	// the package documentation, "Durable runs"): the calls of a round are
	// saved as open before anything is asked, so an approver's edit of the
	// arguments (Decision.Arguments) shows in the chunks and the result but
	// not in the stored assistant message, which keeps the model's.
	Store memory.Store

	// Layers add system blocks after SystemPrompt and before the history
	// (documents, skill descriptions, ...). They are asked once per run;
	// blocks that are empty or only white space are left out, and a
	// layer's error ends the run before its first request.
	Layers []memory.Layer
	// Hooks inject prompts into the requests at the checkpoints of each
	// run (see [Hook] and [Checkpoint]), asked in order; nil means none,
	// and costs nothing. New refuses a nil Hook.
	Hooks []Hook
	// Truncate says how the tool arguments and results of earlier turns are
	// shortened in requests: the zero value cuts them at
	// memory.DefaultTruncateLimit characters; tools whose definition says
	// NoTruncate are always kept whole. The stored history is never
	// shortened.
	Truncate memory.TruncateOptions
	// SummarizeAt, when positive and a Store is set, moves the oldest half of
	// a session into a long-term summary (written by the same model) once it
	// holds that many active messages; summaries come back to the model
	// through a memory.SummaryLayer added after Layers. Zero turns
	// summarisation off; memory.DefaultSummaryThreshold is 20.
	//
	// The summary is written at the end of a run whose context was not
	// cancelled and whose consumer did not stop ranging, before the
	// iterator returns: the model call is part of the run, with its chat
	// span, metrics and log record like the rounds' (see the package
	// documentation, "Telemetry"). Cancelling the run's context abandons
	// it (the run then ends with an interrupted chunk); a failure is a
	// warning chunk, not an error.
	SummarizeAt int

	// Logger receives one record per model call ("model call", the
	// summary request's included); nil discards them. A sub-agent's run
	// ([NewSubAgent]) whose Config leaves it nil logs to the Logger of the
	// run that called it.
	Logger *slog.Logger

	// TracerProvider and MeterProvider receive the agent's OpenTelemetry
	// spans and metrics, named by the GenAI semantic conventions (see the
	// package documentation, "Telemetry"); nil means otel's global
	// providers, which record nothing unless the host set them. The agent
	// uses the OpenTelemetry API only: the host brings the SDK and the
	// exporter. A sub-agent's run ([NewSubAgent]) records with the
	// providers of the run that called it where its Config leaves them
	// nil.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// TelemetryContent records the content of runs on their spans: the
	// messages of each model request and the model's response
	// (gen_ai.input.messages, gen_ai.output.messages), and each tool
	// call's arguments and result (gen_ai.tool.call.arguments,
	// gen_ai.tool.call.result). It is off by default: prompts and results
	// may hold what a trace backend should not keep.
	TelemetryContent bool
	// TelemetryContentLimit bounds each recorded piece of content, in
	// bytes: a longer one is cut on a character boundary and ends with a
	// "…[truncated: N of M bytes]" marker (a cut JSON value is no longer
	// valid JSON). Zero means DefaultTelemetryContentLimit.
	TelemetryContentLimit int

	// APILog, when set, receives one record per model call, the summary
	// requests' included, written when the call has ended (answered,
	// failed or interrupted), for a person to read what the model was sent
	// and answered: its session, round, purpose, the request's body as
	// sent (messages, tools offered, settings; never the API key, a
	// header), the reply (text, tool calls), the finish reason, the token
	// usage, the error, the time to the first token and the latency. nil
	// records nothing and costs nothing. The record is appended by the
	// run's goroutine once per call, after its stream ended (never per
	// delta), so a slow store delays the next round by one append. A store
	// that fails to append is logged to Logger; the run goes on. A sub-agent's run
	// ([NewSubAgent]) whose Config leaves it nil records to the APILog of
	// the run that called it, with its purpose sub_agent and the calling
	// run's session.
	APILog memory.APILog
	// APILogMetadataOnly keeps the request and the reply out of the
	// APILog's records: only the metadata (session, round, purpose, model,
	// finish reason, usage, status, error, timings) is written.
	APILogMetadataOnly bool
}

// Agent runs planning-round turns against a model. It is safe for concurrent
// use: each [Agent.Run] is independent.
type Agent struct {
	cfg      Config
	tags     []string
	model    modelAPI // chat completions (see modelAPI)
	layers   []memory.Layer
	hooks    []Hook
	truncate memory.TruncateOptions

	// driving holds the sessions this Agent runs now.
	driving driving

	// obs is where the runs' spans, metrics and log records go: the
	// providers and the Logger of Config (otel's global providers and a
	// discarding Logger for those it leaves nil).
	obs observer
	// inherit says which of them a sub-agent's run takes from the run
	// that called it instead (see NewSubAgent); zero for any other Agent.
	inherit inheritance

	// parsers keeps stream parsers between rounds: a run takes one for
	// each round and gives it back when the round ends, so a run that
	// waits (for a decision, a tool) holds none.
	parsers parserPool
}

// New validates cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == "" {
		return nil, errors.New("agent: Config.Model is required")
	}
	if cfg.BaseURL != "" {
		if err := checkBaseURL(cfg.BaseURL); err != nil {
			return nil, err
		}
	}
	if cfg.MaxToolRounds < 0 {
		return nil, fmt.Errorf("agent: Config.MaxToolRounds is %d, want >= 0", cfg.MaxToolRounds)
	}
	if cfg.MaxToolRounds == 0 {
		cfg.MaxToolRounds = DefaultMaxToolRounds
	}
	if cfg.OnReject > RejectContinue {
		return nil, fmt.Errorf("agent: unknown Config.OnReject %d", cfg.OnReject)
	}
	if cfg.TextMode > stream.ModeSentences {
		return nil, fmt.Errorf("agent: unknown Config.TextMode %d", cfg.TextMode)
	}
	if cfg.RequestShape > ShapeStrict {
		return nil, fmt.Errorf("agent: unknown Config.RequestShape %d", cfg.RequestShape)
	}
	if err := cfg.Settings.check("Config.Settings"); err != nil {
		return nil, err
	}
	cfg.Settings = cfg.Settings.clone()
	if cfg.Approver == nil {
		for _, d := range cfg.Tools.Definitions() {
			if !d.SkipApproval {
				return nil, fmt.Errorf("agent: tool %q needs approval but Config.Approver is nil (use approval.ApproveAll to approve everything)", d.Name)
			}
		}
	}
	if cfg.PlanningPrompt == "" {
		cfg.PlanningPrompt = cfg.Intents.PlanningPrompt()
	}
	if cfg.ContinuationPrompt == "" {
		cfg.ContinuationPrompt = intent.ContinuationPrompt()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkHooks(cfg.Hooks); err != nil {
		return nil, err
	}
	if cfg.SummarizeAt < 0 {
		return nil, fmt.Errorf("agent: Config.SummarizeAt is %d, want >= 0", cfg.SummarizeAt)
	}
	if cfg.TelemetryContentLimit < 0 {
		return nil, fmt.Errorf("agent: Config.TelemetryContentLimit is %d, want >= 0", cfg.TelemetryContentLimit)
	}
	tel, err := newTelemetry(cfg)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:    cfg,
		tags:   append([]string{stream.VoiceTag}, cfg.Intents.Tags()...),
		model:  newChatCompletions(cfg),
		layers: slices.Clone(cfg.Layers),
		hooks:  slices.Clone(cfg.Hooks),
		obs:    observer{tel: tel, logger: logger, api: apiLogger{log: cfg.APILog, content: !cfg.APILogMetadataOnly}},
	}
	if cfg.Store != nil && cfg.SummarizeAt > 0 {
		a.layers = append(a.layers, sessionSummaries{memory.SummaryLayer{Store: cfg.Store}})
	}
	a.truncate = cfg.Truncate
	a.truncate.Keep = slices.Clone(cfg.Truncate.Keep)
	return a, nil
}

// Store returns the agent's Config.Store (nil without one).
func (a *Agent) Store() memory.Store { return a.cfg.Store }

// Approver returns the agent's Config.Approver (nil without one).
func (a *Agent) Approver() Approver { return a.cfg.Approver }

// VisibleText returns raw, the content of an assistant message as the
// agent stores it, as the agent's text chunks showed it: without the speech
// tag and without the intent tags of Config.Intents, whether whole, split
// or cut short at the end. A host shows stored history with it, so that a
// reloaded conversation reads as it did live.
func (a *Agent) VisibleText(raw string) string {
	p := stream.NewParser(stream.Config{Tags: a.tags})
	var b strings.Builder
	emit := func(pc stream.Piece) { b.WriteString(pc.Text) }
	p.Write(raw, emit)
	p.Flush(emit)
	return b.String()
}

// sessionSummaries is the summary layer of Config.SummarizeAt. A run without
// a session (Input.History) has no summaries: asking the Store for those of
// session "" would fail with memory.ErrNotFound.
type sessionSummaries struct{ memory.SummaryLayer }

func (l sessionSummaries) Blocks(ctx context.Context, sessionID string) ([]string, error) {
	if sessionID == "" {
		return nil, nil
	}
	return l.SummaryLayer.Blocks(ctx, sessionID)
}

// checkBaseURL reports whether s can be Config.BaseURL: an http or https
// URL with a host.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		err = errors.Unwrap(err) // url.Parse's error repeats s
	case u.Scheme != "http" && u.Scheme != "https":
		err = errors.New("the scheme must be http or https")
	case u.Host == "":
		err = errors.New("it has no host")
	}
	if err != nil {
		return fmt.Errorf("agent: Config.BaseURL %q is not an http:// or https:// URL with a host, such as \"http://localhost:11434/v1\": %v", s, err)
	}
	return nil
}
