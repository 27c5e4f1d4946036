package agent

import (
	"context"
	"log/slog"
)

// ToolHints are what a tool says about its own behaviour, for the people and
// policies that decide on its calls: MCP's tool annotations, or a host's
// own word for its Go tools ([WithHints]). They are hints, not guarantees:
// a policy may act on them only when they come from someone the host trusts
// (Trusted), and the approval card shows them either way.
//
// A hint a tool leaves unsaid is the cautious one, as MCP's defaults have
// it: not read-only, destructive, not idempotent, open world. A read-only
// tool is never destructive (MCP gives destructiveHint meaning only for a
// tool that is not read-only).
type ToolHints struct {
	// ReadOnly says the tool does not change its environment.
	ReadOnly bool `json:"read_only,omitempty"`
	// Destructive says the tool may delete or overwrite (only for a tool
	// that is not read-only).
	Destructive bool `json:"destructive,omitempty"`
	// Idempotent says a second call with the same arguments has no
	// further effect.
	Idempotent bool `json:"idempotent,omitempty"`
	// OpenWorld says the tool reaches beyond a closed set of things (the
	// web, other people's systems), as a web search does and a lookup in
	// a local database does not.
	OpenWorld bool `json:"open_world,omitempty"`
	// Trusted says the hints come from a source the host trusts: its own
	// Go code, or an MCP server whose configuration says it is trusted.
	// Untrusted hints are shown, but no policy of package approval
	// decides on them.
	Trusted bool `json:"trusted,omitempty"`
}

// SafeToRun reports whether the hints, trusted, say the tool only reads,
// in a closed world, and destroys nothing: the calls that
// approval.ReadOnlyHints lets run without asking.
func (h *ToolHints) SafeToRun() bool {
	return h != nil && h.Trusted && h.ReadOnly && !h.OpenWorld && !h.Destructive
}

// Labels names the hints in words for a person: "read-only",
// "destructive", "idempotent", and "open world" or "closed world" (whether
// they are trusted is not among them).
func (h ToolHints) Labels() []string {
	var out []string
	if h.ReadOnly {
		out = append(out, "read-only")
	}
	if h.Destructive {
		out = append(out, "destructive")
	}
	if h.Idempotent {
		out = append(out, "idempotent")
	}
	if h.OpenWorld {
		return append(out, "open world")
	}
	return append(out, "closed world")
}

// WithHints sets [ToolDefinition.Hints] of a tool made by [NewTool]: what
// the host says about the tool's behaviour. The host wrote the tool, so
// its hints are marked trusted.
func WithHints(h ToolHints) ToolOption {
	h.Trusted = true
	if h.ReadOnly {
		h.Destructive = false
	}
	return func(d *ToolDefinition) { d.Hints = &h }
}

// ApprovalNote is what a tool adds to the approval of one of its calls
// (see [ApprovalNoter]).
type ApprovalNote struct {
	// MustAsk says that a person must decide on the call: no policy may
	// approve it at once, and it is asked about even when the tool skips
	// approval (ToolDefinition.SkipApproval). An MCP tool whose
	// definition changed since the user approved it says so.
	MustAsk bool
	// Details are lines for the person who decides, shown on the approval
	// card (what changed in the tool's definition, say).
	Details []string
	// Hints, when not nil, replace the definition's hints for this call:
	// the tool knows better now (an MCP server listed the tool again).
	Hints *ToolHints
}

// ApprovalNoter is an optional interface for a [Tool] that has something to
// say about a call before the agent decides whether to ask the [Approver]:
// the agent calls NoteApproval for every call of the tool that is checked
// and not yet approved (not for a resumable call a resumed turn runs
// again), before SkipApproval is looked at, and puts the note on the call
// ([ToolCall.MustAsk], [ToolCall.Details], [ToolCall.Hints]) that the
// Approver gets and the approval_required chunk shows. ctx is the run's,
// carrying the call ([CallFromContext], without an ApprovalID yet; ShowSide
// does nothing with it).
//
// A panic in NoteApproval is logged, and the call must then be asked
// about, as with MustAsk.
type ApprovalNoter interface {
	NoteApproval(ctx context.Context, call ToolCall) ApprovalNote
}

// noteApproval puts what the tool says about the approval of cs on its
// chunk, and reports whether a person must be asked.
func (r *run) noteApproval(cs *callState) (mustAsk bool) {
	if cs.reg.def.Hints != nil {
		cs.chunk.Hints = cs.reg.def.Hints
	}
	n, ok := cs.reg.tool.(ApprovalNoter)
	if !ok {
		return false
	}
	note := func() (note ApprovalNote) {
		defer func() {
			if p := recover(); p != nil {
				r.obs.logger.LogAttrs(r.ctx, slog.LevelError, "tool's NoteApproval panicked: the call must be asked about", toolAttr(cs), slog.Any("panic", p))
				note = ApprovalNote{MustAsk: true, Details: []string{"the tool could not say what it is about to run"}}
			}
		}()
		ctx := withCall(r.ctx, CallInfo{SessionID: r.t.in.SessionID, CallID: cs.call.ID, Tool: cs.call.Name, Round: r.round, Key: cs.key()}, nil, nil, r.obs)
		return n.NoteApproval(ctx, cs.chunk)
	}()
	if note.Hints != nil {
		cs.chunk.Hints = note.Hints
	}
	cs.chunk.MustAsk = note.MustAsk
	cs.chunk.Details = note.Details
	return note.MustAsk
}
