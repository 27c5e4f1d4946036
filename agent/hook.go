package agent

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/planround/planround/memory"
)

// Checkpoint is a point of a run where [Hook]s are asked for prompt
// injections. The injections of a checkpoint go into the next model request
// of the run; its value is the name package agent/hooks reads in
// hooks.json.
type Checkpoint string

// The checkpoints of a run, in the order a run meets them. Several
// checkpoints before one request are asked in this order: the one after
// what ended (AfterPlanning or AfterToolResults), then BeforeToolRound,
// then BeforeFinalAnswer.
const (
	// BeforePlanning: before the planning request (round 0), after the
	// user's message. Not asked with Config.DisablePlanning.
	BeforePlanning Checkpoint = "before_planning"
	// AfterPlanning: after the planning round's round_end, when its intent
	// is known ([HookState.Intent]); the injections go into the next
	// request, the continuation (<no_tool>) or the first round of the tool
	// loop. Not asked with Config.DisablePlanning.
	AfterPlanning Checkpoint = "after_planning"
	// BeforeToolRound: before each request of the tool loop (the requests
	// that offer tools), rounds 1 to Config.MaxToolRounds.
	BeforeToolRound Checkpoint = "before_tool_round"
	// AfterToolResults: after a round's tool calls ended and their round_end
	// was yielded, with the calls and their results ([HookState.Calls],
	// [HookState.Results]); the injections go into the next round's
	// request. Not asked after the last round Config.MaxToolRounds allows
	// (no request follows), nor when the round ended the run (an
	// interrupt, a rejection that ends the run).
	AfterToolResults Checkpoint = "after_tool_results"
	// BeforeFinalAnswer: before a request whose reply is expected to be
	// the answer: the continuation request of the <no_tool> path, which is
	// always the last, and, in the tool loop, every request that follows a
	// tool round, whose reply answers with the results unless the model
	// calls tools again (then it is asked again before the next request).
	// The first request of the tool loop does not get it: the model asked
	// for tools and has no results yet.
	BeforeFinalAnswer Checkpoint = "before_final_answer"
)

// WarnHookFailed is the code of the warning chunk of a hook that failed:
// it returned an error, panicked, or returned an injection with a role
// other than system or user. The run goes on without that hook's
// injections at that checkpoint (the valid injections it returned with an
// invalid one are kept); the warning's Text names the hook (its index in
// Config.Hooks) and the checkpoint.
const WarnHookFailed WarningCode = "hook_failed"

// Injection is a piece of prompt a [Hook] adds to the next request.
type Injection struct {
	// Role is memory.RoleSystem (the default when empty) or
	// memory.RoleUser; any other role fails the hook (WarnHookFailed).
	Role memory.Role
	// Content is the text. An injection whose Content is empty or white
	// space adds nothing.
	Content string
	// Persistent keeps the injection in the conversation: it stays in the
	// requests of the rest of the run, and it is one of the turn's
	// messages ([Turn.Messages], the Store) with memory.Message.Hook set,
	// so that later turns send it too while a host does not show it. A
	// hook that returns it at every round adds it every round. An
	// injection that is not persistent goes into the next request only.
	Persistent bool
}

// HookState is what a [Hook] knows of the run at a checkpoint. Its slices
// are the run's own: a hook reads them and must not change them.
type HookState struct {
	// SessionID is the run's Input.SessionID.
	SessionID string
	// Message is the user's message of the turn (Input.Message).
	Message string
	// Round is the round of the request the injections go into: 0 at
	// BeforePlanning, 1 at AfterPlanning, and at AfterToolResults the round
	// after the one whose results Calls and Results hold.
	Round int
	// Intent is the planning round's intent, from AfterPlanning on; empty
	// before it and with Config.DisablePlanning.
	Intent Intent
	// Calls are the tool calls of the round that just ended, in call order
	// (with the arguments that ran when an Approver edited them), at
	// AfterToolResults; nil at the other checkpoints.
	Calls []memory.ToolCall
	// Results are the tool messages that answer Calls, one per call in the
	// same order, at AfterToolResults: Content is the tool's result, or
	// why the call did not run (a rejection, an error for the model).
	Results []memory.Message
}

// Hook injects prompts into a run's requests at its checkpoints (see
// [Checkpoint]). Config.Hooks are asked in order at every checkpoint of
// every run; a hook returns nothing at the checkpoints it does not care
// about.
//
// Inject is called in the goroutine that ranges over the run, one call at
// a time, with the run's context; the runs of an Agent may call it
// concurrently. The run waits for it: a hook that waits should return when
// ctx ends (the run is then interrupted). An error, or a panic, is a
// warning chunk with code [WarnHookFailed]; the run goes on without that
// hook's injections at that checkpoint.
//
// The injections of one checkpoint are grouped by role and persistence:
// the contents of each group, in hook order, are joined by a blank line
// into one message (so at most four messages per checkpoint). The
// persistent groups (system, then user) are appended to the conversation
// of the run at once, after its last message; the temporary groups
// (system, then user) are sent after the whole conversation, before the
// round's temporary prompt (planning or continuation), in that one request
// only. They never come between an assistant message with tool calls and
// the tool messages that answer it, and Config.RequestShape lays them out
// like any message (with ShapeStrict, system content joins the leading
// system message and user content the last user message).
//
// [History] rebuilds a turn from its chunks, which do not carry
// injections: it leaves the persistent injections out.
type Hook interface {
	Inject(ctx context.Context, at Checkpoint, state HookState) ([]Injection, error)
}

