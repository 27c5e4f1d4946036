package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planround/planround/agent"
)

// toolSpec is a server's tool converted for the agent, before its name
// is settled against the other servers' tools.
type toolSpec struct {
	mcpName string
	base    string // mcpName made a valid function name, secrets redacted
	desc    string
	params  map[string]any
	keys    map[string]string // the schema's keys that held secrets: redacted → as written
	skip    bool
	output  *jsonschema.Schema // the compiled output schema; nil without one
	task    bool               // the server may run its calls as tasks (execution.taskSupport)
	hints   agent.ToolHints    // from the tool's annotations
	pinned  *pinnedTool        // the definition as pinned (pinOf), made once per list; nil until then
}

// mcpTool is an MCP server's tool as an agent tool.
type mcpTool struct {
	e       *serverEntry
	mcpName string
	base    string
	keys    map[string]string
	def     agent.ToolDefinition // as offered: the pinned definition (see resolve)
	// unapproved says def is not the tool as the server lists it now,
	// whose definition nobody approved for everybody.
	unapproved bool
}

func (t *mcpTool) Definition() agent.ToolDefinition { return t.def }

func (t *mcpTool) Execute(ctx context.Context, args json.RawMessage, progress agent.Progress) (string, error) {
	if t.mcpName == "" { // the stand-in of an OAuth server's tools
		return t.e.connectCall(ctx)
	}
	// The call was approved: it runs the definition it was decided on
	// (see NoteApproval), which is the user's pin from now on, and not
	// one the server listed since.
	if spec := t.e.spec(t.mcpName); spec != nil && t.e.pins != nil {
		if err := t.e.pins.approve(ctx, t.e, spec); err != nil {
			return "", t.e.wrap(err)
		}
	}
	if len(t.keys) > 0 {
		args = restoreKeys(args, t.keys)
	}
	return t.e.call(ctx, t.mcpName, args, progress)
}

// Tools returns the tools of all servers as agent tools, server by server
// in configuration order, each server's in the order it lists them, without
// the DisabledTools.
//
// A tool's definition is the one pinned for everybody (see the package
// documentation): a tool the server changed since it was pinned is
// offered as pinned, and one the server added since with none of the
// server's text, until a person approves it.
//
// A tool's name is its MCP name, with characters a function name cannot
// have (anything but letters, digits, '_' and '-') replaced by '_'. When
// servers have tools of the same name, each of them is named
// <server>__<tool> instead, the server's name made valid the same way; a
// name longer than 64 characters is shortened, keeping it unique with a
// hash. Its parameters are the tool's input schema, which the agent checks
// arguments against before anyone is asked to approve the call; a schema
// the agent cannot use (one that refers to other documents, say) is
// replaced by an open object and given to the model in the description
// instead, and the server checks the arguments itself. Its SkipApproval
// comes from the configuration.
//
// The model never reads a secret of a server's configuration (see
// [ServerConfig]) in a tool: the secrets are redacted in its name, its
// description (or title) and everywhere in its input schema (descriptions,
// titles, enum values, defaults, examples, nested properties, definitions;
// strings, numbers and keys alike). A tool whose MCP name held a secret is
// called by its MCP name all the same; a property whose name held one is
// named as redacted to the model, and the call gives the server the name
// it knows. A tool whose schema has two names that read the same once
// redacted (two properties named after two secrets) is not offered, since
// the model's arguments could not be told apart; a warning is logged.
//
// A tool that declares an output schema gives the model its structured
// content as compact JSON, checked against that schema first: a result
// without structured content, or with one that does not match, is an
// error the model reads (its text copy is not passed on). A tool's error
// result, and the result of a tool without an output schema, pass as
// text (see the package documentation).
//
// A tool of a per_conversation server runs on the instance of the
// conversation its call belongs to ([agent.CallInfo.Conversation]): the
// run's session, or a sub-agent's run of its own; a call from a run without
// a session id fails.
//
// When a shared server says its tools changed, its list is read again:
// Tools and [Client.Servers] show the new list, and the registries that
// [Client.Register] filled are updated; a host that took the tools with
// Tools calls it again. Servers announce changes over stdio
// and SSE, and over streamable HTTP at protocol 2026-07-28.
func (c *Client) Tools() []agent.Tool {
	resolved := c.resolve()
	out := make([]agent.Tool, len(resolved))
	for i, t := range resolved {
		out[i] = t
	}
	return out
}

