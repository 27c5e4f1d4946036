package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/planround/planround/memory"
)

// Tool is a function the model may call.
//
// Execute runs the call with its arguments (a valid JSON object) and returns
// the result text the model will read. It must honour ctx: when ctx ends the
// run was interrupted, and Execute should stop and return. progress receives
// partial output while the tool runs (for example the lines of a command); the
// agent keeps everything written to it, and attaches it to the rejected chunk
// and the history when the run is interrupted during execution. progress is
// safe for concurrent use and never nil.
//
// A returned error is data for the model, not a failure of the run: the tool
// message says "error: " and the error's text. A panic is recovered the same
// way.
type Tool interface {
	Definition() ToolDefinition
	Execute(ctx context.Context, args json.RawMessage, progress Progress) (string, error)
}

// Progress receives a running tool's partial output.
type Progress interface {
	// Write appends partial output. It never fails.
	Write(p []byte) (int, error)
	// WriteString appends partial output. It never fails.
	WriteString(s string) (int, error)
}

// ToolDefinition describes a tool to the model and to the agent.
type ToolDefinition struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON schema of the arguments object; nil means an
	// object without properties. The registry refuses a schema that is not
	// valid (or refers to other documents), and the agent checks every
	// call's arguments against it before approval: a call that does not
	// match never reaches the Approver or the tool, and the model reads
	// what is wrong. [NewTool] infers it from a Go type.
	Parameters map[string]any
	// SkipApproval lets the call run without asking the Approver. Only for
	// tools that are the user's interaction itself (ask_user_question) or a
	// silent display that changes nothing (show_card): never for anything
	// that runs commands, touches files or spends budget.
	SkipApproval bool
	// Hints are what the tool says about its behaviour, for approvers and
	// approval cards; nil says nothing. [WithHints] sets them for a tool
	// made by [NewTool]; package mcpclient from an MCP tool's annotations.
	// A tool that knows better per call says so with an [ApprovalNote].
	Hints *ToolHints
	// NoTruncate keeps this tool's arguments and results whole when history
	// is truncated for the next request (for example get_skill).
	NoTruncate bool
	// Resumable says that Execute may be called again for a call it
	// already started, after the call's process stopped or its run was
	// suspended: the tool keeps what it needs by the call's key
	// ([CallInfo.Key]) and gives the same call the same outcome, as
	// ask_user_question does with its form.
	//
	// With a Config.Store that implements memory.CallLog:
	//   - A resumed turn ([Agent.Resume]) runs again a resumable call it
	//     found executing, instead of rejecting it as stopped
	//     (CauseStopped): without asking the Approver again (the call was
	//     approved before it started), with an executing chunk, the side
	//     message and Execute as for a fresh call, and the same
	//     CallInfo.Key.
	//   - Execute may return an error wrapping [ErrSuspended] (see
	//     [Suspend]) while the call waits for something from outside the
	//     run: the run ends suspended as at a pending approval (a
	//     suspended chunk last, no tool message for the call), and the
	//     call's open-call record stays executing, naming the
	//     [Suspension]'s WaitID (memory.OpenCall.ApprovalID; kept as it
	//     was when the id is empty), to be run again when the turn
	//     resumes. With parallel tools the run waits for the round's other
	//     calls first. A run whose context is cancelled with the cause
	//     ErrSuspended while the tool runs (a host that shuts down)
	//     suspends the same way, whatever Execute returns.
	//   - A new user message on the session closes a resumable call found
	//     executing as stopped, as any other, and cancels what its record
	//     names through the Approver ([ApprovalCanceler]), so that a
	//     pending form stops being answerable.
	//
	// Without a CallLog, and for a tool that is not resumable, ErrSuspended
	// from Execute is an ordinary tool error: the model reads it.
	Resumable bool
}

// SideMessenger is an optional interface for a [Tool] that shows something
// beside its card before it runs, such as a form for ask_user_question.
//
// The agent calls SideMessage synchronously right after it yields the call's
// executing chunk and before Execute; a non-nil result is yielded at once as a
// side chunk. The payload must marshal to a JSON object. An error or a panic
// in SideMessage is logged (a panic with its stack) and the call runs without
// a side message.
type SideMessenger interface {
	SideMessage(ctx context.Context, call ToolCall) (any, error)
}

