package stream

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// Call is a tool call assembled from [ToolCallDelta] fragments.
type Call struct {
	// Index is the provider's index of the call, or NoIndex when the
	// provider sent none.
	Index int
	// ID is the call's id: the first non-empty id a fragment carried, or a
	// generated "call_<hex>" id when the first fragment had none.
	ID string
	// Name is the function name; empty when no fragment carried one.
	Name string
	// Arguments is the concatenation of all argument fragments: JSON text
	// when the call is complete, but never validated here.
	Arguments string
}

// Accumulator assembles tool calls from the fragments of a streamed reply.
// Its zero value is ready to use. It is not safe for concurrent use.
//
// Fragments are matched to calls by their index; calls get slots in the
// order their first fragment arrived, whatever the indexes are (an
// Anthropic-compatible endpoint starts at 1). A fragment with an index
// continues the latest call with that index, unless it carries a non-empty
// id that differs from that call's own (not generated) id: servers that
// number every parallel call 0 are told apart by their ids, so the new id
// starts a new call.
//
// A fragment without an index (NoIndex, or any negative index) is matched
// by its id when it has one: it continues the latest call of the reply
// with that id, whichever call came last, so the interleaved fragments of
// parallel calls (A's header, B's header, A's arguments, B's arguments)
// assemble into their own calls. A fragment without an id continues the
// last call. Either way, a fragment that carries a function name starts a
// new call when the call it would continue already has a different name
// (with the same id) or any name (without an id): two whole calls with
// neither index nor id are two calls. A fragment without an index whose id
// no call has, or that arrives before any call, starts a new call.
//
// Within a call the first id and the first non-empty name are kept: a later
// empty id ("" on every continuation, as Qwen sends), repeated id or empty
// name never erases them. A call that starts without an id gets a generated
// one at once, so every tool message can name its call, and so does a call
// whose id an earlier call of the same reply already has (a provider bug that
// would make two tool messages answer one id); fragments are still matched by
// the id the provider sent. Arguments are appended in order, whether they
// arrive in many fragments or whole in one.
type Accumulator struct {
	calls []*callState
	n     int // calls[:n] are in use; the rest are kept for reuse
}

type callState struct {
	index int
	// wire is the id the provider gave the call ("" when its first
	// fragment had none: a later id then neither replaces it nor starts a
	// call); fragments are matched against it.
	wire string
	// id is the call's id for the SDK: wire, or a generated one when wire
	// is empty or taken by an earlier call.
	id   string
	name string
	args strings.Builder
}

// Add adds one fragment. It returns the slot of the call the fragment
// belongs to, and started is true when this fragment made the call's name
// known (the moment to show that the call has begun).
func (a *Accumulator) Add(d ToolCallDelta) (slot int, started bool) {
	slot = a.find(d)
	if slot < 0 {
		slot = a.n
		if a.n == len(a.calls) {
			a.calls = append(a.calls, new(callState))
		}
		a.n++
		c := a.calls[slot]
		c.index = max(d.Index, NoIndex)
		c.wire, c.id = d.ID, d.ID
		if d.ID == "" || a.taken(d.ID, slot) {
			c.id = newCallID()
		}
	}
	c := a.calls[slot]
	if c.name == "" && d.Name != "" {
		c.name = d.Name
		started = true
	}
	c.args.WriteString(d.Arguments)
	return slot, started
}

// find returns the slot d continues, or -1 when d starts a new call.
func (a *Accumulator) find(d ToolCallDelta) int {
	if d.Index >= 0 {
		for i := a.n - 1; i >= 0; i-- {
			if c := a.calls[i]; c.index == d.Index {
				if d.ID != "" && c.wire != "" && d.ID != c.wire {
					return -1 // the index is reused for another call
				}
				return i
			}
		}
		return -1
	}
	if d.ID == "" {
		if a.n == 0 || (d.Name != "" && a.calls[a.n-1].name != "") {
			return -1 // a second whole call without index or id
		}
		return a.n - 1
	}
	for i := a.n - 1; i >= 0; i-- {
		if c := a.calls[i]; c.wire == d.ID {
			if d.Name != "" && c.name != "" && d.Name != c.name {
				return -1 // another call that reuses the id
			}
			return i
		}
	}
	return -1
}

// taken reports whether a call before slot already has id.
func (a *Accumulator) taken(id string, slot int) bool {
	for _, c := range a.calls[:slot] {
		if c.id == id {
			return true
		}
	}
	return false
}

// Len returns the number of calls so far.
func (a *Accumulator) Len() int { return a.n }

// Call returns the state so far of the call in slot. It returns the zero
// Call when slot is out of range.
func (a *Accumulator) Call(slot int) Call {
	if slot < 0 || slot >= a.n {
		return Call{}
	}
	c := a.calls[slot]
	return Call{Index: c.index, ID: c.id, Name: c.name, Arguments: c.args.String()}
}

// Calls returns all calls in slot order (nil when there are none). Calls
// that never got a name are included with an empty Name.
func (a *Accumulator) Calls() []Call {
	if a.n == 0 {
		return nil
	}
	out := make([]Call, a.n)
	for i := range out {
		out[i] = a.Call(i)
	}
	return out
}

// Reset forgets all calls. Strings returned earlier stay valid.
func (a *Accumulator) Reset() {
	for _, c := range a.calls[:a.n] {
		c.index, c.wire, c.id, c.name = 0, "", "", ""
		c.args = strings.Builder{}
	}
	a.n = 0
}

// newCallID returns a fresh tool-call id: "call_" and 24 random hex digits.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "call_" + hex.EncodeToString(b[:])
}
