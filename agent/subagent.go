package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// DefaultMaxDepth is how deep sub-agents may nest when [WithMaxDepth] is
// not given: a sub-agent called by the host's run runs at depth 1, one it
// calls at depth 2, and a call that would go deeper is refused.
const DefaultMaxDepth = 2

// SubAgentOption configures a sub-agent made by [NewSubAgent].
type SubAgentOption func(*subAgent)

// WithMaxDepth sets how deep sub-agents may nest below the host's run, n
// >= 1 (default [DefaultMaxDepth]). A call of the sub-agent that would run
// deeper is refused with an error the model reads. The bound of every
// sub-agent whose run the call is inside counts too: the smallest wins, so
// a sub-agent's bound holds for everything it calls.
func WithMaxDepth(n int) SubAgentOption {
	return func(s *subAgent) { s.maxDepth = n }
}

// NewSubAgent returns a [Tool] named name that runs a nested agent on a
// task: the model calls it with {"task": "..."}, the nested agent answers
// the task as a user message of a conversation of its own (it does not see
// the caller's), and its answer is the tool's result. description tells the
// model what the sub-agent is good at.
//
// cfg configures the nested agent as [New] does, so a copy of the host's
// Config with other Tools, SystemPrompt or Model will do. It runs with the
// tools of cfg.Tools only ([ToolRegistry.Subset] picks some of the host's):
// a call of any other tool is an unknown tool to it. Set
// Config.DisablePlanning, as most sub-agents want: the planning round
// writes words for a person, and the caller is a model. The nested run has
// no Store (cfg.Store and cfg.SummarizeAt are
// not used): its messages are not the user's conversation, and the calling
// run holds the session. Its Input.SessionID is the calling run's, so
// that its tools and layers know the session.
//
// # Chunks
//
// The nested run's chunks reach the host through the calling run's
// iterator while the call executes, between its executing chunk and its
// result, marked with the sub-agent's name ([Chunk.Agent]), the depth of
// its run ([Chunk.Depth]) and the call that started it ([Chunk.Parent]):
// its text, tool calls, approvals, warnings, its own round_end chunks and,
// when it stopped early, its interrupted chunk. A host shows them nested
// under the call's card; only its chunks without Depth end the run.
// With Config.ParallelTools, the nested chunks of calls that run at the same
// time are yielded as they come, interleaved, each marked with its Parent,
// so that an approval inside a later call is shown while an earlier call
// still runs; the calling run's own chunks keep their call order. None of
// them is history: the calling run records only the call and its result.
// As with a run's own chunks, the nested run goes on only once the host's
// loop has handled each of them: a nested call's approval is waited for
// after the host has seen its approval_required chunk.
// The nested run's token usage is on its own round_end chunks;
// [Turn.Usage] counts the calling run's requests only.
//
// # Approval
//
// The sub-agent's call itself needs approval like any tool's (use
// [ToolRegistry.SetSkipApproval] to let it run without asking). The calls
// of the nested run that need approval go to the Approver of the run that
// called the sub-agent, with that run's session id, unless cfg.Approver is
// set: a runner's approvals behind a browser show their approval cards
// (their approval_required chunks are marked like the others) and takes the
// decisions for them as for the host's own calls, and cancelling the
// session's approvals cancels them too. In Request, [CallFromContext]
// reports the sub-agent's call, so an Approver can tell a nested call from
// the host's.
//
// # Results and interruption
//
// The result is the visible text of the last round of the nested run that
// wrote any. A nested run that ends otherwise gives the model an error that
// says why, with the text written so far: a failure of its model, a call
// rejected by its Approver (its Config.OnReject says whether a rejection
// ends it), or its Config.MaxToolRounds reached. Cancelling the calling
// run cancels the nested one: its chunks end with its interrupted chunk,
// and the call is rejected as interrupted with the nested run's text so far
// as its partial result.
//
// # Telemetry
//
// The nested run is an invoke_agent span under the span of the call that
// started it, with its own chat, await_approval and execute_tool spans
// (see the package documentation, "Telemetry"). What cfg leaves nil of
// TracerProvider, MeterProvider and Logger is the calling run's: the
// nested run's spans go to the caller's tracer provider, its metrics to
// the caller's meter provider (with the sub-agent's gen_ai.request.model),
// and its log records to the caller's Logger, so a host that configured
// them once sees its sub-agents' model calls too. What cfg sets, the
// nested run keeps. cfg.TelemetryContent and TelemetryContentLimit are
// always the sub-agent's own.
//
// # Depth and state
//
// Sub-agents may call sub-agents, down to the depth [WithMaxDepth] allows.
// A tool that keeps state per conversation keys it by
// [CallInfo.Conversation], which differs for the calls of a nested run, and
// releases it with [AfterSubAgent]: the per_conversation MCP servers of
// package mcpclient start fresh instances for a sub-agent's run and end them
// when it ends, never touching the user's.
//
// The returned Tool must be registered as it is: a wrapper around it runs
// the sub-agent without showing its chunks and without an Approver of the
// calling run. NewSubAgent fails for an invalid name, a cfg that New
// refuses, or a depth below 1.
func NewSubAgent(name, description string, cfg Config, opts ...SubAgentOption) (Tool, error) {
	if err := validToolName(name); err != nil {
		return nil, err
	}
	s := &subAgent{name: name, maxDepth: DefaultMaxDepth}
	for _, o := range opts {
		o(s)
	}
	if s.maxDepth < 1 {
		return nil, fmt.Errorf("agent: sub-agent %q: maximum depth %d, want >= 1", name, s.maxDepth)
	}
	if description == "" {
		description = "Runs the sub-agent " + name + " on a task and returns its answer."
	}
	// The calling run holds the session.
	cfg.Store, cfg.SummarizeAt = nil, 0
	if cfg.Approver == nil {
		cfg.Approver = inheritApprover{}
	}
	a, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: sub-agent %q: %s", name, strings.TrimPrefix(err.Error(), "agent: "))
	}
	// What cfg leaves nil is the calling run's, found in the call's
	// context when the nested run starts.
	a.inherit = inheritance{tracer: cfg.TracerProvider == nil, meter: cfg.MeterProvider == nil, logger: cfg.Logger == nil, apiLog: cfg.APILog == nil}
	s.agent = a
	s.def = ToolDefinition{
		Name:        name,
		Description: description,
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"task": map[string]any{
					"type":        "string",
					"description": "The task, with everything needed to do it: the sub-agent does not see this conversation.",
				},
			},
			"required":             []any{"task"},
			"additionalProperties": false,
		},
	}
	return s, nil
}

