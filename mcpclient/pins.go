package mcpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// Pinning: the first tool list the client reads of a server is kept (pinned)
// in Options.KV; each user then runs the definitions pinned for them. A call
// of a tool whose definition differs from the user's pin (or that the pin
// does not have) must be approved by a person, who sees what changed, and
// running it pins the definition the person saw (NoteApproval notes it, the
// call's Execute pins it) for that user; a call whose tool changed again
// while it waited does not run. The model is offered the definitions the
// pin of everybody (user "") has, never one nobody approved (see resolve).

// pinNamespace is the KV namespace of the pins.
const pinNamespace = "mcpclient.pins"

// maxPinRetries bounds the attempts to update a pin that other processes
// update at the same time.
const maxPinRetries = 8

// pinnedTool is a tool's definition as pinned: what the model reads of it
// (its description and input schema, with the secrets of the server's
// configuration redacted) and what it says of itself (its annotations).
type pinnedTool struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"input_schema"`
	Hints       agent.ToolHints `json:"annotations"` // Trusted is the host's word, never pinned
}

// pinRecord is the value of a pin: the definitions of a server's tools by
// their MCP names (redacted).
type pinRecord struct {
	Tools map[string]pinnedTool `json:"tools"`
}

// pins keeps the pinned definitions of a client's servers. A server entry
// without one (as some tests make) pins nothing.
type pins struct {
	kv     memory.KV
	userOf func(ctx context.Context) string

	// pinned remembers which current definitions are known to be pinned
	// for which users, so that a call that runs costs no read of the KV
	// when its definition was pinned before. Bounded by maxPinnedCache.
	mu     sync.Mutex
	pinned map[pinnedKey]struct{} // guarded by mu
	// parsed keeps the last record read of each key with its bytes, so
	// that a read that finds the same bytes decodes nothing: records are
	// shared, never changed. Guarded by mu, bounded by maxPinnedCache.
	parsed map[string]parsedPin
	// shown holds, for each call whose approval was asked about and that
	// has not run yet, the definition it was asked about (see
	// NoteApproval), which is the one its Execute may run and pin.
	// Guarded by mu; shownOrder lists its notes, oldest first (with some
	// taken since), so that the oldest go when it holds maxShown.
	shown      map[shownKey]*shownDef
	shownOrder []shownAt
	shownSeq   uint64 // the last note's number
}

// shownAt is a note in the order they were made: its key and number.
type shownAt struct {
	key shownKey
	seq uint64
}

// shownKey names a call whose approval was asked about: the tool, the user
// and the call, as the agent names it ([agent.CallFromContext]).
type shownKey struct {
	e       *serverEntry
	mcpName string
	user    string
	conv    string // the call's conversation
	call    string // its durable key, else its id
	round   int
}

// shownDef is the definition the approval of a call was asked about.
type shownDef struct {
	spec *toolSpec // the tool as listed then
	// calls counts the calls noted under the key and not yet run: two
	// runs without a session may have calls of the same id.
	calls int
	// mixed says they were asked about different definitions: none of
	// them is known to be the one a person saw.
	mixed bool
	seq   uint64 // its number in pins.shownOrder
}

// maxShown bounds pins.shown: calls that never run (rejected) leave their
// note behind until it is the oldest.
const maxShown = 4096

// parsedPin is a pin's value and its decoding.
type parsedPin struct {
	raw []byte
	rec *pinRecord
}

// pinnedKey is a definition, as listed (the spec, replaced by every new
// list), pinned for a user.
type pinnedKey struct {
	spec *toolSpec
	user string
}

// maxPinnedCache bounds pins.pinned; it is emptied when full.
const maxPinnedCache = 4096

func (p *pins) known(spec *toolSpec, user string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.pinned[pinnedKey{spec, user}]
	return ok
}

func (p *pins) forget(spec *toolSpec, user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pinned, pinnedKey{spec, user})
}

func (p *pins) remember(spec *toolSpec, user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinned == nil || len(p.pinned) >= maxPinnedCache {
		p.pinned = make(map[pinnedKey]struct{})
	}
	p.pinned[pinnedKey{spec, user}] = struct{}{}
}

// user is the person ctx's call is made for; "" for everybody.
func (p *pins) user(ctx context.Context) string {
	if p.userOf == nil {
		return ""
	}
	return p.userOf(ctx)
}

// pinKey is the key of the pin of server for user; user "" names the
// server's first list, which is also the pin of every user without one of
// their own. A key too long for a KV is hashed.
func pinKey(server, user string) string {
	k := strconv.Itoa(len(server)) + ":" + server
	if user != "" {
		k += ":" + user
	}
	if len(k) > memory.MaxKVKey {
		sum := sha256.Sum256([]byte(k))
		k = "sha256:" + hex.EncodeToString(sum[:])
	}
	return k
}

// pinOf is spec's definition as pinned.
func pinOf(spec *toolSpec) pinnedTool {
	schema, err := json.Marshal(spec.params) // map keys sorted: canonical
	if err != nil {
		schema = nil
	}
	h := spec.hints
	h.Trusted = false
	return pinnedTool{Description: spec.desc, Schema: schema, Hints: h}
}

// pinnedOf is spec's definition as pinned: made when the list was read.
func pinnedOf(spec *toolSpec) pinnedTool {
	if spec.pinned != nil {
		return *spec.pinned
	}
	return pinOf(spec)
}

func (a pinnedTool) equal(b pinnedTool) bool {
	return a.Description == b.Description && a.Hints == b.Hints && string(a.Schema) == string(b.Schema)
}

// pinName is the name a tool is pinned under: its MCP name, redacted.
func (e *serverEntry) pinName(spec *toolSpec) string { return e.red.String(spec.mcpName) }

// record returns the list specs as a pin.
func (e *serverEntry) record(specs []*toolSpec) pinRecord {
	r := pinRecord{Tools: make(map[string]pinnedTool, len(specs))}
	for _, s := range specs {
		if s.mcpName == "" {
			continue // the stand-in of an OAuth server's tools: ours, not the server's
		}
		r.Tools[e.pinName(s)] = pinnedOf(s)
	}
	return r
}

// load reads the pin of key: nil, nil when there is none.
func (p *pins) load(ctx context.Context, key string) (raw []byte, rec *pinRecord, err error) {
	raw, err = p.kv.GetValue(ctx, pinNamespace, key)
	if errors.Is(err, memory.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	c, ok := p.parsed[key]
	p.mu.Unlock()
	if ok && bytes.Equal(c.raw, raw) {
		return raw, c.rec, nil
	}
	rec = new(pinRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, nil, fmt.Errorf("the pinned tool definitions are not readable: %w", err)
	}
	p.keep(key, raw, rec)
	return raw, rec, nil
}

// keep remembers rec as the decoding of raw, the value of key.
func (p *pins) keep(key string, raw []byte, rec *pinRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parsed == nil || len(p.parsed) >= maxPinnedCache {
		p.parsed = make(map[string]parsedPin)
	}
	p.parsed[key] = parsedPin{raw, rec}
}

// pinFirst pins the server's current list as its first list, unless it has
// one: the first writer wins across the processes that share the KV. The
// pin it returns is the one the model is offered (see setPinned).
func (p *pins) pinFirst(ctx context.Context, e *serverEntry) (*pinRecord, error) {
	key := pinKey(e.cfg.Name, "")
	for range maxPinRetries {
		_, rec, err := p.load(ctx, key)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			e.setPinned(rec)
			return rec, nil
		}
		rec = ptr(e.record(e.specs()))
		if len(rec.Tools) == 0 {
			// No list yet (a server that lists its tools to its users
			// only): the first list a user's connection reads is pinned.
			return rec, nil
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		ok, err := p.kv.SwapValue(ctx, pinNamespace, key, nil, b)
		if err != nil {
			return nil, err
		}
		if ok {
			p.keep(key, b, rec)
			e.setPinned(rec)
			return rec, nil
		}
	}
	return nil, errors.New("the pinned tool definitions keep changing")
}

// setPinned keeps rec, read or written, as the pin of everybody (user ""):
// the definitions the model is offered. When it is not the one kept
// before, the registries Register filled are updated.
func (e *serverEntry) setPinned(rec *pinRecord) {
	e.mu.Lock()
	changed := e.pinned != rec
	e.pinned = rec
	e.mu.Unlock()
	if changed && e.changed != nil {
		e.changed()
	}
}

// offeredPin returns the pin of everybody as last read, nil when it was
// never read.
func (e *serverEntry) offeredPin() *pinRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pinned
}

func ptr[T any](v T) *T { return &v }

// pinFor returns the pin of user: their own, else the server's first list
// (pinned now when it is not yet).
func (p *pins) pinFor(ctx context.Context, e *serverEntry, user string) (*pinRecord, error) {
	if user != "" {
		_, rec, err := p.load(ctx, pinKey(e.cfg.Name, user))
		if err != nil || rec != nil {
			return rec, err
		}
	}
	return p.pinFirst(ctx, e)
}

// note says what a call of spec for user must show: nothing when the
// user's pin has the tool as it is now, else the differences, and that a
// person must decide. A pin that cannot be read asks as well.
func (p *pins) note(ctx context.Context, e *serverEntry, spec *toolSpec, user string) (mustAsk bool, details []string) {
	rec, err := p.pinFor(ctx, e, user)
	if err != nil {
		e.log.Warn("the approved tool definitions cannot be read: the call is asked about", "tool", spec.mcpName, "err", err)
		return true, []string{fmt.Sprintf("The approved definitions of server %q's tools could not be read (%v): approve only if you trust this tool as it is.", e.cfg.Name, err)}
	}
	name := e.pinName(spec)
	old, ok := rec.Tools[name]
	cur := pinnedOf(spec)
	if !ok {
		details = []string{fmt.Sprintf("Server %q offers the tool %q, which was not in its list when it was approved. Approving the call approves the tool.", e.cfg.Name, name)}
		return true, append(details, describePin(cur)...)
	}
	if old.equal(cur) {
		return false, nil
	}
	details = []string{fmt.Sprintf("Server %q changed the definition of the tool %q since it was approved. Approving the call approves the new definition.", e.cfg.Name, name)}
	return true, append(details, diffPins(old, cur)...)
}

// repin pins spec's current definition for user, unless their pin has it
// already. A user without a pin of their own gets one: the server's first
// list with this tool as it is now.
func (p *pins) repin(ctx context.Context, e *serverEntry, spec *toolSpec, user string) error {
	if p.known(spec, user) {
		return nil
	}
	if err := p.write(ctx, e, spec, user); err != nil {
		return err
	}
	p.remember(spec, user)
	return nil
}

// write is repin without the cache.
func (p *pins) write(ctx context.Context, e *serverEntry, spec *toolSpec, user string) error {
	key := pinKey(e.cfg.Name, user)
	name, cur := e.pinName(spec), pinnedOf(spec)
	for range maxPinRetries {
		raw, rec, err := p.load(ctx, key)
		if err != nil {
			return err
		}
		if rec == nil {
			// No pin of the user's own (or no first list): start from
			// the first list.
			if rec, err = p.pinFor(ctx, e, ""); err != nil {
				return err
			}
			if user == "" {
				// pinFor just pinned it, or another process did: read
				// it again to swap against what is stored.
				continue
			}
		}
		if old, ok := rec.Tools[name]; ok && old.equal(cur) {
			return nil
		}
		rec = &pinRecord{Tools: maps.Clone(rec.Tools)} // records read are shared: change a copy
		if rec.Tools == nil {
			rec.Tools = make(map[string]pinnedTool)
		}
		rec.Tools[name] = cur
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		ok, err := p.kv.SwapValue(ctx, pinNamespace, key, raw, b)
		if err != nil {
			return err
		}
		if ok {
			p.keep(key, b, rec)
			if user == "" {
				e.setPinned(rec)
			}
			return nil
		}
	}
	return errors.New("the pinned tool definitions keep changing")
}

// describePin lists a definition for a person to read: that of a tool
// they have not approved before.
func describePin(cur pinnedTool) []string {
	out := []string{fmt.Sprintf("Description: %q", clip(cur.Description))}
	var schema map[string]any
	if json.Unmarshal(cur.Schema, &schema) == nil {
		props, _ := schema["properties"].(map[string]any)
		parts := []string{"properties: none"}
		if len(props) > 0 {
			parts[0] = "properties: " + strings.Join(quoteAll(slices.Sorted(maps.Keys(props))), ", ")
		}
		if schema["required"] != nil {
			parts = append(parts, "required: "+compact(schema["required"]))
		}
		var other []string
		for _, k := range slices.Sorted(maps.Keys(schema)) {
			if k != "type" && k != "properties" && k != "required" {
				other = append(other, k)
			}
		}
		if len(other) > 0 {
			parts = append(parts, "other keywords: "+strings.Join(quoteAll(other), ", "))
		}
		out = append(out, "Input schema: "+strings.Join(parts, "; "))
	}
	return append(out, "Annotations: "+strings.Join(cur.Hints.Labels(), ", "))
}

// maxDiffText bounds a description shown in a difference.
const maxDiffText = 300

// diffPins lists the differences between two definitions of a tool, for a
// person to read.
func diffPins(old, cur pinnedTool) []string {
	var out []string
	if old.Description != cur.Description {
		out = append(out, fmt.Sprintf("Description: %q → %q", clip(old.Description), clip(cur.Description)))
	}
	if string(old.Schema) != string(cur.Schema) {
		out = append(out, "Input schema: "+diffSchemas(old.Schema, cur.Schema))
	}
	if old.Hints != cur.Hints {
		out = append(out, fmt.Sprintf("Annotations: %s → %s", strings.Join(old.Hints.Labels(), ", "), strings.Join(cur.Hints.Labels(), ", ")))
	}
	return out
}

func clip(s string) string {
	if len(s) <= maxDiffText {
		return s
	}
	cut := maxDiffText
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// diffSchemas summarizes how an input schema changed: the properties added,
// removed and changed, the required ones, and other keywords.
func diffSchemas(oldRaw, curRaw json.RawMessage) string {
	var old, cur map[string]any
	if json.Unmarshal(oldRaw, &old) != nil || json.Unmarshal(curRaw, &cur) != nil {
		return "changed"
	}
	var parts []string
	op, _ := old["properties"].(map[string]any)
	cp, _ := cur["properties"].(map[string]any)
	var added, removed, changed []string
	for _, k := range slices.Sorted(maps.Keys(cp)) {
		ov, ok := op[k]
		switch {
		case !ok:
			added = append(added, k)
		case !sameJSON(ov, cp[k]):
			changed = append(changed, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(op)) {
		if _, ok := cp[k]; !ok {
			removed = append(removed, k)
		}
	}
	list := func(what string, names []string) {
		if len(names) > 0 {
			parts = append(parts, what+" "+strings.Join(quoteAll(names), ", "))
		}
	}
	list("properties added:", added)
	list("properties removed:", removed)
	list("properties changed:", changed)
	if !sameJSON(old["required"], cur["required"]) {
		parts = append(parts, fmt.Sprintf("required: %s → %s", compact(old["required"]), compact(cur["required"])))
	}
	var other []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(old, cur))) {
		if k != "properties" && k != "required" && !sameJSON(old[k], cur[k]) {
			other = append(other, k)
		}
	}
	list("other keywords changed:", other)
	if len(parts) == 0 {
		return "changed"
	}
	return strings.Join(parts, "; ")
}

func mergeKeys(a, b map[string]any) map[string]any {
	m := maps.Clone(a)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, b)
	return m
}

func sameJSON(a, b any) bool { return compact(a) == compact(b) }

func compact(v any) string {
	if v == nil {
		return "none"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return clip(string(b))
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(clip(n))
	}
	return out
}

// hintsOf reads a tool's annotations as hints. A tool is read-only,
// idempotent or open-world only when it says so; one that does not say it
// is read-only is destructive unless it says it is not (MCP's default).
// So a trusted tool that says readOnlyHint true, without openWorldHint
// true, may run without asking under approval.ReadOnlyHints. (mcp-go's
// NewTool sets openWorldHint true unless told otherwise.) The hints are
// trusted when the server's configuration says so.
func hintsOf(a mcp.ToolAnnotation, trusted bool) agent.ToolHints {
	h := agent.ToolHints{
		ReadOnly:   a.ReadOnlyHint != nil && *a.ReadOnlyHint,
		Idempotent: a.IdempotentHint != nil && *a.IdempotentHint,
		OpenWorld:  a.OpenWorldHint != nil && *a.OpenWorldHint,
		Trusted:    trusted,
	}
	h.Destructive = !h.ReadOnly && (a.DestructiveHint == nil || *a.DestructiveHint)
	return h
}

// NoteApproval implements [agent.ApprovalNoter]: a call carries the tool's
// hints as the server lists it now, and must be approved by a person, with
// the differences on the card, when the tool's definition is not the one
// pinned for the call's user (see the package documentation).
func (t *mcpTool) NoteApproval(ctx context.Context, _ agent.ToolCall) agent.ApprovalNote {
	if t.mcpName == "" {
		return agent.ApprovalNote{} // the stand-in that connects an OAuth server
	}
	spec := t.e.spec(t.mcpName)
	if spec == nil {
		// The server no longer lists the tool: the call fails there.
		return agent.ApprovalNote{}
	}
	note := agent.ApprovalNote{Hints: ptr(spec.hints)}
	if t.e.pins == nil {
		return note
	}
	user := t.e.pins.user(ctx)
	note.MustAsk, note.Details = t.e.pins.note(ctx, t.e, spec, user)
	if note.MustAsk {
		// Not pinned (any more, should another process have pinned
		// another definition): running the call must write the pin.
		t.e.pins.forget(spec, user)
	}
	// The definition the call is decided on, as the card shows it: the
	// one its Execute may run and pin.
	if k, ok := t.e.pins.shownKey(ctx, t.e, spec.mcpName, user); ok {
		t.e.pins.noteShown(k, spec)
	}
	return note
}

// shownKey is the key of the call ctx carries, of the tool mcpName, for
// user; false outside an agent's call.
func (p *pins) shownKey(ctx context.Context, e *serverEntry, mcpName, user string) (shownKey, bool) {
	ci, ok := agent.CallFromContext(ctx)
	if !ok {
		return shownKey{}, false
	}
	return shownKey{e: e, mcpName: mcpName, user: user, conv: ci.Conversation(), call: cmp(ci.Key, ci.CallID), round: ci.Round}, true
}

// noteShown keeps spec as the definition the call k is decided on.
func (p *pins) noteShown(k shownKey, spec *toolSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.shown[k]; ok {
		d.calls++
		d.mixed = d.mixed || !pinnedOf(d.spec).equal(pinnedOf(spec))
		return
	}
	if p.shown == nil {
		p.shown = make(map[shownKey]*shownDef)
	}
	live := func(at shownAt) bool {
		d, ok := p.shown[at.key]
		return ok && d.seq == at.seq
	}
	for len(p.shown) >= maxShown && len(p.shownOrder) > 0 {
		if at := p.shownOrder[0]; live(at) {
			delete(p.shown, at.key)
		}
		p.shownOrder = p.shownOrder[1:]
	}
	if len(p.shownOrder) >= 2*maxShown {
		// Mostly notes taken since: keep the others.
		p.shownOrder = slices.DeleteFunc(p.shownOrder, func(at shownAt) bool { return !live(at) })
	}
	p.shownSeq++
	p.shown[k] = &shownDef{spec: spec, calls: 1, seq: p.shownSeq}
	p.shownOrder = append(p.shownOrder, shownAt{k, p.shownSeq})
}

// takeShown returns the definition the call k was decided on and forgets
// it: nil when it was not noted (or forgotten, as the oldest of too many),
// or its calls were decided on different definitions.
func (p *pins) takeShown(k shownKey) *toolSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.shown[k]
	if !ok {
		return nil
	}
	if d.calls--; d.calls <= 0 {
		delete(p.shown, k)
	}
	if d.mixed {
		return nil
	}
	return d.spec
}

// approve decides whether the call ctx carries may run spec, the tool as
// listed now, and pins for the call's user the definition it was decided
// on: it may when that definition is spec's, the one the person (or the
// policy that let it run) decided on; when the server changed the tool
// since, the call does not run, and a new call asks about the change. A
// call noted by no NoteApproval of this process (one forgotten as the
// oldest of too many) may run only what its user's pin has; a call the
// agent runs again to take it up where it stopped (its CallInfo.State) was
// decided on before and runs, pinning nothing; a call outside an agent's
// run (a host's own) runs.
func (p *pins) approve(ctx context.Context, e *serverEntry, spec *toolSpec) error {
	user := p.user(ctx)
	k, ok := p.shownKey(ctx, e, spec.mcpName, user)
	if !ok {
		return nil
	}
	if ci, _ := agent.CallFromContext(ctx); ci.State != "" {
		p.takeShown(k)
		return nil
	}
	cur := pinnedOf(spec)
	if shown := p.takeShown(k); shown != nil {
		if !pinnedOf(shown).equal(cur) {
			return fmt.Errorf("the server changed the tool %q after this call was asked about: the call did not run, since nobody approved its new definition; call the tool again to have the change approved", e.pinName(spec))
		}
		if err := p.repin(ctx, e, spec, user); err != nil {
			e.log.Warn("the approved tool definition could not be pinned", "tool", spec.mcpName, "err", err)
		}
		return nil
	}
	if p.known(spec, user) {
		return nil
	}
	rec, err := p.pinFor(ctx, e, user)
	if err != nil {
		return fmt.Errorf("the approved definitions of its tools could not be read (%v): the call did not run", err)
	}
	if old, ok := rec.Tools[e.pinName(spec)]; !ok || !old.equal(cur) {
		return fmt.Errorf("the server changed the tool %q, and this call was not asked about with its new definition: the call did not run; call the tool again to have the change approved", e.pinName(spec))
	}
	p.remember(spec, user)
	return nil
}

// spec returns the server's current tool mcpName, or nil.
func (e *serverEntry) spec(mcpName string) *toolSpec {
	for _, s := range e.specs() {
		if s.mcpName == mcpName {
			return s
		}
	}
	return nil
}