// Register adds [Client.Tools] to r. A tool whose name r already has (a
// host's own tools win) is added as <server>__<tool>; Register fails when
// that name is taken too, or r refuses a tool, leaving r as it was.
// [Client.Servers] reports the names the tools were added under, as the
// last Register gave them.
//
// r is kept up to date: when a server's list changes (a
// notifications/tools/list_changed, a reconnection that lists other
// tools, the first person who connects an OAuth server whose tools only
// its users may list), or a change is approved for everybody, the tools
// this client added to r are replaced by the new list, so the next run
// offers it (a run works with the tools as they were when it started).
// Registering into r again does the same at once, in one change of r
// ([agent.ToolRegistry.Replace]): a run that starts meanwhile sees the old
// tools or the new ones. A failure of such an update is logged, and leaves
// r as it was.
//
// The host's choices in r outlive such updates. A tool keeps the name it
// was added under while its server lists it, whatever the new list adds
// (another server's tool of the same name is added as <server>__<tool>),
// so that [agent.ToolRegistry.SetSkipApproval] for that name goes on
// holding for that tool; a tool the host removed from r
// ([agent.ToolRegistry.Remove]), or replaced with one of its own under its
// name, is not added again.
func (c *Client) Register(r *agent.ToolRegistry) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return c.registerLocked(r)
}

// toolsChanged updates the registries Register filled after a server's
// list changed.
func (c *Client) toolsChanged() {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	for r := range c.regs {
		if err := c.registerLocked(r); err != nil {
			c.log.Warn("updating the registered tools after a list change failed", "err", err)
		}
	}
}

// registerLocked adds the tools to r, in place of those the last Register
// into r added, in one change of r (agent.ToolRegistry.Replace). c.regMu
// is held.
func (c *Client) registerLocked(r *agent.ToolRegistry) error {
	if c.regs == nil {
		c.regs = make(map[*agent.ToolRegistry]map[toolKey]string)
	}
	var old []string // this client's tools in r, replaced
	mine := make(map[string]bool)
	for _, name := range c.regs[r] {
		if t, _, ok := r.Lookup(name); ok {
			if mt, ok := t.(*mcpTool); ok && c.owns(mt.e) {
				old = append(old, name)
				mine[name] = true
			}
		}
	}
	// A name is taken when r keeps it (a host's tool) or a tool of this
	// list has it already.
	chosen := make(map[string]bool)
	taken := func(name string) bool {
		if chosen[name] {
			return true
		}
		_, _, ok := r.Lookup(name)
		return ok && !mine[name]
	}
	resolved := c.resolve()
	names := make([]string, len(resolved))
	// A tool this client added to r keeps its name while its server lists
	// it, whatever a new list adds (a tool of another server, or of its
	// own, that would take the name): a name goes on meaning one tool, so
	// the host's choices for it stand (see agent.ToolRegistry.Replace).
	// One whose name r now gives a tool of the host's was replaced by the
	// host: it stays out, as one the host removed does.
	prev := c.regs[r]
	for i, t := range resolved {
		if name, ok := prev[toolKey{t.e, t.mcpName}]; ok {
			names[i] = name
			chosen[name] = true
		}
	}
	for i, t := range resolved {
		if names[i] != "" {
			continue
		}
		name := t.def.Name
		if taken(name) {
			name = fitName(t.e.prefix() + "__" + t.base)
			if taken(name) {
				return fmt.Errorf("mcpclient: tool %q of server %q: the names %q and %q are both taken", t.e.red.String(t.mcpName), t.e.cfg.Name, t.def.Name, name)
			}
		}
		names[i] = name
		chosen[name] = true
	}
	added := make(map[toolKey]string)
	var tools []agent.Tool
	for i, t := range resolved {
		added[toolKey{t.e, t.mcpName}] = names[i]
		if _, _, ok := r.Lookup(names[i]); ok && !mine[names[i]] {
			continue // the host's tool has the name (see above)
		}
		if names[i] != t.def.Name {
			renamed := *t
			renamed.def.Name = names[i]
			t = &renamed
		}
		tools = append(tools, t)
	}
	if err := r.Replace(old, tools...); err != nil {
		return fmt.Errorf("mcpclient: %w", err)
	}
	c.regs[r] = added
	c.mu.Lock()
	c.registered = added
	c.mu.Unlock()
	return nil
}

// owns reports whether e is a server of c.
func (c *Client) owns(e *serverEntry) bool {
	for _, x := range c.entries {
		if x == e {
			return true
		}
	}
	return false
}

// toolKey names a tool of a server.
type toolKey struct {
	e       *serverEntry
	mcpName string
}