// AfterSubAgent registers f to be called when the sub-agent run that ctx
// belongs to ends; ctx is the context of a tool call of that run (what
// [Tool.Execute] or [SideMessenger.SideMessage] got), or of a run nested
// deeper, for which the innermost sub-agent run counts. The sub-agent's tool
// calls the functions after the run's last chunk, latest first, and returns
// its result only once they have returned, so that nothing they release
// outlives the call. A function registered after the run ended is called
// at once. AfterSubAgent reports whether ctx belongs to a sub-agent's run;
// when it does not (a call of the host's own run), f is not registered.
//
// A tool that keeps state for the conversation [CallInfo.Conversation]
// names uses it to end the state it made for a sub-agent's run.
func AfterSubAgent(ctx context.Context, f func()) bool {
	sr, ok := ctx.Value(subRunKey{}).(*subRun)
	if !ok {
		return false
	}
	sr.mu.Lock()
	if sr.ended {
		sr.mu.Unlock()
		f()
		return true
	}
	sr.atEnd = append(sr.atEnd, f)
	sr.mu.Unlock()
	return true
}

// subAgent is the Tool of NewSubAgent.
type subAgent struct {
	name     string
	def      ToolDefinition
	agent    *Agent
	maxDepth int
}

func (s *subAgent) Definition() ToolDefinition { return s.def }

// subRunKey is the context key of the *subRun of the nested run a context
// belongs to.
type subRunKey struct{}

