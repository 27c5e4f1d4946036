package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/intent"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// Reasons given on rejected tool calls, when nothing gave a better one. They
// are text for people and for the model; a host tells rejections apart by
// their [Cause], and reads these texts through [Cause.DefaultReason].
const (
	// reasonRejected is the reason of a call a person rejected without a
	// reason.
	reasonRejected = "rejected by user"
	// reasonDenied is the reason of a call a policy rejected without a
	// reason.
	reasonDenied = "denied by policy"
	// reasonApprovalInterrupted is the reason of a call whose approval was
	// still pending when the run was interrupted. A call whose approval was
	// decided just before the interrupt records the decision instead: an
	// approved call that never ran is reasonNotRun, a rejection keeps its
	// reason.
	reasonApprovalInterrupted = "interrupted while waiting for approval"
	// reasonInterrupted is the reason of a call interrupted while it ran.
	reasonInterrupted = "tool call interrupted"
	// reasonNotRun is the reason of a call that never started because the
	// run ended before its turn.
	reasonNotRun = "tool call not run: the run ended first"
	// reasonIncomplete is the reason of a call of a response that did not
	// finish (interrupted or cut while streaming): its arguments may be
	// incomplete, so it never runs and is not in the history.
	reasonIncomplete = "tool call not run: the model's response did not finish"
	// reasonNoApprover is the reason of a call of a tool that needs
	// approval on an agent without an Approver: a tool added to a shared
	// Config.Tools after New.
	reasonNoApprover = "the tool needs approval and the agent has no Approver"
)

// Input is one user turn.
type Input struct {
	// SessionID names the conversation. With a Config.Store it selects the
	// session to load and persist; it is also given to the Approver (an
	// runner's approvals need it: without one, its calls are rejected at
	// once).
	SessionID string
	// History is the conversation so far. It is used only when the agent
	// has no Store or SessionID is empty.
	History []memory.Message
	// Message is the user's new message.
	Message string
	// Settings override the agent's Config.Settings for this run, field by
	// field: what it sets wins, what it leaves unset is the Config's.
	Settings ModelSettings
	// Images go with Message, after its text: each is an http or https
	// URL the provider fetches, or bytes with their MIME type, which are
	// sent as a data: URL (see [memory.Image]; [memory.ValidateImage] says
	// what is accepted, an image of at most [memory.MaxImageSize] bytes).
	// The model needs to accept images. They are sent in every request of
	// the turn and saved with the user message; later turns send a line
	// of text in their place unless Config.Truncate.KeepImages is set. The
	// run reads Data without copying it: do not change it until the turn
	// has ended.
	Images []memory.Image
}

// Turn is one user turn, ready to run. It records the messages the turn adds
// to the conversation, so a host without a Store can persist them.
type Turn struct {
	a     *Agent
	in    Input
	used  bool
	msgs  []memory.Message // the turn's messages to persist, user message first
	usage stream.Usage

	// accepted is closed once the user message is stored, or the run
	// ended without storing it (see Accepted). It is made by the first
	// call of Accepted: a run nobody asks keeps none. isAccepted says the
	// moment passed; acceptMu guards both.
	acceptMu   sync.Mutex
	accepted   chan struct{}
	isAccepted bool
}

// closedChan is the channel Accepted returns when it is first called after
// the turn was accepted.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// NewTurn prepares a turn; nothing happens until [Turn.Run] is ranged over.
func (a *Agent) NewTurn(in Input) *Turn { return &Turn{a: a, in: in} }

// Accepted returns a channel that is closed once the turn's user message is
// stored: with a Config.Store and an Input.SessionID, when Append returned,
// before the first model request; without, when the run starts. It is also
// closed when the run ends without storing it (the run's error says why). A
// host that acknowledges a message to its sender (an HTTP 202) waits for it
// first, so that a message it acknowledged survives a crash. It may be
// called from any goroutine.
func (t *Turn) Accepted() <-chan struct{} {
	t.acceptMu.Lock()
	defer t.acceptMu.Unlock()
	if t.accepted == nil {
		if t.isAccepted {
			return closedChan
		}
		t.accepted = make(chan struct{})
	}
	return t.accepted
}

// accept closes t.accepted once; the run's goroutine calls it.
func (t *Turn) accept() {
	t.acceptMu.Lock()
	defer t.acceptMu.Unlock()
	if t.isAccepted {
		return
	}
	t.isAccepted = true
	if t.accepted != nil {
		close(t.accepted)
	}
}