// FuncTool is a [Tool] made of a definition and a function.
type FuncTool struct {
	Def ToolDefinition
	Fn  func(ctx context.Context, args json.RawMessage, progress Progress) (string, error)
}

// Definition returns t.Def.
func (t FuncTool) Definition() ToolDefinition { return t.Def }

// Execute calls t.Fn.
func (t FuncTool) Execute(ctx context.Context, args json.RawMessage, progress Progress) (string, error) {
	return t.Fn(ctx, args, progress)
}

// NewTool returns a [Tool] whose arguments are a Go value: the model's
// arguments are decoded into an Args and given to fn, which returns the
// result text the model reads, as [Tool.Execute] does.
//
// The JSON schema the model sees is inferred from Args, which must be a
// struct (or a map with string keys): a field's json tag names its property,
// a jsonschema tag describes it, and a field is required unless it is a
// pointer or its json tag says omitempty or omitzero. A struct without
// fields takes no arguments. Properties Args does not have are refused. The
// schema follows the rules of github.com/google/jsonschema-go; [WithParameters]
// replaces it with one written by hand.
//
// The agent checks a call's arguments before it asks the [Approver]: when
// they do not match the schema, or cannot be decoded into an Args (a
// fraction for an integer field, an unknown property a hand-written schema
// lets through), the call does not run, nobody is asked, and the model reads
// what is wrong. An Args for which no schema can be inferred (a channel or
// func field, a map without string keys) makes [NewToolRegistry] and
// [ToolRegistry.Add] fail.
func NewTool[Args any](name, description string, fn func(ctx context.Context, args Args, progress Progress) (string, error), opts ...ToolOption) Tool {
	t := &typedTool[Args]{def: ToolDefinition{Name: name, Description: description}, fn: fn}
	for _, o := range opts {
		o(&t.def)
	}
	if t.def.Parameters == nil {
		t.def.Parameters, t.err = schemaFor[Args]()
	}
	if t.err == nil && fn == nil {
		t.err = errors.New("nil function")
	}
	return t
}

// A ToolOption changes the definition of a tool made by [NewTool].
type ToolOption func(*ToolDefinition)

// WithSkipApproval sets [ToolDefinition.SkipApproval]: calls run without
// asking the Approver. Only for tools that are the user's interaction itself
// or change nothing.
func WithSkipApproval() ToolOption {
	return func(d *ToolDefinition) { d.SkipApproval = true }
}

// WithNoTruncate sets [ToolDefinition.NoTruncate]: the tool's arguments and
// results stay whole when history is truncated.
func WithNoTruncate() ToolOption {
	return func(d *ToolDefinition) { d.NoTruncate = true }
}

// WithParameters sets [ToolDefinition.Parameters] to schema, the JSON
// schema of the arguments object, instead of the one inferred from the
// tool's Args. Arguments are still decoded into an Args, and a property Args
// has no field for is refused.
func WithParameters(schema map[string]any) ToolOption {
	return func(d *ToolDefinition) { d.Parameters = schema }
}

// typedTool is the Tool of NewTool.
type typedTool[Args any] struct {
	def ToolDefinition
	err error // why the tool cannot be registered
	fn  func(ctx context.Context, args Args, progress Progress) (string, error)
}

func (t *typedTool[Args]) Definition() ToolDefinition { return t.def }

func (t *typedTool[Args]) Execute(ctx context.Context, args json.RawMessage, progress Progress) (string, error) {
	a, err := decodeArgs[Args](args)
	if err != nil {
		return "", fmt.Errorf("the arguments of %s do not fit its parameters (%w)", t.def.Name, err)
	}
	return t.fn(ctx, a, progress)
}

// typed is implemented by the tools of NewTool: the registry asks them why
// they cannot be registered, and the agent has them decode a call's
// arguments before approval.
type typed interface {
	buildErr() error
	checkArgs(args json.RawMessage) error
}

func (t *typedTool[Args]) buildErr() error { return t.err }

func (t *typedTool[Args]) checkArgs(args json.RawMessage) error {
	_, err := decodeArgs[Args](args)
	return err
}