// resolve settles the names of the tools of all servers.
func (c *Client) resolve() []*mcpTool {
	type item struct {
		e      *serverEntry
		spec   *toolSpec
		pinned *pinRecord
	}
	var items []item
	servers := make(map[string]map[*serverEntry]bool) // base name → servers having it
	for _, e := range c.entries {
		pinned := e.offeredPin()
		for _, spec := range e.specs() {
			items = append(items, item{e, spec, pinned})
			if servers[spec.base] == nil {
				servers[spec.base] = make(map[*serverEntry]bool)
			}
			servers[spec.base][e] = true
		}
	}
	out := make([]*mcpTool, 0, len(items))
	used := make(map[string]bool, len(items))
	for _, it := range items {
		name := it.spec.base
		if len(servers[name]) > 1 {
			name = it.e.prefix() + "__" + name
		}
		name = fitName(name)
		// Names that are still the same (two tools of one server that
		// differ only in characters replaced by '_') get a number.
		for n := 2; used[name]; n++ {
			name = fitName(it.spec.base + "_" + strconv.Itoa(n))
			if len(servers[it.spec.base]) > 1 {
				name = fitName(it.e.prefix() + "__" + it.spec.base + "_" + strconv.Itoa(n))
			}
		}
		used[name] = true
		t := &mcpTool{e: it.e, mcpName: it.spec.mcpName, base: it.spec.base, keys: it.spec.keys, def: agent.ToolDefinition{
			Name:         name,
			SkipApproval: it.spec.skip,
		}}
		t.offer(it.spec, it.pinned)
		out = append(out, t)
	}
	return out
}

// offer sets what the model reads of t (its description, parameters and
// hints) to what pinned, the pin of everybody, has of spec: a definition
// the server changed since is offered as pinned, and one the pin does not
// have (a tool added since, or every tool while the pin cannot be read)
// with none of the server's text (the name aside), so that the model never
// reads a description or schema that nobody approved. A call of such a
// tool asks a person, who sees the tool as the server lists it (see
// NoteApproval).
func (t *mcpTool) offer(spec *toolSpec, pinned *pinRecord) {
	current := func() {
		t.def.Description, t.def.Parameters, t.def.Hints = spec.desc, spec.params, ptr(spec.hints)
	}
	if spec.mcpName == "" || t.e.pins == nil {
		current() // the stand-in of an OAuth server's tools, or a test's entry
		return
	}
	t.unapproved = true
	var p pinnedTool
	var ok bool
	if pinned != nil {
		p, ok = pinned.Tools[t.e.pinName(spec)]
	}
	if ok && p.equal(pinnedOf(spec)) {
		t.unapproved = false
		current()
		return
	}
	var params map[string]any
	if ok && json.Unmarshal(p.Schema, &params) == nil && params != nil {
		h := p.Hints
		h.Trusted = spec.hints.Trusted // the host's word, never pinned
		t.def.Description, t.def.Parameters, t.def.Hints = p.Description, params, &h
		return
	}
	t.def.Description = fmt.Sprintf("A tool of the MCP server %q that is not approved yet: a person sees its definition and decides before a call runs.", t.e.cfg.Name)
	t.def.Parameters = map[string]any{"type": "object", "properties": map[string]any{}}
	t.def.Hints = &agent.ToolHints{Destructive: true, OpenWorld: true} // the cautious hints, untrusted
}

// prefix is the server's name as a prefix of tool names.
func (e *serverEntry) prefix() string { return sanitizeName(e.cfg.Name) }

// specs returns the server's tools converted for the agent.
func (e *serverEntry) specs() []*toolSpec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.converted
}

// convertTools converts a server's tools for the agent, leaving out the
// disabled ones.
func (e *serverEntry) convertTools(tools []mcp.Tool) []*toolSpec {
	specs := make([]*toolSpec, 0, len(tools))
	for _, t := range tools {
		if slices.Contains(e.cfg.DisabledTools, t.Name) {
			continue
		}
		spec, err := e.convertTool(t)
		if err != nil {
			e.log.Warn("this tool is not offered", "tool", t.Name, "err", err)
			continue
		}
		specs = append(specs, spec)
	}
	return specs
}

