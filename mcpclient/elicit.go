package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

// elicitor answers a server's requests for input (elicitation, form and
// URL mode) through the interact.Asker of the call that is running (its
// context's: a runner's, or the host's own), shown to the user of that
// call's session. It is the client.ElicitationHandler of one connection.
//
// At protocol 2026-07-28 a request comes as an input_required result of
// the call itself (a multi round-trip request): it is handled in the
// call's context, and the call is re-issued with the answer. Before that
// version the server sends an elicitation/create request on the
// connection, which names no call: it is given to the connection's only
// call in flight, and declined when there is none or more than one.
type elicitor struct {
	c *conn

	mu    sync.Mutex // guards calls
	calls map[*int]context.Context
}

// elicitationCapability is what the client declares: both modes.
var elicitationCapability = mcp.ClientCapabilities{
	Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}},
}

// elicitationOptions returns the client options of a connection of e. The
// capability is always declared: a call whose run has no interact.Asker
// declines every request for input, and the call's result says why (no
// person can answer), so that a server that asks learns it at once
// instead of failing its call.
func (c *conn) elicitationOptions() []client.ClientOption {
	c.elicit = &elicitor{c: c, calls: make(map[*int]context.Context)}
	return []client.ClientOption{client.WithClientCapabilities(elicitationCapability), client.WithElicitationHandler(c.elicit)}
}

// track records ctx as a call in flight on the connection until the
// returned func is called.
func (h *elicitor) track(ctx context.Context) func() {
	if h == nil {
		return func() {}
	}
	k := new(int)
	h.mu.Lock()
	h.calls[k] = ctx
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.calls, k)
		h.mu.Unlock()
	}
}

// soleCall returns the context of the only call in flight, or nil.
func (h *elicitor) soleCall() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) != 1 {
		return nil
	}
	for _, ctx := range h.calls {
		return ctx
	}
	return nil
}

// Elicit implements client.ElicitationHandler.
func (h *elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e := h.c.e
	legacy := false
	if _, ok := agent.CallFromContext(ctx); !ok {
		// An elicitation/create request of a connection before 2026-07-28:
		// the call it belongs to is the one in flight.
		call := h.soleCall()
		if call == nil {
			e.log.Warn("declined a request for input that belongs to no single call in flight")
			return declined(), nil
		}
		merged, cancel := context.WithCancel(call)
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		ctx, legacy = merged, true
	}
	asker, ok := interact.AskerFrom(ctx)
	if !ok {
		e.log.Warn("declined a request for input: no person can answer (the run's context has no interact.Asker)")
		noteDecline(ctx, "no person can answer: the run has no one to ask (no interact.Asker in its context)")
		return declined(), nil
	}
	if !legacy {
		// The call may wait past this process: a resumed turn sends it
		// again (its server asks again and finds the answer), which the
		// saved state allows. A call that saved nothing is never sent
		// twice: it stopped before any person was asked.
		st := taskState{V: taskStateVersion, Server: e.cfg.Name, Tool: h.toolOf(ctx), Input: true}
		if info, ok := agent.CallFromContext(ctx); ok && info.State == "" && st.Tool != "" {
			if err := agent.SaveCallState(ctx, st.encode()); err != nil && !errors.Is(err, agent.ErrNoCallRecord) {
				return nil, err
			}
		}
	}
	p := req.Params
	// What the person is shown, and what may be stored, logged or shown in
	// a chunk, holds no secret of the configuration, in any field.
	form, err := e.red.form(p.RequestedSchema)
	if err != nil {
		e.log.Warn("declined a request for input", "err", err)
		noteDecline(ctx, err.Error())
		return declined(), nil
	}
	ans, err := asker.Elicit(ctx, interact.ElicitationRequest{
		Server:  e.cfg.Name,
		Mode:    e.red.String(p.Mode),
		Message: e.red.String(p.Message),
		Schema:  form.schema,
		URL:     e.red.String(p.URL),
	})
	var s *agent.Suspension
	switch {
	case err == nil:
	case errors.As(err, &s) && !legacy:
		return nil, err // the run suspends; the resumed turn asks again and finds the answer
	case errors.Is(err, interact.ErrInvalidForm), errors.Is(err, interact.ErrSecretField), errors.Is(err, interact.ErrNoSession):
		e.log.Warn("declined a request for input", "err", err)
		why := strings.TrimPrefix(err.Error(), "interact: ")
		if errors.Is(err, interact.ErrNoSession) {
			why = "no person can answer: the run has no session"
		}
		noteDecline(ctx, why)
		return declined(), nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	default:
		if legacy && errors.As(err, &s) {
			// A server's request holds the call: it cannot outlive this process.
			e.log.Warn("cancelled a request for input whose run suspended: the server asked with a request of its own (protocol before 2026-07-28)")
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}, nil
		}
		return nil, err
	}
	res := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseAction(ans.Action)}}
	if ans.Action == interact.ActionAccept && ans.Content != nil {
		res.Content = form.restore(ans.Content)
	}
	return res, nil
}

