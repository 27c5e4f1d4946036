package agent

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ToolRegistry holds the tools an [Agent] offers the model, by name.
//
// A ToolRegistry is safe for concurrent use; an Agent reads it at the start
// of every tool round, so tools added or removed while it runs take effect
// from the next round.
type ToolRegistry struct {
	mu    sync.RWMutex // guards tools and order
	tools map[string]registered
	order []string
}

type registered struct {
	tool Tool
	def  ToolDefinition
}

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
// empty or invalid name, or a name already registered.
func (r *ToolRegistry) Add(t Tool) error {
	if t == nil {
		return errors.New("agent: nil tool")
	}
	def := t.Definition()
	if err := validToolName(def.Name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = make(map[string]registered)
	}
	if _, dup := r.tools[def.Name]; dup {
		return fmt.Errorf("agent: tool %q registered twice", def.Name)
	}
	r.tools[def.Name] = registered{tool: t, def: def}
	r.order = append(r.order, def.Name)
	return nil
}

// Remove unregisters the tool with that name and reports whether it was
// there.
func (r *ToolRegistry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		return false
	}
	delete(r.tools, name)
	for i, n := range r.order {
		if n == name {
			r.order = append(r.order[:i:i], r.order[i+1:]...)
			break
		}
	}
	return true
}

// SetSkipApproval overrides a registered tool's SkipApproval. It fails for
// an unknown name.
func (r *ToolRegistry) SetSkipApproval(name string, skip bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.tools[name]
	if !ok {
		return fmt.Errorf("agent: no tool %q", name)
	}
	reg.def.SkipApproval = skip
	r.tools[name] = reg
	return nil
}

// Lookup returns the tool with that name and its definition (with any
// override applied).
func (r *ToolRegistry) Lookup(name string) (Tool, ToolDefinition, bool) {
	if r == nil {
		return nil, ToolDefinition{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.tools[name]
	return reg.tool, reg.def, ok
}

// Definitions returns the definitions of all tools in registration order.
func (r *ToolRegistry) Definitions() []ToolDefinition {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	defs := make([]ToolDefinition, 0, len(r.order))
	for _, n := range r.order {
		defs = append(defs, r.tools[n].def)
	}
	return defs
}

// Names returns the registered names, sorted.
func (r *ToolRegistry) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := append([]string(nil), r.order...)
	sort.Strings(names)
	return names
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