// Run answers one user turn: it is a.NewTurn(in).Run(ctx). See [Turn.Run].
func (a *Agent) Run(ctx context.Context, in Input) iter.Seq2[Chunk, error] {
	return a.NewTurn(in).Run(ctx)
}

// Messages returns the messages the turn added to the conversation so far
// (for a turn that suspended, the calls still open have no tool message):
// the user message, assistant messages (raw text, with tool calls), tool
// messages and the persistent injections of Config.Hooks (system or user
// messages with Hook set, where they were injected). It is always valid history (every tool call has its tool
// message) once the run has ended, however it ended. A run that ended
// before its first model request (its context was already done, or the
// Store failed) adds nothing. Call it from the goroutine that ranges over Run
// (or after the loop).
func (t *Turn) Messages() []memory.Message {
	return append([]memory.Message(nil), t.msgs...)
}

// Usage returns the token usage of the turn's model calls, summed over the
// rounds that reported it.
func (t *Turn) Usage() Usage { return t.usage }

// Run returns the turn's chunks. The work happens while the caller ranges:
// the model's stream is read in the caller's goroutine, so a slow consumer
// slows the read (there is no buffering). Breaking out of the loop ends the
// run, releases everything it holds and persists the turn.
//
// Chunks come in order; the last pair carries the error, if any, with a zero
// Chunk. An Input that cannot be sent (an invalid image) ends the run with
// an error before anything else happens. Model and transport failures (HTTP
// errors, a cut stream, an error frame) and store failures are errors; a
// tool's failure is not (the model reads it). Cancelling ctx interrupts the run: it ends with an interrupted
// chunk and a nil error. With a Store, the user's message is saved before
// the first model request (if that fails, the run ends with the store's
// error and nothing else happens), so a process that dies during the turn
// keeps it; each round is saved when it ends, before its round_end chunk,
// and the rest of the turn after the last chunk, whatever ended the run; if
// saving fails, the store's error is the last pair (also after an
// interrupted chunk). A run that suspends (see [ErrSuspended]) ends with a
// suspended chunk and a nil error, its open calls kept for [Agent.Resume]. Input.Settings that [New] would refuse in a
// Config end the run at once with an error, before anything is loaded,
// saved or sent.
//
// A Turn runs once: ranging again yields only [ErrTurnUsed].
func (t *Turn) Run(ctx context.Context) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if t.used {
			yield(Chunk{}, ErrTurnUsed)
			return
		}
		t.used = true
		defer t.accept()
		obs := t.a.observer(ctx)
		ctx, tel := obs.tel.startRun(ctx, t.in.SessionID, false)
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		r := &run{t: t, a: t.a, ctx: ctx, cancel: func() { cancel(nil) }, cancelCause: cancel, yield: yield, tools: t.a.cfg.Tools.tools(), obs: obs, tel: tel}
		r.emitPiece = r.textPiece
		r.do()
		r.endRun()
	}
}