// HookFunc is a [Hook] made of a function.
type HookFunc func(ctx context.Context, at Checkpoint, state HookState) ([]Injection, error)

// Inject calls f.
func (f HookFunc) Inject(ctx context.Context, at Checkpoint, state HookState) ([]Injection, error) {
	return f(ctx, at, state)
}

// hookGroup indexes the four groups of a checkpoint's injections: the
// persistent ones first, system before user.
func hookGroup(role memory.Role, persistent bool) int {
	g := 0
	if role == memory.RoleUser {
		g = 1
	}
	if !persistent {
		g += 2
	}
	return g
}

// hookGroupRoles are the roles of the groups hookGroup indexes.
var hookGroupRoles = [4]memory.Role{memory.RoleSystem, memory.RoleUser, memory.RoleSystem, memory.RoleUser}

// hooksBefore asks the hooks at the checkpoints that come before the
// request of the current round (withTools: a request of the tool loop), in
// their order. It reports false when the consumer left while a warning was
// yielded.
func (r *run) hooksBefore(withTools bool) bool {
	if len(r.a.hooks) == 0 {
		return true
	}
	switch {
	case r.round == 0:
		return r.inject(BeforePlanning, HookState{})
	case !withTools: // the continuation of <no_tool>
		return r.inject(AfterPlanning, HookState{}) && r.inject(BeforeFinalAnswer, HookState{})
	case r.round == 1:
		return (r.a.cfg.DisablePlanning || r.inject(AfterPlanning, HookState{})) && r.inject(BeforeToolRound, HookState{})
	}
	return r.inject(AfterToolResults, r.toolResults()) && r.inject(BeforeToolRound, HookState{}) && r.inject(BeforeFinalAnswer, HookState{})
}

// inject asks Config.Hooks at checkpoint at, in order, and adds their
// injections for the next request: the persistent ones to the working list
// and the turn's messages, the temporary ones to r.temp, which the next
// request sends and then forgets. It reports false when the consumer left
// while a warning was yielded.
func (r *run) inject(at Checkpoint, st HookState) bool {
	st.SessionID, st.Message, st.Round, st.Intent = r.t.in.SessionID, r.t.in.Message, r.round, r.intent
	var groups [4][]string
	for i, h := range r.a.hooks {
		injs, err := r.askHook(h, at, st)
		if err != nil && r.ctx.Err() != nil {
			// Interrupted: the next request ends the run, with no warning
			// about a hook that stopped because of it.
			return true
		}
		if err == nil {
			for k, in := range injs {
				role := in.Role
				if role == "" {
					role = memory.RoleSystem
				}
				if role != memory.RoleSystem && role != memory.RoleUser {
					err = fmt.Errorf("injection %d has role %q, want %q or %q", k, in.Role, memory.RoleSystem, memory.RoleUser)
					continue
				}
				if strings.TrimSpace(in.Content) != "" {
					g := hookGroup(role, in.Persistent)
					groups[g] = append(groups[g], in.Content)
				}
			}
		}
		if err != nil {
			r.obs.logger.LogAttrs(r.ctx, slog.LevelWarn, "hook failed", slog.String("session", r.t.in.SessionID),
				slog.Int("hook", i), slog.String("checkpoint", string(at)), slog.Any("error", err))
			if !r.emit(Chunk{Kind: KindWarning, Round: r.round, Code: WarnHookFailed,
				Text: fmt.Sprintf("hook %d failed at %s: %v", i, at, err)}) {
				return false
			}
		}
	}
	now := time.Now()
	for g, parts := range groups {
		if len(parts) == 0 {
			continue
		}
		m := memory.Message{Role: hookGroupRoles[g], Content: strings.Join(parts, "\n\n"), Hook: true, CreatedAt: now}
		if g < 2 {
			r.record(m)
		} else {
			r.temp = append(r.temp, m)
		}
	}
	return true
}

// askHook asks one hook, with a panic returned as an error so that it
// never unwinds into the host's range loop.
func (r *run) askHook(h Hook, at Checkpoint, st HookState) (injs []Injection, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("hook panicked: %v", p)
			r.obs.logger.LogAttrs(context.WithoutCancel(r.ctx), slog.LevelError, "hook panicked",
				slog.String("checkpoint", string(at)), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	return h.Inject(r.ctx, at, st)
}

// toolResults is the HookState of AfterToolResults: the calls of the tool
// round just recorded, the last assistant message with calls of what the
// model sees, and the tool messages after it.
func (r *run) toolResults() HookState {
	turn := r.t.msgs
	for i := len(turn) - 1; i >= 0; i-- {
		if m := turn[i]; m.Role == memory.RoleAssistant && len(m.ToolCalls) > 0 {
			res := turn[i+1:]
			return HookState{Calls: m.ToolCalls, Results: res[:len(res):len(res)]}
		}
	}
	// A resumed turn whose calls were stored before it resumed: their
	// tool messages are the run's own.
	for i := len(r.past) - 1; i >= 0; i-- {
		if m := r.past[i]; m.Role == memory.RoleAssistant && len(m.ToolCalls) > 0 {
			return HookState{Calls: m.ToolCalls, Results: slices.Concat(r.past[i+1:], turn)}
		}
	}
	return HookState{}
}

// checkHooks reports whether hooks can be Config.Hooks.
func checkHooks(hooks []Hook) error {
	if i := slices.Index(hooks, nil); i >= 0 {
		return fmt.Errorf("agent: Config.Hooks[%d] is nil", i)
	}
	return nil
}
