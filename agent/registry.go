package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planround/planround/memory"
)

// ToolRegistry holds the tools an [Agent] offers the model, by name.
//
// A ToolRegistry is safe for concurrent use, and may be changed while
// agents that use it run. Each run works with the tools as they were when
// it started, for its whole duration: the tools offered to the model in
// every round, the tool a call runs and whether it skips approval all come
// from that one state, so a change never splits a run (a call to a tool
// removed meanwhile still runs; a tool added meanwhile is not offered). The
// next run sees the change.
//
// The host's own choices, [ToolRegistry.SetSkipApproval] and
// [ToolRegistry.Remove], are kept by name and outlive the changes of a
// source of tools ([ToolRegistry.Replace]): a source whose list changes
// cannot give a tool back its SkipApproval, nor bring back a tool the host
// removed.
type ToolRegistry struct {
	mu  sync.Mutex // serialises changes: each one publishes a new set
	set atomic.Pointer[toolSet]

	// The host's overrides by tool name, guarded by mu: the SkipApproval
	// it set, and the names it removed. Add forgets a name's.
	skip    map[string]bool
	removed map[string]bool
}

// toolSet is the registry's state at one moment. It is never changed once
// published: a change publishes a new one.
type toolSet struct {
	byName map[string]*registered
	defs   []ToolDefinition // in registration order
}

type registered struct {
	tool   Tool
	def    ToolDefinition
	schema *jsonschema.Schema // nil when def.Parameters is nil
}

// unknownTool is the registration of no tool: a call's until check finds
// its tool.
var unknownTool registered