// CallInfo describes the tool call a [Tool] is running: see
// [CallFromContext].
type CallInfo struct {
	// SessionID is the run's [Input.SessionID]; empty for a run without one.
	SessionID string
	// CallID is the call's id, as in [ToolCall.ID] and the tool message.
	CallID string
	// Tool is the name of the tool called.
	Tool string
	// Round is the tool round of the call.
	Round int
	// ApprovalID is the approval id of the [Pending] ticket the call's
	// approval got, as on its approval_required chunk ([ToolCall.ApprovalID]);
	// empty when the call was not waited for: a tool that skips approval, a
	// decision taken at once ([Decided]), a Pending ticket without an id,
	// or a resumable call that a resumed turn runs again.
	ApprovalID string
	// Key names the call durably, as [ApprovalRequest.Key] does ("<stored
	// message id>/<call id>"): the same in every turn that runs the call,
	// the first and a resumed one. Empty when the run keeps no open-call
	// records.
	Key string
	// State is what the call's tool saved with [SaveCallState] in a run
	// that stopped while the call ran: a resumed turn ([Agent.Resume])
	// hands the call back to its tool with it, to take the call up where
	// it was (an MCP client re-attaches to the server's task). Empty for a
	// call that starts afresh.
	State string
	// Parent is the call that was running where this call's run started,
	// when a tool runs an agent itself (a sub-agent): its ctx carries the
	// call, and the sub-agent's tools see it here. Nil for a top-level run.
	Parent *CallInfo
}

// Conversation returns the key of the conversation the call belongs to,
// for a tool that keeps state per conversation (a browser, a shell, a
// working directory): SessionID for a call of the host's run; for a call of
// a nested run (Parent set, as for a sub-agent's calls), SessionID followed
// by the ids of the calls that started the nested runs, outermost first,
// each after a "/" ("s1/call_1/call_7"), so that a sub-agent never works in
// the user's state, nor in another sub-agent run's. It is empty for a call
// of a run without a session id. A tool releases the state of a
// sub-agent's conversation with [AfterSubAgent].
func (c CallInfo) Conversation() string {
	if c.SessionID == "" || c.Parent == nil {
		return c.SessionID
	}
	return c.Parent.Conversation() + "/" + c.Parent.CallID
}

// RootSession returns the session id of the host's run the call belongs
// to, through any nested runs (a sub-agent's call belongs to the session of
// the run that called the sub-agent): the session whose owner a call is
// made for, for a tool that keeps what it holds per person (tokens,
// approvals). Empty when that run has no session id.
func (c CallInfo) RootSession() string {
	for c.Parent != nil {
		c = *c.Parent
	}
	return c.SessionID
}

type callKey struct{}

// callValue is what a call's context carries under callKey: the call,
// where ShowSide puts its side messages, what SaveCallState saves with
// (nil when the run keeps no open-call records), and where the run that
// made the call records (a sub-agent's run may record there too).
type callValue struct {
	CallInfo
	sides *sideQueue
	save  func(state string) error
	obs   *observer
}

// callIn returns the call ctx carries, or nil.
func callIn(ctx context.Context) *callValue {
	v, _ := ctx.Value(callKey{}).(*callValue)
	return v
}

// CallFromContext returns the tool call whose [Tool.Execute] or
// [SideMessenger.SideMessage] got ctx (or a context derived from it), and
// whether there is one: a tool that serves several conversations (a
// per-conversation MCP server, a sub-agent) finds its session and call
// here.
func CallFromContext(ctx context.Context) (CallInfo, bool) {
	v := callIn(ctx)
	if v == nil {
		return CallInfo{}, false
	}
	return v.CallInfo, true
}

// withCall returns ctx carrying c, with the call ctx already carries, if
// any, as c's parent.
func withCall(ctx context.Context, c CallInfo, sides *sideQueue, save func(string) error, obs *observer) context.Context {
	if p := callIn(ctx); p != nil {
		c.Parent = &p.CallInfo
	}
	return context.WithValue(ctx, callKey{}, &callValue{c, sides, save, obs})
}