// subRun is a sub-agent's nested run, as its context carries it.
type subRun struct {
	depth    int      // 1 for a run started by a call of the host's run
	limit    int      // the deepest a run may nest inside this one
	approver Approver // the Approver of the run that called the sub-agent

	mu    sync.Mutex
	ended bool     // guarded by mu
	atEnd []func() // guarded by mu: the functions of AfterSubAgent
}

// end calls the functions of AfterSubAgent, latest first.
func (sr *subRun) end() {
	sr.mu.Lock()
	sr.ended = true
	fs := sr.atEnd
	sr.atEnd = nil
	sr.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// nestKey is the context key of the *nestLink a run gives the sub-agent
// calls it executes.
type nestKey struct{}

// nestLink is what a run gives the call of a sub-agent: the way to its
// iterator and its Approver.
type nestLink struct {
	call     *CallInfo          // the call this link was made for
	chunks   chan<- nestedChunk // drained by the run until the call returns
	approver Approver
}

// nestedChunk is a nested run's chunk on its way to the calling run. The
// calling run answers on ack once its own iterator has yielded c: the
// nested run goes on (to ask its Approver, say) only after the host has
// handled the chunk, as a run's own chunks are handled before it goes on.
type nestedChunk struct {
	c   Chunk
	ack chan<- struct{}
}

// nestContext returns the context of a sub-agent's call: ctx, the call's
// context, with the link through which its nested run's chunks reach this
// run's iterator. The channel is the run's, made at its first sub-agent
// call: every finish drains it, so the nested chunks of calls running at
// the same time never wait for one another.
func (r *run) nestContext(ctx context.Context) context.Context {
	if r.nested == nil {
		r.nested = make(chan nestedChunk)
	}
	var call *CallInfo
	if v := callIn(ctx); v != nil {
		call = &v.CallInfo
	}
	return context.WithValue(ctx, nestKey{}, &nestLink{call: call, chunks: r.nested, approver: r.a.cfg.Approver})
}

// emitNested yields a chunk of a nested run. Unlike emit, an interrupted
// chunk does not end this run: it ends the nested one.
func (r *run) emitNested(c Chunk) {
	if r.stopped || r.over {
		return
	}
	if !r.yield(c, nil) {
		r.stop()
	}
}

// takeNested yields the nested chunk n, then lets its run go on.
func (r *run) takeNested(n nestedChunk) {
	r.emitNested(n.c)
	n.ack <- struct{}{} // buffered: never blocks
}

// inheritApprover is the Approver of a sub-agent configured without one:
// it asks the Approver of the run that called the sub-agent.
type inheritApprover struct{}

var errNoCallerApprover = errors.New("the sub-agent's calls are approved by the Approver of the run that called it, and that run has none")

func (inheritApprover) Request(ctx context.Context, req ApprovalRequest) (Ticket, error) {
	sr, _ := ctx.Value(subRunKey{}).(*subRun)
	if sr == nil || sr.approver == nil {
		return Ticket{}, errNoCallerApprover
	}
	return sr.approver.Request(ctx, req)
}

// Execute runs the nested agent on the task and returns its answer; see
// NewSubAgent.
func (s *subAgent) Execute(ctx context.Context, args json.RawMessage, _ Progress) (string, error) {
	var a struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("the arguments of %s must be {\"task\": \"...\"}: %w", s.name, err)
	}
	if strings.TrimSpace(a.Task) == "" {
		return "", fmt.Errorf("the task of %s is empty: say what it should do", s.name)
	}

	outer, _ := ctx.Value(subRunKey{}).(*subRun) // the run calling is a sub-agent's
	sr := &subRun{depth: 1, limit: s.maxDepth}
	if outer != nil {
		sr.depth = outer.depth + 1
		sr.limit = min(sr.limit, outer.limit)
		sr.approver = outer.approver
	}
	if sr.depth > sr.limit {
		return "", fmt.Errorf("sub-agent %s cannot run here: sub-agents nest at most %d deep, and this call would run %d deep", s.name, sr.limit, sr.depth)
	}
	var call *CallInfo
	if v := callIn(ctx); v != nil {
		call = &v.CallInfo
	}
	link, _ := ctx.Value(nestKey{}).(*nestLink)
	if link != nil && link.call != call {
		link = nil // made for another call: this one was called from inside it
	}
	if link != nil {
		if _, inherit := link.approver.(inheritApprover); !inherit {
			sr.approver = link.approver
		}
	}
	defer sr.end()

	in := Input{Message: a.Task}
	fw := forwarder{name: s.name}
	if call != nil {
		in.SessionID = call.SessionID
		fw.parent = call.CallID
	}
	if link != nil {
		fw.chunks, fw.ack = link.chunks, make(chan struct{}, 1)
	}
	var (
		all, cur strings.Builder // visible text of the run, of the round
		last     string          // of the last round that wrote any
		final    Chunk           // the last chunk of the nested run's own
		rejected *ToolCall       // its last rejected call
		runErr   error
	)
	endRound := func() {
		if cur.Len() == 0 {
			return
		}
		last = cur.String()
		if all.Len() > 0 {
			all.WriteString("\n\n")
		}
		all.WriteString(last)
		cur.Reset()
	}
	for c, err := range s.agent.Run(context.WithValue(ctx, subRunKey{}, sr), in) {
		if err != nil {
			runErr = err
			break
		}
		if c.Depth == 0 {
			final = c
			switch c.Kind {
			case KindText:
				cur.WriteString(c.Text)
			case KindRoundEnd:
				endRound()
			case KindToolRejected:
				rejected = c.Tool
			}
		}
		fw.send(c)
	}
	endRound()
	text := all.String()
	switch {
	case ctx.Err() != nil:
		// The calling run was interrupted: its rejection of this call shows
		// the text so far.
		return text, context.Cause(ctx)
	case runErr != nil:
		return "", fmt.Errorf("sub-agent %s failed: %w%s", s.name, runErr, soFar(text))
	case final.Kind == KindInterrupted:
		why := "it stopped"
		if rejected != nil {
			why = fmt.Sprintf("its call of %s was rejected: %s", rejected.Name, rejected.Reason)
		}
		return "", fmt.Errorf("sub-agent %s did not finish: %s%s", s.name, why, soFar(text))
	case final.Kind == KindWarning && final.Code == WarnMaxToolRounds:
		return "", fmt.Errorf("sub-agent %s did not finish: it reached its maximum number of tool rounds%s", s.name, soFar(text))
	case last == "":
		return fmt.Sprintf("(sub-agent %s finished without writing an answer)", s.name), nil
	}
	return last, nil
}