// NewToolRegistry returns a registry holding tools; see [ToolRegistry.Add].
func NewToolRegistry(tools ...Tool) (*ToolRegistry, error) {
	r := &ToolRegistry{}
	for _, t := range tools {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers t under its definition's name. It fails for a nil tool, an
// empty or invalid name, a name already registered, and a tool whose
// parameters schema is not a valid JSON schema (or, for a tool made by
// [NewTool], could not be inferred).
func (r *ToolRegistry) Add(t Tool) error {
	reg, err := prepareTool(t)
	if err != nil {
		return err
	}
	def := reg.def
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools()
	if _, dup := old.byName[def.Name]; dup {
		return fmt.Errorf("agent: tool %q registered twice", def.Name)
	}
	set := &toolSet{byName: maps.Clone(old.byName), defs: append(slices.Clip(old.defs), def)}
	if set.byName == nil {
		set.byName = make(map[string]*registered)
	}
	set.byName[def.Name] = reg
	r.set.Store(set)
	// The host registers a tool of its own under the name: what it chose
	// for the name before was for another tool.
	delete(r.skip, def.Name)
	delete(r.removed, def.Name)
	return nil
}

// prepareTool checks t as Add does and compiles its parameters.
func prepareTool(t Tool) (*registered, error) {
	if t == nil {
		return nil, errors.New("agent: nil tool")
	}
	def := t.Definition()
	if err := validToolName(def.Name); err != nil {
		return nil, err
	}
	if tt, ok := t.(typed); ok {
		if err := tt.buildErr(); err != nil {
			return nil, fmt.Errorf("agent: tool %q: %w", def.Name, err)
		}
	}
	reg := &registered{tool: t, def: def}
	if def.Parameters != nil {
		s, err := compileSchema(def.Parameters)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %q: its parameters are not a valid JSON schema: %w", def.Name, err)
		}
		reg.schema = s
	}
	return reg, nil
}

// Replace removes the tools named in remove (names not registered are
// ignored) and registers add, in one change: a run that starts meanwhile
// sees either the tools before or the tools after, never a mix (a source
// of tools whose list changed, such as an MCP client, swaps its tools so).
// It fails, changing nothing, when a tool of add is refused as Add would
// refuse it, or its name is one that stays registered or another of add
// has. Runs already going on keep the tools they started with.
//
// The host's overrides stand, whatever the source's list says: a tool of
// add whose name the host removed ([ToolRegistry.Remove]) is left out, and
// one whose name the host gave a SkipApproval
// ([ToolRegistry.SetSkipApproval]) gets it, also after the tool was gone
// from the source's list for a while.
func (r *ToolRegistry) Replace(remove []string, add ...Tool) error {
	regs := make([]*registered, len(add))
	for i, t := range add {
		reg, err := prepareTool(t)
		if err != nil {
			return err
		}
		regs[i] = reg
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools()
	set := &toolSet{byName: maps.Clone(old.byName)}
	if set.byName == nil {
		set.byName = make(map[string]*registered)
	}
	gone := make(map[string]bool, len(remove))
	for _, name := range remove {
		if _, ok := set.byName[name]; ok {
			delete(set.byName, name)
			gone[name] = true
		}
	}
	set.defs = slices.DeleteFunc(slices.Clone(old.defs), func(d ToolDefinition) bool { return gone[d.Name] })
	added := make(map[string]bool, len(regs))
	for _, reg := range regs {
		name := reg.def.Name
		if _, dup := set.byName[name]; dup || added[name] {
			return fmt.Errorf("agent: tool %q registered twice", name)
		}
		added[name] = true
		if r.removed[name] {
			continue
		}
		if skip, ok := r.skip[name]; ok && skip != reg.def.SkipApproval {
			changed := *reg
			changed.def.SkipApproval = skip
			reg = &changed
		}
		set.byName[name] = reg
		set.defs = append(set.defs, reg.def)
	}
	r.set.Store(set)
	return nil
}

// Remove unregisters the tool with that name and reports whether it was
// there. Runs already going on keep it. The name stays removed for
// [ToolRegistry.Replace] (a source of tools whose list changes does not
// bring it back) until [ToolRegistry.Add] registers a tool under it.
func (r *ToolRegistry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools()
	if _, ok := old.byName[name]; !ok {
		return false
	}
	set := &toolSet{byName: maps.Clone(old.byName)}
	delete(set.byName, name)
	set.defs = slices.DeleteFunc(slices.Clone(old.defs), func(d ToolDefinition) bool { return d.Name == name })
	r.set.Store(set)
	if r.removed == nil {
		r.removed = make(map[string]bool)
	}
	r.removed[name] = true
	delete(r.skip, name)
	return true
}

// SetSkipApproval overrides a registered tool's SkipApproval, from the next
// run on. It fails for an unknown name. The override is kept by name: a
// tool that a source of tools registers under that name again
// ([ToolRegistry.Replace]: an MCP server's list changed) gets it too.
func (r *ToolRegistry) SetSkipApproval(name string, skip bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools()
	reg, ok := old.byName[name]
	if !ok {
		return fmt.Errorf("agent: no tool %q", name)
	}
	changed := *reg
	changed.def.SkipApproval = skip
	set := &toolSet{byName: maps.Clone(old.byName), defs: slices.Clone(old.defs)}
	set.byName[name] = &changed
	for i := range set.defs {
		if set.defs[i].Name == name {
			set.defs[i].SkipApproval = skip
		}
	}
	r.set.Store(set)
	if r.skip == nil {
		r.skip = make(map[string]bool)
	}
	r.skip[name] = skip
	return nil
}

// Subset returns a new registry holding the tools of r with the given
// names, as they are now (with any [ToolRegistry.SetSkipApproval]
// override), in the order r registered them: the tools a sub-agent may use
// of the host's (see [NewSubAgent]). The two registries change apart from
// then on. It fails for a name r does not have.
func (r *ToolRegistry) Subset(names ...string) (*ToolRegistry, error) {
	if r != nil {
		r.mu.Lock() // the set and the overrides of one moment
		defer r.mu.Unlock()
	}
	old := r.tools()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		if _, ok := old.byName[n]; !ok {
			return nil, fmt.Errorf("agent: no tool %q to take into a subset", n)
		}
		want[n] = true
	}
	set := &toolSet{byName: make(map[string]*registered, len(want))}
	for _, d := range old.defs {
		if want[d.Name] {
			set.byName[d.Name] = old.byName[d.Name]
			set.defs = append(set.defs, d)
		}
	}
	sub := &ToolRegistry{}
	sub.set.Store(set)
	for name, skip := range r.overrides() {
		if want[name] {
			if sub.skip == nil {
				sub.skip = make(map[string]bool)
			}
			sub.skip[name] = skip // the host's choice, as the tools are
		}
	}
	return sub, nil
}

// Lookup returns the tool with that name and its definition (with any
// override applied).
func (r *ToolRegistry) Lookup(name string) (Tool, ToolDefinition, bool) {
	reg, ok := r.tools().byName[name]
	if !ok {
		return nil, ToolDefinition{}, false
	}
	return reg.tool, reg.def, true
}

// Definitions returns the definitions of all tools in registration order.
func (r *ToolRegistry) Definitions() []ToolDefinition {
	return slices.Clone(r.tools().defs)
}

// Names returns the registered names, sorted.
func (r *ToolRegistry) Names() []string {
	defs := r.tools().defs
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	sort.Strings(names)
	return names
}

// overrides are the SkipApproval overrides; r.mu is held when r is not
// nil.
func (r *ToolRegistry) overrides() map[string]bool {
	if r == nil {
		return nil
	}
	return r.skip
}

var noTools = &toolSet{}

// tools returns the registry's current set; a nil registry has no tools.
func (r *ToolRegistry) tools() *toolSet {
	if r == nil {
		return noTools
	}
	if s := r.set.Load(); s != nil {
		return s
	}
	return noTools
}

// checkArgs reports why args, a JSON object, cannot be given to the tool:
// they do not match its schema, or (a tool made by NewTool) cannot be
// decoded into its Args.
func (reg *registered) checkArgs(args json.RawMessage) error {
	if reg.schema != nil {
		if err := validateArgs(reg.schema, args); err != nil {
			return err
		}
	}
	if tt, ok := reg.tool.(typed); ok {
		return tt.checkArgs(args)
	}
	return nil
}

// validToolName enforces the function-name rule of the chat-completions API:
// 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'.
func validToolName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("agent: tool name %q must be 1 to 64 characters", name)
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return fmt.Errorf("agent: tool name %q has %q; use letters, digits, '_' and '-'", name, c)
		}
	}
	return nil
}

// truncate returns base with the tools that ask for NoTruncate kept whole.
func (s *toolSet) truncate(base memory.TruncateOptions) memory.TruncateOptions {
	for _, d := range s.defs {
		if d.NoTruncate {
			base.Keep = append(slices.Clip(base.Keep), d.Name)
		}
	}
	return base
}