// SaveCallState saves state with the open-call record of the call ctx
// belongs to (memory.OpenCall.State), replacing what it saved before, so
// that a turn resumed after the process stopped ([Agent.Resume]) can take
// the call up again: such a call found executing is run again, as a
// [ToolDefinition.Resumable] tool's is, with the state in
// [CallInfo.State], and the tool goes on from there (an MCP client
// re-attaches to the task that runs the call on its server). A call found
// executing without a saved state (or with the empty state) is rejected as
// stopped (CauseStopped), unless its tool is resumable: so a tool that
// must not run twice saves its state only once what it started can be
// found again, and a crash before that is reported as a stop.
//
// A call with a saved state also suspends the run, rather than being
// interrupted, when the run's context is cancelled with the cause
// [ErrSuspended] while it runs (a host that shuts down), and an error
// wrapping ErrSuspended from its Execute suspends the run as a resumable
// tool's does.
//
// state is opaque to the agent and the store, at most memory.MaxCallState
// bytes. ctx is the context Execute got, or one derived from it; the save
// is made even when ctx is cancelled. It returns [ErrNoCallRecord] when
// the run keeps no record for the call, and the store's error when the
// save fails.
func SaveCallState(ctx context.Context, state string) error {
	c := callIn(ctx)
	if c == nil || c.save == nil {
		return ErrNoCallRecord
	}
	if len(state) > memory.MaxCallState {
		return fmt.Errorf("agent: a call state of %d bytes, at most %d", len(state), memory.MaxCallState)
	}
	return c.save(state)
}

// callContext is the context of a call's SideMessage and Execute: the run's,
// carrying the call.
func (r *run) callContext(cs *callState) context.Context {
	if r.sides == nil {
		r.sides = &sideQueue{ready: make(chan struct{}, 1)}
	}
	var state string
	if cs.open != nil {
		cs.openMu.Lock()
		state = cs.open.State
		cs.openMu.Unlock()
	}
	return withCall(r.ctx, CallInfo{
		SessionID:  r.t.in.SessionID,
		CallID:     cs.call.ID,
		Tool:       cs.call.Name,
		Round:      r.round,
		ApprovalID: cs.chunk.ApprovalID,
		Key:        cs.key(),
		State:      state,
	}, r.sides, r.stateSaver(cs), r.obs)
}

// ShowSide shows payload beside the card of the call ctx belongs to, while
// the call runs: the run yields it as a side chunk (KindSide, with the
// call's id and name in Tool), as it yields a [SideMessenger]'s side
// message before the call starts. A tool uses it for what comes up only
// while it runs, such as a form an MCP server asks the user to fill in
// (see package interact and mcpclient). The payload must marshal to a JSON
// object; a runner suspends rather than interrupts a run at shutdown while
// a shown payload that has an AwaitsPerson method reporting true waits, as
// for a side message.
//
// ctx is the context [Tool.Execute] or [SideMessenger.SideMessage] got, or
// one derived from it. The payload is yielded before the call's result,
// and before any partial output the tool writes after ShowSide returns;
// with parallel calls, while any call of the round runs. ShowSide does not
// wait for it to be yielded. A payload shown after the run was interrupted,
// or by a call that already returned, is never yielded; what must not be
// missed (a form) is kept where a front end can list it as well.
//
// ShowSide reports false, and does nothing, when ctx is not the context of
// a call of a run, or payload is nil.
func ShowSide(ctx context.Context, payload any) bool {
	c := callIn(ctx)
	if c == nil || c.sides == nil || payload == nil {
		return false
	}
	c.sides.add(ToolCall{ID: c.CallID, Name: c.Tool}, payload)
	return true
}

// sideQueue holds the payloads of ShowSide until the run yields them.
type sideQueue struct {
	ready chan struct{} // has a value when items may hold something

	mu    sync.Mutex
	items []sideItem // guarded by mu
}

// sideItem is a payload of ShowSide and the call that showed it.
type sideItem struct {
	call    ToolCall
	payload any
}

func (q *sideQueue) add(call ToolCall, payload any) {
	q.mu.Lock()
	q.items = append(q.items, sideItem{call, payload})
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// signal is ready when the queue may hold something; nil for a nil
// queue, so never ready.
func (q *sideQueue) signal() <-chan struct{} {
	if q == nil {
		return nil
	}
	return q.ready
}

// take removes and returns what the queue holds.
func (q *sideQueue) take() []sideItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