// run is the state of one running turn. All of it is touched only by the
// goroutine that ranges over the iterator.
type run struct {
	a      *Agent
	t      *Turn
	ctx    context.Context // the run's: cancelled by the caller or by stop
	cancel func()
	// cancelCause cancels ctx with a cause (a lost lease suspends the run).
	cancelCause context.CancelCauseFunc
	yield       func(Chunk, error) bool
	// stopped is set once yield returned false: yield is never called again.
	stopped bool
	// over is set once the interrupted chunk was yielded: it is the last
	// chunk (only a store error may follow it).
	over bool

	// saved is how many of t.msgs are in the Store already: the user
	// message is saved when the turn starts, the rest at the end of each
	// round and, with a CallLog, as each call's outcome is known.
	saved int

	// log is the Store's CallLog, for a run with a session: the calls of a
	// round are kept open in it until their tool messages are saved.
	log memory.CallLog
	// suspended is set when the run suspended at a pending approval or a
	// resumable tool that waits.
	suspended bool
	// calls are the calls of the current tool round; recorded is how many
	// of them have their tool message in t.msgs.
	calls    []*callState
	recorded int

	settings ModelSettings // Config.Settings with Input.Settings over them

	// tools are Config.Tools as they were when the run started: the run
	// offers, looks up and runs these whatever happens to the registry.
	tools *toolSet

	prefix []memory.Message // system prompt and layer blocks
	// past is what the model sees before the messages the run adds (its
	// turn's, t.msgs): the history, shortened (for a resumed turn, with
	// the turn as stored). Its assistant text loses its intent tags once
	// the planning round is over. t.msgs follow it in every request,
	// their tags stripped as they are sent: a run keeps no second copy of
	// them.
	past []memory.Message
	// continueAt, when not zero, is how many of t.msgs come before the
	// [continue] message that follows the planning reply in requests (it
	// is for the model only: not one of the turn's messages).
	continueAt int
	// stripped is the planning reply before [continue] without its tags,
	// as requests send it, stripped once.
	stripped string
	temp     []memory.Message // the temporary hook injections of the next request
	intent   Intent           // the planning round's, once known
	parser   *stream.Parser
	acc      stream.Accumulator
	// inputs are the Tool values of the round's tool_input chunks, by the
	// accumulator's slot: one per call, shared by its fragments' chunks
	// (they say the same). Only with Config.StreamToolArguments.
	inputs    []*ToolCall
	round     int
	emitPiece func(stream.Piece) // r.textPiece, bound once

	// nested carries the chunks of sub-agents' runs to this run's
	// iterator; made at the run's first sub-agent call (see nestContext).
	nested chan nestedChunk
	// sides holds what running calls show with ShowSide; made at the
	// run's first call.
	sides *sideQueue

	// obs is where the run's spans, metrics and log records go (see
	// Agent.observer).
	obs *observer
	// tel is the run's invoke_agent span and what decides its outcome.
	tel runTel
}

func (r *run) emit(c Chunk) bool {
	if r.stopped || r.over {
		return false
	}
	if !r.yield(c, nil) {
		r.stop()
		return false
	}
	r.over = c.Kind == KindInterrupted || c.Kind == KindSuspended
	return true
}

// fail yields err as the last pair unless the consumer has gone.
func (r *run) fail(err error) {
	if r.tel.err == nil {
		r.tel.err = err
	}
	if !r.stopped {
		r.stop()
		r.yield(Chunk{}, err)
	}
}

// failOrInterrupt ends a run that failed before its first request: with
// interrupted when the failure came from the run's context, else with err.
func (r *run) failOrInterrupt(err error) {
	if r.ctx.Err() != nil {
		r.emit(Chunk{Kind: KindInterrupted})
		return
	}
	r.fail(err)
}

// stop marks the consumer gone and cancels the run's context, so a running
// tool or a pending approval ends.
func (r *run) stop() {
	r.stopped = true
	r.cancel()
}

// textPiece yields a piece as a text chunk. A piece that holds only tags
// (empty Text) is yielded too, so that the chunks' Raw fields add up to the
// whole reply (see History).
func (r *run) textPiece(p stream.Piece) {
	if p.Raw == "" {
		return
	}
	r.emit(Chunk{Kind: KindText, Round: r.round, Text: p.Text, Raw: p.Raw, Voice: p.Voice})
}

// record adds msgs to the turn's messages as they are. Requests send them
// with the intent tags of assistant text stripped (see requestMessages):
// later rounds of the run do not see, and imitate, them.
func (r *run) record(msgs ...memory.Message) {
	r.t.msgs = append(r.t.msgs, msgs...)
}

// stripTags removes the intent tags from the text of every assistant
// message of r.past, so that later rounds do not see, and imitate, them.
// r.past holds copies: the history the run was given is not changed.
func (r *run) stripTags() {
	for i := range r.past {
		if m := &r.past[i]; m.Role == memory.RoleAssistant {
			m.Content = r.a.cfg.Intents.Strip(m.Content)
		}
	}
}