// convertTool converts a tool for the agent, with the secrets of the
// server's configuration redacted in all that the model reads of it.
func (e *serverEntry) convertTool(t mcp.Tool) (*toolSpec, error) {
	desc := t.Description
	if desc == "" {
		desc = cmp(t.Title, t.Annotations.Title)
	}
	spec := &toolSpec{
		mcpName: t.Name,
		base:    e.toolName(t.Name),
		desc:    e.red.String(desc),
		skip:    e.cfg.SkipApproval || slices.Contains(e.cfg.SkipApprovalTools, t.Name),
		task: t.Execution != nil && (t.Execution.TaskSupport == mcp.TaskSupportOptional ||
			t.Execution.TaskSupport == mcp.TaskSupportRequired),
		hints: hintsOf(t.Annotations, e.cfg.Trusted),
	}
	// The schema as the server gave it, redacted before anything reads it.
	var schema any
	var sr schemaRedaction
	raw, err := schemaJSON(t)
	if err == nil {
		if err = json.Unmarshal(raw, &schema); err != nil {
			err = fmt.Errorf("the input schema is not JSON: %w", err)
		}
	}
	if err == nil {
		schema = e.red.schema(schema, &sr)
		if sr.clash != "" {
			return nil, fmt.Errorf("two names in its input schema read %q once their secrets are redacted, so that arguments could not be told apart", sr.clash)
		}
		spec.keys = sr.keys
		spec.params, err = inputSchema(schema)
	}
	if err != nil {
		e.log.Warn("the agent cannot check the arguments of this tool: its schema goes to the model in the description", "tool", t.Name, "err", err)
		spec.params = map[string]any{"type": "object", "properties": map[string]any{}}
		spec.desc = describeSchema(spec.desc, schema)
	}
	if t.OutputSchema.Type != "" {
		if spec.output, err = compileOutput(t.OutputSchema); err != nil {
			e.log.Warn("the output schema of this tool cannot be used: its structured results are not checked", "tool", t.Name, "err", err)
		}
	}
	return spec, nil
}

// toolName is the name a tool is offered under: its MCP name made a valid
// function name, with the secrets redacted as written and as made valid.
func (e *serverEntry) toolName(name string) string {
	return sanitizeName(e.names.String(sanitizeName(e.red.String(name))))
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// schemaJSON is a tool's input schema as JSON.
//
// mcp-go keeps only some keywords of the schema's top level (type,
// properties, required, additionalProperties, $defs, which also takes
// definitions), so the arguments are checked against a schema that may be
// looser than the server's, never stricter: the server checks them again.
func schemaJSON(t mcp.Tool) ([]byte, error) {
	if t.RawInputSchema != nil {
		return t.RawInputSchema, nil
	}
	return json.Marshal(t.InputSchema)
}

// inputSchema converts a tool's input schema, decoded, to the agent's
// parameters, and checks that the agent can compile it.
func inputSchema(schema any) (map[string]any, error) {
	params, ok := schema.(map[string]any)
	if !ok && schema != nil {
		return nil, errors.New("the input schema is not a JSON object")
	}
	if params == nil {
		params = map[string]any{}
	}
	// The arguments are always an object: a schema without a type, or
	// with an empty one, describes them as one.
	if typ, _ := params["type"].(string); typ == "" {
		params["type"] = "object"
	}
	if params["properties"] == nil {
		params["properties"] = map[string]any{}
	}
	if r, ok := params["required"].([]any); ok && len(r) == 0 {
		delete(params, "required")
	}
	// The agent's own check, so that a registry never refuses the tool.
	if _, err := agent.NewToolRegistry(agent.FuncTool{Def: agent.ToolDefinition{Name: "schema_check", Parameters: params}}); err != nil {
		return nil, err
	}
	return params, nil
}

// maxSchemaText bounds a schema given to the model in a description.
const maxSchemaText = 4096

// describeSchema adds schema, decoded and redacted, to a tool's
// description.
func describeSchema(desc string, schema any) string {
	if schema == nil {
		return desc
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return desc
	}
	s := string(b)
	if len(s) > maxSchemaText {
		s = s[:maxSchemaText] + "…"
	}
	if desc != "" {
		desc += "\n\n"
	}
	return desc + "Arguments (JSON schema): " + s
}

// sanitizeName makes s a valid function name: characters other than
// letters, digits, '_' and '-' become '_'.
func sanitizeName(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			out = append(out, byte(r))
		default:
			out = append(out, '_')
		}
	}
	if len(out) == 0 {
		return "tool"
	}
	return string(out)
}

// maxName is the longest function name the chat-completions API takes.
const maxName = 64

// fitName shortens a name longer than maxName, keeping it unique with a
// hash of the whole name.
func fitName(name string) string {
	if len(name) <= maxName {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	return name[:maxName-len(suffix)] + suffix
}