// declines collects why the client declined a call's requests for input,
// for the call's result: the run says why, not only the log.
type declines struct {
	tool string // the MCP name of the call's tool
	mu   sync.Mutex
	why  []string // guarded by mu
}

type declinesKey struct{}

// withDeclines returns ctx carrying a collector of the call's declines;
// a nil elicitor adds none.
func (h *elicitor) withDeclines(ctx context.Context, tool string) (context.Context, *declines) {
	if h == nil {
		return ctx, nil
	}
	d := &declines{tool: tool}
	return context.WithValue(ctx, declinesKey{}, d), d
}

// toolOf returns the MCP name of the tool of the call of ctx; empty for a
// context of no call of the connection.
func (h *elicitor) toolOf(ctx context.Context) string {
	if d, ok := ctx.Value(declinesKey{}).(*declines); ok {
		return d.tool
	}
	return ""
}

// noteDecline records why for the call of ctx.
func noteDecline(ctx context.Context, why string) {
	if d, ok := ctx.Value(declinesKey{}).(*declines); ok {
		d.mu.Lock()
		d.why = append(d.why, why)
		d.mu.Unlock()
	}
}

// explain adds the declines of d to a call's result, or to its tool error.
func (d *declines) explain(out string, err error) (string, error) {
	if d == nil {
		return out, err
	}
	d.mu.Lock()
	why := strings.Join(d.why, "; ")
	d.mu.Unlock()
	if why == "" {
		return out, err
	}
	note := "\n(the client declined the server's request for input: " + why + ")"
	var te toolError
	switch {
	case err == nil:
		return out + note, nil
	case errors.As(err, &te):
		return "", toolError(string(te) + note)
	}
	return out, err
}

// redactedForm is a requested schema as the person is shown it: with the
// secrets of the server's configuration redacted in every key and value
// (titles, descriptions, defaults, options and their names, property
// names), and what gives the server the answer in its own words.
type redactedForm struct {
	schema json.RawMessage
	// keys maps a property's name as shown to the name the server wrote,
	// where they differ.
	keys map[string]string
	// options maps, for a property (by the name the server wrote), an
	// option as shown to the option the server wrote, where they differ.
	options map[string]map[string]string
}

// form redacts schema, a server's requested schema as mcp-go decoded it;
// nil gives none. It fails when two property names, or other keys, would
// read the same once redacted: the answer could not say which it meant.
func (r redactor) form(schema any) (redactedForm, error) {
	var f redactedForm
	if schema == nil {
		return f, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return f, nil // no schema: the form is refused as such
	}
	if r.secretSet == nil {
		f.schema = raw
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return f, nil
	}
	var sr schemaRedaction
	red := r.schema(v, &sr)
	if sr.clash != "" {
		return f, fmt.Errorf("two keys of the requested schema read %q once the secrets of the configuration are redacted", sr.clash)
	}
	if f.schema, err = json.Marshal(red); err != nil {
		return f, nil
	}
	top, _ := v.(map[string]any)
	props, _ := top["properties"].(map[string]any)
	for name, p := range props {
		if rn := r.String(name); rn != name {
			if f.keys == nil {
				f.keys = make(map[string]string)
			}
			f.keys[rn] = name
		}
		for _, o := range optionsOf(p) {
			if ro := r.String(o); ro != o {
				if f.options == nil {
					f.options = make(map[string]map[string]string)
				}
				if f.options[name] == nil {
					f.options[name] = make(map[string]string)
				}
				f.options[name][ro] = o
			}
		}
	}
	return f, nil
}

// optionsOf returns the strings a property's value may be chosen from: its
// enum, or the consts of its oneOf or anyOf, or those of its items.
func optionsOf(p any) []string {
	m, _ := p.(map[string]any)
	if items, ok := m["items"].(map[string]any); ok {
		m = items
	}
	var out []string
	if enum, ok := m["enum"].([]any); ok {
		for _, e := range enum {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	for _, list := range []string{"oneOf", "anyOf"} {
		choices, _ := m[list].([]any)
		for _, c := range choices {
			choice, _ := c.(map[string]any)
			if s, ok := choice["const"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// restore returns content, an accepted answer to f, with the property
// names and chosen options the server wrote.
func (f redactedForm) restore(content map[string]any) map[string]any {
	if f.keys == nil && f.options == nil {
		return content
	}
	out := make(map[string]any, len(content))
	for k, v := range content {
		if orig, ok := f.keys[k]; ok {
			k = orig
		}
		if opts := f.options[k]; opts != nil {
			switch x := v.(type) {
			case string:
				if orig, ok := opts[x]; ok {
					v = orig
				}
			case []any:
				chosen := make([]any, len(x))
				for i, c := range x {
					if s, ok := c.(string); ok {
						if orig, ok := opts[s]; ok {
							c = orig
						}
					}
					chosen[i] = c
				}
				v = chosen
			}
		}
		out[k] = v
	}
	return out
}

func declined() *mcp.ElicitationResult {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
}