func (r *run) do() {
	if err := r.t.in.Settings.check("Input.Settings"); err != nil {
		r.fail(err)
		return
	}
	r.settings = r.a.cfg.Settings.merge(r.t.in.Settings)
	// A run interrupted before its first request did nothing: it loads,
	// sends and records nothing, and ends like any interrupted run.
	if r.ctx.Err() != nil {
		r.emit(Chunk{Kind: KindInterrupted})
		return
	}
	if err := r.t.in.check(); err != nil {
		r.fail(err)
		return
	}
	if st, ok := r.a.cfg.Store.(memory.CallLog); ok && r.t.in.SessionID != "" {
		r.log = st
	}
	release, err := r.claim()
	if err != nil {
		r.failOrInterrupt(err)
		return
	}
	defer release()
	history, err := r.load(true)
	if err != nil {
		r.failOrInterrupt(err)
		return
	}
	if r.a.cfg.Store != nil && r.t.in.SessionID != "" {
		// A turn left with open calls (a crash, a suspension) is over
		// now: its calls are closed before the new message.
		var ok bool
		if history, ok = r.moveOn(history); !ok {
			return
		}
	}
	history = memory.Repair(history)
	if r.prefix, err = r.contextPrefix(); err != nil {
		r.failOrInterrupt(err)
		return
	}
	user := r.userMessage()
	if err := r.saveUser(user); err != nil {
		r.failOrInterrupt(err)
		return
	}
	defer r.persist()
	r.begin(history, user)

	skipTools := false
	if r.a.cfg.DisablePlanning {
		// The rounds after planning never see intent tags: those of earlier
		// turns' replies go here.
		r.stripTags()
	} else {
		var ok bool
		if skipTools, ok = r.planningRound(); !ok {
			return
		}
	}
	if skipTools {
		r.round = 1
		res, ok := r.streamRound(false, r.a.cfg.ContinuationPrompt)
		if !ok {
			return
		}
		if res.raw != "" {
			r.record(memory.Message{Role: memory.RoleAssistant, Content: res.raw, CreatedAt: time.Now()})
		}
		r.endRound(res, "")
		return
	}

	r.toolLoop(1)
}

// toolLoop runs the tool rounds from round from until the model answers
// without calling a tool, the run ends, or Config.MaxToolRounds.
func (r *run) toolLoop(from int) {
	for r.round = from; r.round <= r.a.cfg.MaxToolRounds; r.round++ {
		res, ok := r.streamRound(true, "")
		if !ok {
			return
		}
		if len(res.calls) == 0 {
			if res.raw != "" {
				r.record(memory.Message{Role: memory.RoleAssistant, Content: res.raw, CreatedAt: time.Now()})
			}
			r.endRound(res, "")
			return
		}
		if !r.toolRound(res) {
			return
		}
		if !r.endRound(res, "") {
			return
		}
	}
	r.round--
	r.tel.maxRounds = true
	r.emit(Chunk{Kind: KindWarning, Round: r.round, Code: WarnMaxToolRounds, Text: "maximum tool rounds reached"})
}

// planningRound runs round 0: the planning request, without tools. It
// reports whether the reply's intent skips the tool loop, and false when
// the run is over.
func (r *run) planningRound() (skipTools, ok bool) {
	res, ok := r.streamRound(false, r.a.cfg.PlanningPrompt)
	if !ok {
		return false, false
	}
	det := r.a.cfg.Intents.Detect(res.raw)
	in := IntentNone
	if det.Found {
		in = Intent(det.Intent)
	}
	r.intent = in
	// The reply is recorded before its round_end is yielded: a consumer
	// that stops at round_end has seen all of it.
	if res.raw != "" {
		r.record(memory.Message{Role: memory.RoleAssistant, Content: res.raw, CreatedAt: time.Now()})
		// [continue] is for the model only: not part of the turn's messages.
		// A reply that was only a tag said nothing to continue from (its
		// empty message is left out of requests).
		if text := r.a.cfg.Intents.Strip(res.raw); text != "" {
			r.continueAt, r.stripped = len(r.t.msgs), text
		}
	}
	if !r.endRound(res, in) {
		return false, false
	}
	r.stripTags()
	return det.SkipTools, true
}

// endRound yields the round_end of the current round, whose messages are
// recorded, with in as its intent (planning round) and, when the response
// was cut short, a warning before it. It reports false when the run is
// over.
func (r *run) endRound(res roundResult, in Intent) bool {
	var warn Chunk
	switch res.finish {
	case FinishLength:
		warn = Chunk{Code: WarnLength, Text: "the token limit cut the model's response short"}
	case FinishContentFilter:
		warn = Chunk{Code: WarnContentFilter, Text: "the provider's content filter cut the model's response short"}
	}
	if warn.Code != "" {
		warn.Kind, warn.Round = KindWarning, r.round
		if !r.emit(warn) {
			return false
		}
	}
	// The round is saved before its end is shown: a consumer that saw
	// round_end can count on it.
	if _, err := r.save(); err != nil {
		r.fail(err)
		return false
	}
	return r.emit(Chunk{Kind: KindRoundEnd, Round: r.round, Intent: in, FinishReason: res.finish, Usage: res.usage})
}