// soFar is the text a sub-agent wrote, for an error.
func soFar(text string) string {
	if text == "" {
		return ""
	}
	return "; what it wrote so far:\n" + text
}

// forwarder marks a nested run's chunks and sends them to the calling run.
type forwarder struct {
	chunks chan<- nestedChunk // nil: nobody shows them
	ack    chan struct{}      // the calling run's answer to each chunk sent
	name   string             // the sub-agent's name
	parent string             // the id of the call that started the run
	// The marks of the last chunk from deeper down, reused while they stay
	// the same, as they do for a whole nested run.
	inAgent, inParent, outAgent, outParent string
}

func (f *forwarder) send(c Chunk) {
	if f.chunks == nil {
		return
	}
	if c.Depth == 0 {
		c.Agent, c.Parent = f.name, f.parent
	} else {
		if c.Agent != f.inAgent || c.Parent != f.inParent {
			f.inAgent, f.inParent = c.Agent, c.Parent
			f.outAgent, f.outParent = f.name+"/"+c.Agent, f.parent+"/"+c.Parent
		}
		c.Agent, c.Parent = f.outAgent, f.outParent
	}
	c.Depth++
	// The calling run drains the channel until this call returns, and
	// answers each chunk once it has yielded it.
	f.chunks <- nestedChunk{c: c, ack: f.ack}
	<-f.ack
}