// Preview returns the messages of the first request (the planning round)
// that a turn with in would send, as the model would receive them: the
// system prompt and the blocks of the context layers, the conversation so
// far made valid ([memory.Repair]) with old tool traffic shortened
// ([Config.Truncate]), the new user message, the injections of
// [Config.Hooks] at the first request's checkpoints and the planning
// prompt (none when [Config.DisablePlanning] is set), laid out as
// [Config.RequestShape] says. It is the same assembly a run uses, for a
// host that shows what the model will see or counts its tokens.
//
// Preview changes nothing and sends nothing: it reads the session from the
// Store (a session that does not exist has no history and is not created)
// and asks the layers and the hooks, as a run does (a hook that fails is
// left out, where a run would warn). Its errors are those a run would end
// with before its first request.
func (a *Agent) Preview(ctx context.Context, in Input) ([]memory.Message, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	// A hook's warning has nowhere to go: it is dropped (and logged).
	discard := func(Chunk, error) bool { return true }
	r := &run{t: &Turn{a: a, in: in}, a: a, ctx: ctx, yield: discard, tools: a.cfg.Tools.tools(), obs: a.observer(ctx)}
	history, err := r.load(false)
	if err != nil {
		return nil, err
	}
	history = memory.Repair(history)
	if r.prefix, err = r.contextPrefix(); err != nil {
		return nil, err
	}
	r.begin(history, r.userMessage())
	prompt := a.cfg.PlanningPrompt
	if a.cfg.DisablePlanning {
		r.stripTags()
		r.round, prompt = 1, ""
	}
	r.hooksBefore(a.cfg.DisablePlanning)
	return r.requestMessages(prompt), nil
}

// check reports whether the input can be sent: its images are valid.
func (in Input) check() error {
	for i, img := range in.Images {
		if err := memory.ValidateImage(img); err != nil {
			return fmt.Errorf("agent: Input.Images[%d]: %w", i, err)
		}
	}
	return nil
}

// userMessage returns the turn's user message.
func (r *run) userMessage() memory.Message {
	return memory.Message{Role: memory.RoleUser, Content: r.t.in.Message, Images: slices.Clone(r.t.in.Images), CreatedAt: time.Now()}
}

// begin sets r.past to history, shortened, and records the user's message
// as the turn's first.
func (r *run) begin(history []memory.Message, user memory.Message) {
	r.record(user) // sent from the turn's record
	if len(history) == 0 {
		r.past = nil
		return
	}
	// Everything before the new user message is old: its tool traffic is
	// shortened once, here, for every request of the run (Truncate tells
	// old from new by the user's message). history is the run's own
	// (memory.Repair's copy).
	r.past = memory.Truncate(append(history, user), r.tools.truncate(r.a.truncate))
	// Truncate's copy of the user's message (with its images) is not
	// sent: the slot past keeps beyond its length lets go of it.
	r.past[len(r.past)-1] = memory.Message{}
	r.past = r.past[:len(r.past)-1]
}

// load returns the conversation so far, as stored (not repaired). With
// create, a session the Store does not have is created; without, it has no
// history.
func (r *run) load(create bool) ([]memory.Message, error) {
	in := r.t.in
	st := r.a.cfg.Store
	if st == nil || in.SessionID == "" {
		return in.History, nil
	}
	if _, err := st.Session(r.ctx, in.SessionID); errors.Is(err, memory.ErrNotFound) {
		if !create {
			return nil, nil
		}
		if _, err := st.CreateSession(r.ctx, memory.Session{ID: in.SessionID}); err != nil {
			return nil, fmt.Errorf("agent: creating session %q: %w", in.SessionID, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("agent: loading session %q: %w", in.SessionID, err)
	}
	msgs, err := st.Messages(r.ctx, in.SessionID, false)
	if err != nil {
		return nil, fmt.Errorf("agent: loading session %q: %w", in.SessionID, err)
	}
	return msgs, nil
}

// saveUser appends the user's message to the Store as the turn starts,
// before the first model request, so that a process that dies during the
// turn has kept the message it accepted. persist appends the rest.
func (r *run) saveUser(m memory.Message) error {
	st := r.a.cfg.Store
	if st == nil || r.t.in.SessionID == "" {
		r.t.accept()
		return nil
	}
	if _, err := st.Append(r.ctx, r.t.in.SessionID, m); err != nil {
		return fmt.Errorf("agent: saving the user message of session %q: %w", r.t.in.SessionID, err)
	}
	r.saved = 1
	r.t.accept()
	return nil
}

// persist appends the turn's messages that are not saved yet to the Store,
// also when the run was interrupted or its consumer went away.
func (r *run) persist() {
	st := r.a.cfg.Store
	if st == nil || r.t.in.SessionID == "" || len(r.t.msgs) == 0 {
		return
	}
	if _, err := r.save(); err != nil {
		r.obs.logger.LogAttrs(r.ctx, slog.LevelError, "persist failed", slog.String("session", r.t.in.SessionID), slog.Any("error", err))
		r.fail(err)
		return
	}
	if r.ctx.Err() == nil && !r.suspended { // not after an interrupt, an error, a suspension or a consumer that left
		// With the run's own context: the summary is part of the run, and
		// cancelling the run abandons it.
		r.maybeSummarize()
	}
}

// save appends the turn's messages that are not in the Store yet, also
// after the run's context ended, and returns them as stored. Without a
// Store or a session it does nothing.
func (r *run) save() ([]memory.Message, error) {
	st := r.a.cfg.Store
	if st == nil || r.t.in.SessionID == "" || r.saved == len(r.t.msgs) {
		return nil, nil
	}
	stored, err := st.Append(context.WithoutCancel(r.ctx), r.t.in.SessionID, r.t.msgs[r.saved:]...)
	if err != nil {
		return nil, fmt.Errorf("agent: saving turn of session %q: %w", r.t.in.SessionID, err)
	}
	r.saved = len(r.t.msgs)
	return stored, nil
}

// roundResult is what one streamed round produced.
type roundResult struct {
	raw    string
	calls  []stream.Call
	usage  *stream.Usage
	finish FinishReason
}

// streamRound sends one request and streams its reply as chunks. prompt,
// when not empty, is appended as a temporary system message. It reports false
// when the run is over (consumer gone, interrupted or failed); then it has
// already recorded what arrived and yielded what ends the run.
func (r *run) streamRound(withTools bool, prompt string) (res roundResult, ok bool) {
	if !r.hooksBefore(withTools) {
		return res, false
	}
	r.takeParser()
	defer r.returnParser()
	r.acc.Reset()
	clear(r.inputs)
	r.inputs = r.inputs[:0]
	req := request{messages: r.requestMessages(prompt), settings: r.settings}
	r.temp = nil // sent once
	if r.round == 0 {
		req.settings.ResponseFormat = nil // the planning round answers in words
	}
	if withTools {
		req.tools = r.tools.defs
	}

	start := time.Now()
	ctx, chat := r.startChat(req)
	ctx, body := r.obs.api.withSentBody(ctx)
	var finish string
	err := r.readStream(ctx, chat, req, withTools, &res, &finish)
	res.finish = FinishReason(finish)
	r.t.usage = r.t.usage.Add(usageOr(res.usage))
	r.logCall(start, withTools, res, finish, err)
	r.recordCall(withTools, body, chat, res, finish, err)
	r.endChat(chat, res, finish, err)

	if r.stopped { // the consumer broke out of the loop
		r.recordPartial(withTools)
		return res, false
	}
	if err != nil {
		r.parser.Flush(r.emitPiece) // deliver what arrived
		r.recordPartial(withTools)
		if r.ctx.Err() != nil {
			r.emit(Chunk{Kind: KindInterrupted, Round: r.round})
			return res, false
		}
		r.fail(fmt.Errorf("agent: round %d: %w", r.round, err))
		return res, false
	}
	r.parser.Flush(r.emitPiece)
	if r.stopped {
		r.recordPartial(withTools)
		return res, false
	}
	res.raw = r.parser.Raw()
	if withTools {
		res.calls = r.namedCalls()
		// The calls are in res now: a run that waits for them keeps no
		// accumulator.
		r.acc = stream.Accumulator{}
	}
	return res, true
}

// namedCalls returns the round's calls that got a function name. Argument
// fragments without one (a provider that gave a continuation a new index)
// are not a call the agent can run or the API accepts back in the history
// (it refuses an empty name): they are dropped and logged.
func (r *run) namedCalls() []stream.Call {
	var calls []stream.Call
	for _, c := range r.acc.Calls() {
		if c.Name == "" {
			r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "tool call without a name dropped",
				slog.String("session", r.t.in.SessionID), slog.Int("round", r.round),
				slog.String("id", c.ID), slog.String("arguments", excerpt(c.Arguments)))
			continue
		}
		calls = append(calls, c)
	}
	return calls
}

// readStream sends req with ctx (the run's, carrying the chat span) and
// reads its response.
func (r *run) readStream(ctx context.Context, chat *chatTel, req request, withTools bool, res *roundResult, finish *string) error {
	if err := r.a.cfg.RequestLimit.acquire(ctx, r.obs.tel); err != nil {
		return fmt.Errorf("model request not sent: waiting for a slot of the request limit: %w", err)
	}
	defer r.a.cfg.RequestLimit.release()
	st, err := r.a.model.open(ctx, req)
	if err != nil {
		return fmt.Errorf("model request failed: %w", err)
	}
	complete := false
	defer func() { st.close(complete) }()
	for {
		d, err := st.next()
		if err == io.EOF {
			complete = true
			return nil
		}
		if err != nil {
			return err
		}
		if chat.first && (d.Content != "" || d.Reasoning != "" || len(d.ToolCalls) > 0) {
			chat.firstToken()
		}
		if d.Reasoning != "" {
			if !r.emit(Chunk{Kind: KindReasoning, Round: r.round, Text: d.Reasoning}) {
				return nil
			}
		}
		if d.Content != "" {
			r.parser.Write(d.Content, r.emitPiece)
			if r.stopped {
				return nil
			}
		}
		if withTools {
			for _, tc := range d.ToolCalls {
				slot, started := r.acc.Add(tc)
				if !started {
					if r.a.cfg.StreamToolArguments && tc.Arguments != "" && !r.argsFragment(slot, tc.Arguments) {
						return nil
					}
					continue
				}
				c := r.acc.Call(slot)
				if !r.emit(Chunk{Kind: KindToolCall, Round: r.round, Tool: &ToolCall{ID: c.ID, Name: c.Name, State: StateStart}}) {
					return nil
				}
				// The fragments that came before the name (and this one's).
				if r.a.cfg.StreamToolArguments && c.Arguments != "" && !r.argsFragment(slot, c.Arguments) {
					return nil
				}
			}
		}
		if d.FinishReason != "" {
			*finish = d.FinishReason
		}
		if d.Usage != nil {
			u := *d.Usage
			res.usage = &u
		}
	}
}

// argsFragment yields a tool_input chunk with a fragment of the arguments
// of the call in slot, once its start was yielded (its name is known;
// before that the fragments wait in the accumulator). It reports false
// when the consumer stopped.
func (r *run) argsFragment(slot int, fragment string) bool {
	for len(r.inputs) <= slot {
		r.inputs = append(r.inputs, nil)
	}
	tool := r.inputs[slot]
	if tool == nil {
		c := r.acc.Call(slot)
		if c.Name == "" {
			return true
		}
		tool = &ToolCall{ID: c.ID, Name: c.Name, State: StateStart}
		r.inputs[slot] = tool
	}
	return r.emit(Chunk{Kind: KindToolInput, Round: r.round, Text: fragment, Tool: tool})
}

// recordPartial records the text of a round that did not complete. Calls
// whose arguments were still streaming are dropped from the history (they
// never ran); their cards get a rejected chunk if the consumer is still there.
func (r *run) recordPartial(withTools bool) {
	if raw := r.parser.Raw(); raw != "" {
		r.record(memory.Message{Role: memory.RoleAssistant, Content: raw, CreatedAt: time.Now()})
	}
	if !withTools {
		return
	}
	for i := range r.acc.Len() {
		c := r.acc.Call(i)
		if c.Name == "" {
			continue
		}
		r.emit(Chunk{Kind: KindToolRejected, Round: r.round, Tool: &ToolCall{ID: c.ID, Name: c.Name, State: StateRejected, Reason: reasonIncomplete, Cause: CauseIncomplete}})
	}
}

// contextPrefix returns the system prompt and the blocks of the context
// layers as system messages, asked once per run. Blocks that are empty or
// only white space are left out. A layer's error is returned with the
// layer's position in Config.Layers (the summary layer of
// Config.SummarizeAt comes after them).
func (r *run) contextPrefix() ([]memory.Message, error) {
	var msgs []memory.Message
	if p := r.a.cfg.SystemPrompt; p != "" {
		msgs = append(msgs, memory.Message{Role: memory.RoleSystem, Content: p})
	}
	for i, l := range r.a.layers {
		blocks, err := l.Blocks(r.ctx, r.t.in.SessionID)
		if err != nil {
			return nil, fmt.Errorf("agent: context layer %d: %w", i, err)
		}
		for _, b := range blocks {
			if strings.TrimSpace(b) != "" {
				msgs = append(msgs, memory.Message{Role: memory.RoleSystem, Content: b})
			}
		}
	}
	return msgs, nil
}

// requestMessages returns the messages of the next request: the prefix,
// r.past, the turn's messages (without intent tags, and [continue] after
// the planning reply), the temporary hook injections and the temporary
// prompt, laid out as Config.RequestShape says. Assistant messages with
// neither text nor tool calls (a reply that was only a tag, once
// stripped) are left out: strict providers refuse them.
func (r *run) requestMessages(prompt string) []memory.Message {
	turn := r.t.msgs
	msgs := make([]memory.Message, 0, len(r.prefix)+len(r.past)+len(turn)+len(r.temp)+2)
	msgs = append(msgs, r.prefix...)
	for _, m := range r.past {
		if !emptyReply(m) {
			msgs = append(msgs, m)
		}
	}
	for i, m := range turn {
		switch {
		case i+1 == r.continueAt:
			m.Content = r.stripped
		case m.Role == memory.RoleAssistant:
			m.Content = r.a.cfg.Intents.Strip(m.Content)
		}
		if !emptyReply(m) {
			msgs = append(msgs, m)
		}
		if i+1 == r.continueAt {
			msgs = append(msgs, memory.Message{Role: memory.RoleUser, Content: intent.ContinueMessage})
		}
	}
	msgs = append(msgs, r.temp...)
	if r.a.cfg.RequestShape == ShapeStrict {
		if prompt != "" {
			// The instruction goes with the last user message (msgs holds
			// copies: the turn's record keeps the message as it was).
			if last := &msgs[len(msgs)-1]; last.Role == memory.RoleUser {
				last.Content += "\n\n" + prompt
			} else {
				msgs = append(msgs, memory.Message{Role: memory.RoleUser, Content: prompt})
			}
		}
		return memory.Strict(msgs)
	}
	if prompt != "" {
		msgs = append(msgs, memory.Message{Role: memory.RoleSystem, Content: prompt})
	}
	return msgs
}

// emptyReply reports whether m is an assistant message with neither text
// nor tool calls.
func emptyReply(m memory.Message) bool {
	return m.Role == memory.RoleAssistant && len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) == ""
}

func (r *run) logCall(start time.Time, withTools bool, res roundResult, finish string, err error) {
	outcome := "ok"
	switch {
	case r.ctx.Err() != nil:
		outcome = "interrupted"
	case err != nil:
		outcome = "error"
	case r.stopped:
		outcome = "abandoned"
	}
	attrs := []slog.Attr{
		slog.String("session", r.t.in.SessionID),
		slog.Int("round", r.round),
		slog.String("model", r.a.cfg.Model),
		slog.Bool("tools", withTools),
		slog.Duration("latency", time.Since(start)),
		slog.String("outcome", outcome),
		slog.String("finish_reason", finish),
		slog.Int("tool_calls", r.acc.Len()),
	}
	if res.usage != nil {
		attrs = append(attrs,
			slog.Int64("prompt_tokens", res.usage.PromptTokens),
			slog.Int64("completion_tokens", res.usage.CompletionTokens))
	}
	level := slog.LevelInfo
	if err != nil && outcome == "error" {
		level = slog.LevelError
		attrs = append(attrs, slog.Any("error", err))
	}
	r.obs.logger.LogAttrs(r.ctx, level, "model call", attrs...)
}

func usageOr(u *stream.Usage) stream.Usage {
	if u == nil {
		return stream.Usage{}
	}
	return *u
}
